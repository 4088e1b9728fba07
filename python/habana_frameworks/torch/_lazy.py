"""Lazy mode (PT_HPU_LAZY_MODE=1): bindings to the Go engine that records ops into graphs,
compiles them into cached recipes and runs them on a worker (bridge/lazy.go).

The C ABI functions are bound here, not in _native, so lazy mode has one home."""
from __future__ import annotations

import ctypes
import json
import threading

from . import _native

_enabled = False
_bound = False
_bind_lock = threading.Lock()


def _lib() -> ctypes.CDLL:
    global _bound
    lib = _native.load()
    if not _bound:
        with _bind_lock:
            lib.hpusim_lazy_enable.argtypes, lib.hpusim_lazy_enable.restype = [], ctypes.c_int
            lib.hpusim_lazy_step.argtypes = [ctypes.c_int, ctypes.c_char_p]
            lib.hpusim_lazy_step.restype = ctypes.c_int
            lib.hpusim_lazy_graph_break.argtypes, lib.hpusim_lazy_graph_break.restype = [], ctypes.c_int
            lib.hpusim_lazy_pending.argtypes, lib.hpusim_lazy_pending.restype = [], ctypes.c_int
            lib.hpusim_lazy_stats.argtypes = [ctypes.c_char_p, ctypes.c_int]
            lib.hpusim_lazy_stats.restype = ctypes.c_int
            lib.hpusim_defrag_stats.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
            lib.hpusim_defrag_stats.restype = ctypes.c_int
            _bound = True
    return lib


def enable() -> None:
    """Switch the Go executor to recording (done once at import when lazy mode is asked for)."""
    global _enabled
    _native.check(_lib().hpusim_lazy_enable())
    _enabled = True


def enabled() -> bool:
    return _enabled


def step(wait: bool = False, reason: str = "mark_step") -> None:
    """Launch the pending graph; with wait, also wait for it. Raises the failure of an
    earlier graph, naming the op that failed."""
    if _enabled:
        _native.check(_lib().hpusim_lazy_step(1 if wait else 0, reason.encode()))


def graph_break() -> None:
    """Launch the pending graph before a CPU fallback (a counted graph break)."""
    if _enabled:
        _native.check(_lib().hpusim_lazy_graph_break())


def pending_ops() -> int:
    return int(_lib().hpusim_lazy_pending()) if _enabled else 0


def stats() -> dict:
    """The engine's counters: compilations, compile time (us), recipe cache hits and misses
    (total and per recipe), graph breaks, recorded ops."""
    lib = _lib()
    n = lib.hpusim_lazy_stats(None, 0)
    while True:
        # The counters may grow between the calls (the worker runs meanwhile): leave room,
        # and retry if the text still did not fit.
        size = n + 256
        buf = ctypes.create_string_buffer(size)
        n = lib.hpusim_lazy_stats(buf, size)
        if n < size:
            return json.loads(buf.value.decode())


def defrag_stats(device: int = 0) -> dict:
    """The allocator's defragmentation attempts before an out-of-memory error (in eager mode
    too): attempts, successful ones, total and longest time in nanoseconds."""
    out = (ctypes.c_int64 * 4)()
    _native.check(_lib().hpusim_defrag_stats(device, out))
    return {"number": out[0], "successful": out[1], "total_ns": out[2], "max_ns": out[3]}
