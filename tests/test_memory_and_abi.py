"""Memory accounting, OOM, C ABI misuse and panics: the device never crashes Python."""
import os
import subprocess
import sys
from array import array

import pytest
import torch

from habana_frameworks.torch import _native


def test_memory_accounting_returns_to_baseline():
    torch.hpu.synchronize()
    base = torch.hpu.memory_stats()
    x = torch.empty(1024, 1024, device="hpu")  # 4 MiB
    s = torch.hpu.memory_stats()
    assert s["InUse"] - base["InUse"] == 4 << 20
    assert s["NumAllocs"] == base["NumAllocs"] + 1
    assert s["MaxInUse"] >= s["InUse"]
    assert torch.hpu.memory_allocated() == s["InUse"]
    del x
    s2 = torch.hpu.memory_stats()
    assert s2["InUse"] == base["InUse"]
    assert s2["NumFrees"] == base["NumFrees"] + 1
    assert s2["ActiveAllocs"] == s2["NumAllocs"] - s2["NumFrees"]
    torch.hpu.reset_peak_memory_stats()
    assert torch.hpu.max_memory_allocated() == torch.hpu.memory_allocated()


def test_freed_memory_is_reused_then_returned_by_empty_cache():
    # The allocator keeps freed blocks (as the bridge's pool keeps HBM): a second tensor of
    # the same size takes the first one's block without a new host allocation, and
    # empty_cache hands the cached blocks back to the host.
    torch.hpu.synchronize()
    torch.hpu.empty_cache()
    x = torch.ones(1000, 777, device="hpu")
    ptr = x.data_ptr()
    del x
    torch.hpu.synchronize()
    base = torch.hpu.memory_stats()
    y = torch.full((1000, 777), 2.0, device="hpu")
    s = torch.hpu.memory_stats()
    assert y.data_ptr() == ptr
    assert s["NumAllocs"] == base["NumAllocs"] + 1
    assert s["TotalSystemAllocs"] == base["TotalSystemAllocs"]
    assert torch.equal(y.cpu(), torch.full((1000, 777), 2.0))
    del y
    torch.hpu.synchronize()
    torch.hpu.empty_cache()
    s2 = torch.hpu.memory_stats()
    assert s2["TotalSystemFrees"] > s["TotalSystemFrees"]
    assert s2["TotalActiveAllocs"] == s2["TotalSystemAllocs"] - s2["TotalSystemFrees"]


def test_memory_stats_keys_and_derived_apis():
    s = torch.hpu.memory_stats()
    assert list(s) == ["Limit", "InUse", "MaxInUse", "NumAllocs", "NumFrees", "ActiveAllocs",
                       "MaxAllocSize", "TotalSystemAllocs", "TotalSystemFrees", "TotalActiveAllocs"]
    assert s["Limit"] == 96 << 30  # GAUDI2 default
    assert torch.hpu.memory_reserved() == s["Limit"] == torch.hpu.max_memory_reserved()
    free, total = torch.hpu.mem_get_info()
    assert total == s["Limit"] and free == s["Limit"] - torch.hpu.memory_allocated()
    text = torch.hpu.memory_summary()
    assert "PyTorch HPU memory summary, device ID 0" in text and "Limit:" in text
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.hpu.memory_stats(5)
    import habana_frameworks.torch.hpu as torch_hpu
    assert torch_hpu.hpu.memory_stats(0)["Limit"] == s["Limit"]  # lightning's spelling


def _run(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)


def test_oom_raises_bridge_message_and_process_survives():
    code = (
        "import torch\n"
        "try:\n"
        "    torch.empty(128 << 20, dtype=torch.uint8, device='hpu')\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n"
        "x = torch.ones(10, device='hpu')\n"
        "print('SUM', x.sum().item(), torch.hpu.memory_stats()['Limit'])\n")
    r = _run(code, HPUSIM_MEMORY_LIMIT="64MB")
    assert r.returncode == 0, r.stderr
    assert "FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::134217728 (128)MB" in r.stdout
    assert "SUM 10.0 67108864" in r.stdout


def test_fp16_rejected_on_gaudi1():
    code = (
        "import torch\n"
        "print(torch.hpu.get_device_name())\n"
        "try:\n"
        "    torch.zeros(2, dtype=torch.float16, device='hpu')\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n")
    r = _run(code, HPUSIM_DEVICE_TYPE="GAUDI")
    assert r.returncode == 0, r.stderr
    assert "GAUDI\n" in r.stdout
    assert "float16/half is not supported on Gaudi." in r.stdout
    assert torch.hpu.memory_stats()["Limit"] == 96 << 30


def test_gaudi3_capacity():
    r = _run("import torch; print(torch.hpu.get_device_name(), torch.hpu.memory_stats()['Limit'])",
             HPUSIM_DEVICE_TYPE="GAUDI3")
    assert r.stdout.split() == ["GAUDI3", str(128 << 30)], r.stderr


