"""torch.hpu answers the way the real bridge's does; packaging, hl-smi, fallback logs."""
import importlib.metadata
import os
import re
import subprocess
import sys

import pytest
import torch

import habana_frameworks.torch.core as htcore
import habana_frameworks.torch.hpu as hthpu
from habana_frameworks.torch.hpu import metrics


def _run(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)


def test_device_queries():
    assert torch.hpu is hthpu and htcore.hpu is hthpu
    assert torch.hpu.is_available() and torch.hpu.device_count() == 1
    assert torch.hpu.current_device() == 0
    assert torch.hpu.get_device_name() == "GAUDI2" and torch.hpu.get_device_name(0) == "GAUDI2"
    assert torch.hpu.is_bf16_supported()
    torch.hpu.init()
    assert torch.hpu.is_initialized()
    torch.hpu._lazy_init()
    torch.hpu.synchronize()
    torch.hpu.set_device(0)
    with pytest.raises(AssertionError, match="only supported device idx is 0"):
        torch.hpu.set_device(1)
    assert torch.hpu.get_arch_list() == ["GAUDI2"]
    assert isinstance(torch.hpu.get_device_properties(0), str)
    with torch.hpu.device(0):
        assert torch.zeros(1, device="hpu").device.index == 0


def test_multi_device_rules():
    code = ("import torch\n"
            "print(torch.hpu.device_count())\n"
            "torch.hpu.set_device(1)\n"
            "print(torch.hpu.current_device(), torch.zeros(1, device='hpu').device)\n"
            "with torch.hpu.device(0):\n"
            "    print(torch.zeros(1, device='hpu').device)\n"
            "y = torch.ones(2, device='hpu:1') + torch.ones(2, device='hpu:1')\n"
            "print(y.device, y.cpu().tolist())\n"
            "try:\n"
            "    torch.ones(2, device='hpu:0') + torch.ones(2, device='hpu:1')\n"
            "except RuntimeError as e:\n"
            "    print('ERR', e)\n")
    r = _run(code, HPUSIM_DEVICE_COUNT="2", HABANA_VISIBLE_MODULES="0,1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "2" and lines[1] == "1 hpu:1" and lines[2] == "hpu:0"
    assert lines[3] == "hpu:1 [2.0, 2.0]"
    assert "Expected all tensors to be on the same device" in lines[4]


def test_streams_events_and_rng_api():
    s = torch.hpu.Stream()
    assert isinstance(s, torch.Stream) and s.device == torch.device("hpu:0")
    assert torch.hpu.current_stream().device.type == "hpu"
    with torch.hpu.stream(s):
        assert torch.hpu.current_stream() is s
    torch.hpu.default_stream().synchronize()
    start, end = torch.hpu.Event(enable_timing=True), torch.hpu.Event(enable_timing=True)
    start.record()
    torch.ones(100, device="hpu").sum()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0 and end.query()
    assert len(torch.hpu.get_rng_state_all()) == 1 and len(torch.hpu.default_generators) == 1
    with pytest.raises(RuntimeError, match="supports only device 0"):
        torch.hpu.get_rng_state(1)
    with pytest.raises(RuntimeError):
        torch.hpu.set_rng_state_all([torch.hpu.get_rng_state()] * 2)
    torch.hpu.manual_seed(5)
    assert torch.hpu.initial_seed() == 5


def test_mark_step_is_eager_noop():
    assert not htcore.is_lazy()
    assert htcore.mark_step() is None
    htcore.mark_step(sync=True)
    htcore.iter_mark_step()


def test_import_torch_alone_registers_hpu_and_warns_lazy_only():
    r = _run("import torch\nx = torch.ones(2, device='hpu')\nprint(x.device, hasattr(torch, 'hpu'))")
    assert r.returncode == 0, r.stderr
    assert "hpu:0 True" in r.stdout
    for fn in ("add_step_closure", "mark_step", "iter_mark_step"):
        assert (f"Calling {fn} function does not have any effect. It's lazy mode only functionality. "
                "(warning logged once)") in r.stderr


def test_lazy_mode_request_is_lazy_without_lazy_only_warnings():
    r = _run("import habana_frameworks.torch.core as htcore, torch\n"
             "from habana_frameworks.torch import _lazy\n"
             "x = torch.ones(2, device='hpu') * 3\nprint(htcore.is_lazy(), _lazy.pending_ops())\n"
             "htcore.mark_step()\nprint(x.cpu().tolist())",
             PT_HPU_LAZY_MODE="1")
    assert r.returncode == 0, r.stderr
    assert "True 2" in r.stdout and "[3.0, 3.0]" in r.stdout
    assert "lazy mode only functionality" not in r.stderr


def test_packaging_and_hl_smi():
    version = importlib.metadata.version("habana-torch-plugin")
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", version)
    eps = importlib.metadata.entry_points(group="torch.backends")
    assert any(ep.value == "habana_frameworks.autoload:__autoload" for ep in eps)
    import habana_frameworks
    assert getattr(habana_frameworks, "__file__", None) is None  # a PEP 420 namespace package
    from habana_frameworks.torch.utils.library_loader import is_habana_available
    assert is_habana_available()
    v = subprocess.run(["hl-smi", "-v"], capture_output=True, text=True).stdout
    assert re.search(r"hl-([\d\.]+)", v) and "Habana" in v
    table = subprocess.run(["hl-smi"], capture_output=True, text=True).stdout.splitlines()
    assert table[2].replace(" ", "").split(":")[1].split("-")[0] == "1.22.0"
    q = subprocess.run(["hl-smi", "-Q", "index,module_id", "-f", "csv"], capture_output=True, text=True).stdout
    assert q.splitlines()[:2] == ["index, module_id", "0, 0"]
    lst = subprocess.run(["hl-smi", "-L"], capture_output=True, text=True).stdout
    assert re.search(r"hl-gaudi([\d\-])", lst).group(1) == "2"


def test_cpu_fallback_metric_counts(fallback_counter):
    m = metrics.metric_global("cpu_fallback")
    before = dict(m.stats())
    # Other tests in this worker may have compiled recipes (torch.compile, HPU graphs):
    # what matters is that eager CPU fallbacks compile none.
    compiled_before = metrics.metric_global("graph_compilation").stats()[0]
    x = torch.rand(2, 3, 3, device="hpu")
    with metrics.metric_localcontext("cpu_fallback") as local:
        torch.linalg.matrix_exp(x)  # a linear-algebra op: CPU fallback, as on Gaudi
        torch.linalg.matrix_exp(x)
    stats = dict(local.stats())
    assert stats["TotalNumber"] == 2 and stats["FallbackOps"] == {"aten::linalg_matrix_exp": 2}
    after = dict(m.stats())
    assert after["TotalNumber"] >= before["TotalNumber"] + 2
    assert fallback_counter()["aten::linalg_matrix_exp"] == 2
    assert metrics.metric_global("graph_compilation").stats()[0] == compiled_before
    assert metrics.metric_global("recipe_cache") is None  # only with PT_HPU_ENABLE_CACHE_METRICS
    assert metrics.metric_global("nope") is None
    with pytest.raises(metrics.MetricNotFound):
        with metrics.metric_localcontext("nope"):
            pass


def test_fallback_logs_per_call_and_summary_at_exit():
    # Two linear-algebra ops, which stay on the CPU as on Gaudi.
    code = ("import torch\nx = torch.rand(2, 3, 3, device='hpu').bfloat16()\n"
            "torch.linalg.matrix_exp(x); torch.linalg.matrix_exp(x); torch.linalg.qr(x.float())\n")
    r = _run(code, PT_HPU_LOG_MOD_MASK="0x80", PT_HPU_LOG_TYPE_MASK="0x8")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("CPU fallback linalg_matrix_exp : self=HPUBFloat16Type") == 2
    r2 = _run(code, ENABLE_CONSOLE="true")
    assert re.search(r"CPU Fallback stats:\n2\taten::linalg_matrix_exp\n1\taten::linalg_qr", r2.stderr), r2.stderr


def test_place_on_cpu_restricts_fallback():
    code = ("import torch\nx = torch.tensor([0.5, 1.0, 2.0, 3.0], device='hpu')\n"
            "try:\n    torch.linalg.matrix_exp(x.reshape(2, 2))\nexcept RuntimeError as e:\n    print('ERR', e)\n"
            "print(torch.lgamma(x).shape)\n")
    r = _run(code, PT_HPU_PLACE_ON_CPU="lgamma")
    assert r.returncode == 0, r.stderr
    assert "ERR linalg_matrix_exp is not yet supported on HPU." in r.stdout
    assert "torch.Size([4])" in r.stdout


def test_metrics_dump_file(tmp_path):
    target = tmp_path / "metrics.json"
    r = _run("import torch\ntorch.linalg.matrix_exp(torch.eye(2, device='hpu'))\n",
             PT_HPU_METRICS_FILE=str(target), RANK="1")
    assert r.returncode == 0, r.stderr
    dumped = tmp_path / "metrics-rank1.json"
    import json
    data = json.loads(dumped.read_text())
    fb = [d for d in data if d["metric_name"] == "cpu_fallback"][0]
    assert fb["triggered_by"] == "process_exit"
    assert fb["statistics"]["FallbackOps"] == {"aten::linalg_matrix_exp": 1}
    path2 = tmp_path / "m.txt"
    metrics.metrics_dump(str(path2), format="text")
    assert "Metric name: cpu_fallback" in path2.read_text()
