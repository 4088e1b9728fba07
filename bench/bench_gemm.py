"""Worker: GEMM throughput of hpu (torch.mm, F.linear) against OpenBLAS called directly
(ctypes cblas_sgemm from a private load of the very libopenblas file the Go core links, with
`threads` threads) and torch's CPU kernels."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import tempfile
from typing import Any, Callable

import torch
import torch.nn.functional as F

from bench_common import interleaved_repeats, median

# (label, m, k, n, linear): linear means y = x @ w.T with x m×k and w n×k (F.linear's layout).
SHAPES: list[tuple[str, int, int, int, bool]] = [
    ("256^3", 256, 256, 256, False),
    ("512^3", 512, 512, 512, False),
    ("1024^3", 1024, 1024, 1024, False),
    ("linear 64x1024 @ (1024x1024)^T", 64, 1024, 1024, True),
]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def openblas_path() -> str | None:
    """The libopenblas mapped into this process (the one libhpusim.so links), else the
    system's by ctypes.util."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "libopenblas" in path:
                    return path
    except OSError:
        pass
    name = ctypes.util.find_library("openblas")
    return name


class OpenBLAS:
    def __init__(self, threads: int) -> None:
        import habana_frameworks.torch  # noqa: F401  (maps the Go core and its libopenblas)

        path = openblas_path()
        if path is None:
            raise RuntimeError("libopenblas not found (neither mapped nor by ctypes.util.find_library)")
        self.path = path
        # A private instance of that same library file: OpenBLAS's thread count is one
        # global per loaded instance, and the Go core keeps its own at 1 (it splits GEMMs
        # over its own workers), so setting `threads` on the shared instance would change
        # the code path being compared against. RTLD_DEEPBIND binds the copy's references
        # to its own symbols: without it they resolve to the instance already loaded
        # globally, and openblas_set_num_threads on the copy set the Go core's count.
        self._dir = tempfile.TemporaryDirectory(prefix="bench_openblas_")
        private = os.path.join(self._dir.name, os.path.basename(os.path.realpath(path)))
        shutil.copyfile(os.path.realpath(path), private)
        self.lib = ctypes.CDLL(private, mode=ctypes.RTLD_LOCAL | os.RTLD_DEEPBIND)
        self.lib.openblas_set_num_threads(ctypes.c_int(threads))
        self.lib.openblas_get_num_threads.restype = ctypes.c_int
        self.threads = self.lib.openblas_get_num_threads()
        shared = ctypes.CDLL(path).openblas_get_num_threads()
        if shared != 1:
            raise RuntimeError(f"the Go core's OpenBLAS runs {shared} threads, not 1: the comparison "
                               "would not measure hpusim's own GEMM split")
        self.lib.openblas_get_config.restype = ctypes.c_char_p
        self.config = self.lib.openblas_get_config().decode()
        f = self.lib.cblas_sgemm
        i, p, fl = ctypes.c_int, ctypes.c_void_p, ctypes.c_float
        f.argtypes = [i, i, i, i, i, i, fl, p, i, p, i, fl, p, i]
        f.restype = None
        self.sgemm = f

    def gemm_fn(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, trans_b: bool) -> Callable[[], None]:
        """c = a @ op(b), row-major float32 (b is n×k when trans_b)."""
        m, k = a.shape
        n = c.shape[1]
        args = (_ROW_MAJOR, _NO_TRANS, _TRANS if trans_b else _NO_TRANS, m, n, k, 1.0,
                a.data_ptr(), k, b.data_ptr(), k if trans_b else n, 0.0, c.data_ptr(), n)
        return lambda: self.sgemm(*args)


def run(threads: int, quick: bool) -> dict[str, Any]:
    """Per shape, every implementation is timed round-robin (interleaved repeats), so the
    ratios compare like with like on a busy machine; GFLOP/s from the median repeat."""
    repeats, min_seconds = (2, 0.0) if quick else (9, 0.2)
    blas = OpenBLAS(threads)
    gen = torch.Generator().manual_seed(0)
    rows: list[dict[str, Any]] = []
    hpu_sync = torch.hpu.synchronize
    no_sync: Callable[[], object] = lambda: None  # noqa: E731

    for label, m, k, n, linear in SHAPES:
        a32 = torch.randn(m, k, generator=gen)
        # mm: b is k×n; linear: w is n×k.
        b32 = torch.randn(n, k, generator=gen) if linear else torch.randn(k, n, generator=gen)
        c32 = torch.empty(m, n)
        # The hpu result is right (a benchmark of wrong answers is worthless).
        ref = a32 @ (b32.t() if linear else b32)
        got = (F.linear(a32.to("hpu"), b32.to("hpu")) if linear else torch.mm(a32.to("hpu"), b32.to("hpu"))).cpu()
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-3)

        cases: list[tuple[str, str, str, Callable[[], object], Callable[[], object]]] = [
            ("float32", "openblas", "sgemm", blas.gemm_fn(a32, b32, c32, trans_b=linear), no_sync)]
        for dname, dtype in DTYPES.items():
            a, b = a32.to(dtype), b32.to(dtype)
            ah, bh = a.to("hpu"), b.to("hpu")
            if linear:
                cases.append((dname, "torch_cpu", "linear", lambda a=a, b=b: F.linear(a, b), no_sync))
                cases.append((dname, "hpu", "linear", lambda a=ah, b=bh: F.linear(a, b), hpu_sync))
                a_mm, b_mm, ah_mm, bh_mm = a, b.t(), ah, bh.t()
            else:
                a_mm, b_mm, ah_mm, bh_mm = a, b, ah, bh
            cases.append((dname, "torch_cpu", "mm", lambda a=a_mm, b=b_mm: torch.mm(a, b), no_sync))
            cases.append((dname, "hpu", "mm", lambda a=ah_mm, b=bh_mm: torch.mm(a, b), hpu_sync))

        timings = interleaved_repeats([(fn, sync) for *_, fn, sync in cases], repeats, min_seconds)
        flop = 2.0 * m * n * k
        for (dname, impl, op, _, _), (iters, per_call) in zip(cases, timings):
            t = median(per_call)
            rows.append({"shape": label, "m": m, "k": k, "n": n, "dtype": dname, "impl": impl, "op": op,
                         "seconds": t, "gflops": flop / t / 1e9,
                         "repeat_gflops": [flop / s / 1e9 for s in per_call], "iters_per_repeat": iters})
    return {"openblas": {"path": blas.path, "threads": blas.threads, "config": blas.config},
            "torch_threads": torch.get_num_threads(), "rows": rows}