def test_c_abi_misuse_returns_errors():
    go = _native.go()
    assert go.hpusim_op_id(b"no_such_op") == -1
    frame = array("q", [0, 0])
    assert _native.run_raw(10_000, frame) != 0
    assert "unknown op handle" in _native.last_error()
    copy_id = _native.op_id("copy")
    # null data pointer for a non-empty tensor
    bad = array("q", [2, 0, 6, 1, 4, 1, 0, 6, 1, 4, 1, 0])
    assert _native.run_raw(copy_id, bad) != 0
    assert "null data pointer" in _native.last_error()
    # bad dtype code
    t = torch.zeros(4, device="hpu")
    bad_dtype = array("q", [2, t.data_ptr(), 99, 1, 4, 1, t.data_ptr(), 6, 1, 4, 1, 0])
    assert _native.run_raw(copy_id, bad_dtype) != 0
    assert "unsupported dtype code 99" in _native.last_error()
    # truncated frame
    assert _native.run_raw(copy_id, array("q", [2, 1])) != 0
    # alloc with a null out pointer, free of an unknown pointer
    assert go.hpusim_alloc(0, 16, None) != 0
    assert go.hpusim_free(12345) != 0
    assert "unknown device pointer" in _native.last_error()
    assert go.hpusim_check_dtype(9) != 0
    assert torch.equal(t.cpu(), torch.zeros(4))  # the device still works


@pytest.mark.parametrize("in_worker", [0, 1])
def test_go_panic_becomes_runtime_error(in_worker):
    with pytest.raises(RuntimeError, match="kernel panic: debug_panic"):
        _native.run("debug_panic", (), (in_worker,))
    assert torch.ones(3, device="hpu").sum().item() == 3.0


def _cpuinfo(tmp_path, vendor: str, flags: str) -> str:
    p = tmp_path / "cpuinfo"
    p.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    return str(p)


def test_openblas_coretype_only_for_amd_with_avx512(tmp_path, monkeypatch):
    monkeypatch.delenv("HPUSIM_ISA", raising=False)
    avx512 = "fpu sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16"
    assert _native.openblas_coretype(_cpuinfo(tmp_path, "AuthenticAMD", avx512)) == "SkylakeX"
    # Zen 1-3: AVX2 only, OpenBLAS's own choice stands.
    assert _native.openblas_coretype(_cpuinfo(tmp_path, "AuthenticAMD", "avx avx2 fma")) is None
    # An AVX-512 subset the SkylakeX kernels need is missing.
    assert _native.openblas_coretype(_cpuinfo(tmp_path, "AuthenticAMD", avx512.replace("avx512bw", ""))) is None
    # Intel CPUs with AVX-512 are detected by OpenBLAS itself.
    assert _native.openblas_coretype(_cpuinfo(tmp_path, "GenuineIntel", avx512)) is None
    assert _native.openblas_coretype(str(tmp_path / "missing")) is None


def test_openblas_coretype_follows_hpusim_isa(tmp_path, monkeypatch):
    # HPUSIM_ISA caps OpenBLAS's kernel set with the kernels' own (kernels/isa.h)
    avx512 = "fpu sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl"
    monkeypatch.setenv("HPUSIM_ISA", "avx2")
    assert _native.openblas_coretype(_cpuinfo(tmp_path, "AuthenticAMD", avx512)) == "Haswell"
    assert _native.openblas_coretype(_cpuinfo(tmp_path, "GenuineIntel", avx512)) == "Haswell"
    assert _native.openblas_coretype(_cpuinfo(tmp_path, "GenuineIntel", "fpu sse2")) is None
    monkeypatch.setenv("HPUSIM_ISA", "generic")
    assert _native.openblas_coretype(_cpuinfo(tmp_path, "GenuineIntel", avx512)) == "Prescott"


def test_loaded_openblas_uses_the_chosen_kernels():
    """The core type is set before the Go core (and with it OpenBLAS) loads, so OpenBLAS
    runs the kernels chosen for this CPU, or the user's own OPENBLAS_CORETYPE."""
    code = (
        "import ctypes, os, habana_frameworks.torch, habana_frameworks.torch._native as n\n"
        "lib = ctypes.CDLL('libopenblas.so.0')\n"
        "lib.openblas_get_corename.restype = ctypes.c_char_p\n"
        "print(lib.openblas_get_corename().decode(), os.environ.get('OPENBLAS_CORETYPE'), n.openblas_coretype())\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    core, env_value, chosen = out.stdout.split()
    if chosen != "None":
        assert core == chosen == env_value
    env["OPENBLAS_CORETYPE"] = "Haswell"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[:2] == ["Haswell", "Haswell"]
