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


def calibrate(fn: Callable[[], object], min_seconds: float, sync: Callable[[], object] = lambda: None) -> int:
    """Warms fn up and returns how many calls make one repeat of about min_seconds (1 when
    min_seconds is 0)."""
    fn()
    sync()
    if min_seconds <= 0:
        return 1
    t0 = time.perf_counter()
    fn()
    sync()
    return max(1, int(min_seconds / max(time.perf_counter() - t0, 1e-7)))


def interleaved_repeats(cases: list[tuple[Callable[[], object], Callable[[], object]]], repeats: int,
                        min_seconds: float) -> list[tuple[int, list[float]]]:
    """Times several (fn, sync) cases round-robin: repeat r of every case runs before
    repeat r+1 of any, so a change of machine load during the run hits every case alike
    and their ratios stay meaningful on a noisy host. Returns, per case, the calls per
    repeat and the seconds per call of each repeat."""
    counts = [calibrate(fn, min_seconds, sync) for fn, sync in cases]
    per_call: list[list[float]] = [[] for _ in cases]
    for _ in range(repeats):
        for i, (fn, sync) in enumerate(cases):
            t0 = time.perf_counter()
            for _ in range(counts[i]):
                fn()
            sync()
            per_call[i].append((time.perf_counter() - t0) / counts[i])
    return list(zip(counts, per_call))


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def loadavg() -> list[float]:
    try:
        return list(os.getloadavg())
    except OSError:
        return []


class Turns:
    """The worker's side of the runner's turn-taking (bench/run.py): every mode's worker
    process stays up and they run one at a time, handing the CPU on between timed
    repeats, so a change of machine load hits every mode alike. The worker runs only
    while it holds the turn; `pass_turn()` hands it back and blocks until it is ours
    again. Without pipes (a worker started by hand) it does nothing."""

    def __init__(self, read_fd: int | None, write_fd: int | None) -> None:
        self._r = os.fdopen(read_fd, "r") if read_fd is not None else None
        self._w = os.fdopen(write_fd, "w") if write_fd is not None else None

    def wait(self) -> None:
        if self._r is not None and self._r.readline().strip() != "go":
            raise SystemExit("bench runner went away")

    def pass_turn(self) -> None:
        if self._w is None:
            return
        self._w.write("pass\n")
        self._w.flush()
        self.wait()


NO_TURNS = Turns(None, None)
