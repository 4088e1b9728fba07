"""Timing helpers shared by the benchmark workers."""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable


def set_threads(n: int) -> None:
    """Torch's intra-op threads (the CPU baseline and any CPU fallback)."""
    import torch

    torch.set_num_threads(n)


def timed_repeats(fn: Callable[[], object], repeats: int, min_seconds: float,
                  sync: Callable[[], object] = lambda: None) -> tuple[int, list[float]]:
    """Calls fn once to warm up, picks an iteration count n so that one repeat lasts about
    min_seconds (1 when min_seconds is 0), then times `repeats` repeats of n calls.
    Returns n and the seconds per call of each repeat."""
    fn()
    sync()
    n = 1
    if min_seconds > 0:
        t0 = time.perf_counter()
        fn()
        sync()
        one = max(time.perf_counter() - t0, 1e-7)
        n = max(1, int(min_seconds / one))
    per_call = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        per_call.append((time.perf_counter() - t0) / n)
    return n, per_call


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def loadavg() -> list[float]:
    try:
        return list(os.getloadavg())
    except OSError:
        return []
