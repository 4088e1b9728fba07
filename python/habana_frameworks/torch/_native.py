"""ctypes binding to the Go core (libhpusim.so) and the C++ glue (libhpu_glue.so).

Every call checks the status code; errors become Python exceptions carrying the Go
message, so nothing from the native side can crash the interpreter.
"""
from __future__ import annotations

import ctypes
import os
import threading
from array import array
from typing import Iterable, Sequence

import torch

# HPUSIM_LIB_DIR lets a developer load a private build (the glue and the Go core must sit together).
LIB_DIR = os.environ.get("HPUSIM_LIB_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")

# c10::ScalarType codes, shared with the Go side.
DTYPE_CODE = {
    torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4,
    torch.float16: 5, torch.float32: 6, torch.float64: 7, torch.bool: 11, torch.bfloat16: 15,
    torch.float8_e5m2: 23, torch.float8_e4m3fn: 24,
}

_go: ctypes.CDLL | None = None
_glue: ctypes.CDLL | None = None
_load_lock = threading.Lock()


class NativeError(RuntimeError):
    """An error reported by the Go core."""


def _bind(lib: ctypes.CDLL) -> None:
    i64p = ctypes.POINTER(ctypes.c_int64)
    sigs = {
        "hpusim_init": ([], ctypes.c_int),
        "hpusim_device_count": ([], ctypes.c_int),
        "hpusim_device_name": ([ctypes.c_int, ctypes.c_char_p, ctypes.c_int], ctypes.c_int),
        "hpusim_alloc": ([ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int),
        "hpusim_free": ([ctypes.c_void_p], ctypes.c_int),
        "hpusim_memory_stats": ([ctypes.c_int, i64p], ctypes.c_int),
        "hpusim_reset_peak": ([ctypes.c_int], ctypes.c_int),
        "hpusim_empty_cache": ([], ctypes.c_int),
        "hpusim_reset_accumulated": ([ctypes.c_int], ctypes.c_int),
        "hpusim_check_dtype": ([ctypes.c_int], ctypes.c_int),
        "hpusim_synchronize": ([ctypes.c_int], ctypes.c_int),
        "hpusim_op_id": ([ctypes.c_char_p], ctypes.c_int),
        "hpusim_op_names": ([ctypes.c_char_p, ctypes.c_int], ctypes.c_int),
        "hpusim_run": ([ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int], ctypes.c_int),
        "hpusim_run_labeled": ([ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                ctypes.c_char_p], ctypes.c_int),
        "hpusim_last_error": ([ctypes.c_char_p, ctypes.c_int], ctypes.c_int),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res


# The AVX-512 subsets OpenBLAS's SkylakeX kernels use.
_AVX512 = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")


def openblas_coretype(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The kernel set OpenBLAS should use where its own CPU detection picks a weaker one.

    OpenBLAS 0.3.21 (Debian 12's) runs its AVX2 "Haswell" kernels on AMD Zen 4, although
    Zen 4 has AVX-512: there its "SkylakeX" kernels run sgemm about 1.8x faster. It picks
    the AVX-512 kernels on Intel CPUs that have them, so this answers only for AMD ones,
    and for any CPU under HPUSIM_ISA=avx2 (Haswell) or generic (Prescott)."""
    try:
        with open(cpuinfo) as f:
            vendor, flags = "", set()
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "vendor_id":
                    vendor = value.strip()
                elif key == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        return None
    # HPUSIM_ISA caps the kernels' instruction set (kernels/isa.h): OpenBLAS's too
    isa = os.environ.get("HPUSIM_ISA")
    if isa == "generic":
        return "Prescott"
    if isa == "avx2" and "avx2" in flags:
        return "Haswell"
    if vendor == "AuthenticAMD" and all(f in flags for f in _AVX512):
        return "SkylakeX"
    return None


def load() -> ctypes.CDLL:
    """Load the Go core and the glue once. The glue's static initialisers register the
    HPU device guard, hooks and allocator, so this must run before the first backward."""
    global _go, _glue
    with _load_lock:
        if _go is not None:
            return _go
        go_path = os.path.join(LIB_DIR, "libhpusim.so")
        glue_path = os.path.join(LIB_DIR, "libhpu_glue.so")
        for p in (go_path, glue_path):
            if not os.path.exists(p):
                raise ImportError(
                    f"hpusim native library {p} is missing; build it with `make build` "
                    "(or reinstall the package)")
        # OpenBLAS (linked by the Go core) reads this once as it loads: its idle worker
        # threads spin (sched_yield) for 2^N TSC cycles after each threaded GEMM before
        # sleeping. The default (N=28, ~0.1 s) keeps a worker burning a core through the
        # non-GEMM ops that follow, which need both cores; 2^18 cycles (~0.1 ms) still
        # covers back-to-back GEMMs. A user's own setting wins.
        os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "18")
        # Read as OpenBLAS loads too; a user's own setting wins.
        coretype = openblas_coretype()
        if coretype and "OPENBLAS_CORETYPE" not in os.environ:
            os.environ["OPENBLAS_CORETYPE"] = coretype
        go = ctypes.CDLL(go_path, mode=ctypes.RTLD_GLOBAL)
        _bind(go)
        _go = go
        check(go.hpusim_init())
        # A forked child (DataLoader workers) has no device-stream thread: launched
        # compiled graphs finish first (bridge/stream.go), their failure kept for the
        # parent's next op (a fork must not raise).
        drain = getattr(go, "hpusim_stream_drain", None)
        if drain is not None:
            drain.restype = ctypes.c_int
            os.register_at_fork(before=lambda: drain())
        _glue = ctypes.CDLL(glue_path, mode=ctypes.RTLD_GLOBAL)
        _glue.hpusim_glue_set_has_hpu.argtypes = [ctypes.c_int]
        _glue.hpusim_glue_fast_ops.argtypes, _glue.hpusim_glue_fast_ops.restype = [ctypes.c_int], ctypes.c_int
        _glue.hpusim_glue_fast_op_name.argtypes = [ctypes.c_int]
        _glue.hpusim_glue_fast_op_name.restype = ctypes.c_char_p
        _glue.hpusim_glue_fast_op_calls.argtypes = [ctypes.c_int]
        _glue.hpusim_glue_fast_op_calls.restype = ctypes.c_int64
        return go


def go() -> ctypes.CDLL:
    return _go if _go is not None else load()


def glue() -> ctypes.CDLL:
    if _glue is None:
        load()
    assert _glue is not None
    return _glue


def glue_module(name: str):
    """The Python module `name` whose init function lives in the glue library (pybind11):
    importing the file ctypes already loaded reuses that copy and its registrations."""
    import importlib.machinery
    import importlib.util
    import sys

    if name in sys.modules:
        return sys.modules[name]
    load()
    path = os.path.join(LIB_DIR, "libhpu_glue.so")
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    return module


def fast_ops(on: bool) -> bool:
    """Turn the glue's fast C++ kernels on or off (HPUSIM_FAST_OPS); returns the previous state."""
    return bool(glue().hpusim_glue_fast_ops(1 if on else 0))


def fast_op_counts() -> dict[str, int]:
    """Calls the glue's fast C++ kernels served, by schema name ("aten::mul")."""
    g = glue()
    counts: dict[str, int] = {}
    i = 0
    while (name := g.hpusim_glue_fast_op_name(i)) is not None:
        key = name.decode()
        counts[key] = counts.get(key, 0) + int(g.hpusim_glue_fast_op_calls(i))
        i += 1
    return counts


def last_error() -> str:
    buf = ctypes.create_string_buffer(4096)
    go().hpusim_last_error(buf, len(buf))
    return buf.value.decode(errors="replace")


# A lazy graph's labelled node that failed when the graph ran reports the exception class
# CPU raises for the op (bridge/nodeerr.go) as the message's first word.
_ERROR_CLASSES: dict[str, type[Exception]] = {"IndexError": IndexError, "RuntimeError": RuntimeError}


def error_from(msg: str) -> Exception:
    """The exception for a Go error message: the class a labelled node names, else NativeError."""
    kind, sep, rest = msg.partition(": ")
    cls = _ERROR_CLASSES.get(kind) if sep else None
    return cls(rest) if cls is not None else NativeError(msg)


def check(rc: int) -> None:
    if rc != 0:
        raise error_from(last_error())


def device_count() -> int:
    return int(go().hpusim_device_count())


def device_name(index: int) -> str:
    buf = ctypes.create_string_buffer(64)
    rc = go().hpusim_device_name(index, buf, len(buf))
    if rc != 0:
        raise AssertionError(last_error())
    return buf.value.decode()


STAT_KEYS = ("Limit", "InUse", "MaxInUse", "NumAllocs", "NumFrees", "MaxAllocSize",
             "TotalSystemAllocs", "TotalSystemFrees")


def memory_stats(index: int) -> dict[str, int]:
    out = (ctypes.c_int64 * len(STAT_KEYS))()
    if go().hpusim_memory_stats(index, out) != 0:
        raise AssertionError(last_error())
    return dict(zip(STAT_KEYS, (int(v) for v in out)))


def reset_peak(index: int) -> None:
    if go().hpusim_reset_peak(index) != 0:
        raise AssertionError(last_error())


def empty_cache() -> None:
    check(go().hpusim_empty_cache())


def reset_accumulated(index: int) -> None:
    if go().hpusim_reset_accumulated(index) != 0:
        raise AssertionError(last_error())


def synchronize(index: int) -> None:
    check(go().hpusim_synchronize(index))


_op_ids: dict[str, int] = {}


def op_id(name: str) -> int:
    oid = _op_ids.get(name)
    if oid is None:
        oid = int(go().hpusim_op_id(name.encode()))
        if oid < 0:
            raise NativeError(f"unknown native op {name!r}")
        _op_ids[name] = oid
    return oid


def op_names() -> list[str]:
    n = go().hpusim_op_names(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    go().hpusim_op_names(buf, n + 1)
    return buf.value.decode().split("\n") if n else []


# hpusim_run, bound once at load: run() is on every op's path, so it must not pay for
# go() and attribute lookups each call.
_hpusim_run = None


def run(name: str, tensors: Sequence[torch.Tensor], ints: Iterable[int] = (),
        floats: Sequence[float] = (), label: str | None = None) -> None:
    """Run a Go op over tensors (outputs first, by the op's convention). No data is copied:
    Go reads and writes the tensors' memory in place.

    The frame is built as a Python list and converted to an int64 array in one step: that
    measured fastest of the pure-Python ways (array.append per field, struct.pack_into a
    preallocated buffer, ctypes array slice assignment) at ~1.4 us for three 2-D tensors."""
    oid = _op_ids.get(name)
    if oid is None:
        oid = op_id(name)
    code = DTYPE_CODE
    f = [len(tensors)]
    for t in tensors:
        f.append(t.data_ptr())
        f.append(code[t.dtype])
        f.append(t.dim())
        f.extend(t.shape)
        f.extend(t.stride())
    if ints:
        if not isinstance(ints, (tuple, list)):
            ints = tuple(ints)
        f.append(len(ints))
        f.extend(ints)
    else:
        f.append(0)
    frame = array("q", f)
    if label is not None:
        fl = array("d", floats) if floats else None
        rc = go().hpusim_run_labeled(oid, frame.buffer_info()[0], len(f),
                                     fl.buffer_info()[0] if fl else None, len(fl) if fl else 0,
                                     label.encode())
    elif floats:
        fl = array("d", floats)
        rc = (_hpusim_run or _bind_run())(oid, frame.buffer_info()[0], len(f), fl.buffer_info()[0], len(fl))
    else:
        rc = (_hpusim_run or _bind_run())(oid, frame.buffer_info()[0], len(f), None, 0)
    if rc != 0:
        raise error_from(last_error())


def _bind_run():
    global _hpusim_run
    _hpusim_run = go().hpusim_run
    return _hpusim_run


def run_raw(op: int, frame: array, floats: array | None = None) -> int:
    """Unchecked entry for tests of C ABI misuse: returns the status code."""
    fptr = floats.buffer_info()[0] if floats is not None and len(floats) else None
    return int(go().hpusim_run(op, frame.buffer_info()[0] if len(frame) else None, len(frame),
                               fptr, len(floats) if floats is not None else 0))
