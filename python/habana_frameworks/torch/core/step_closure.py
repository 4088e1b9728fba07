"""Step markers and step closures. In lazy mode a step marker launches the pending graph
(recipe cache lookup, compilation on a miss, asynchronous run), emits the MARK_STEP dump
trigger, then runs the closures queued for this step. In eager mode the public wrappers in
core are no-ops, as on Gaudi."""
from __future__ import annotations

import threading
from typing import Any, Callable

from habana_frameworks.torch.utils import hl_logger
from habana_frameworks.torch.utils.internal import is_lazy

_closures = threading.local()


def _queue() -> list[tuple[Callable[..., Any], tuple]]:
    if not hasattr(_closures, "items"):
        _closures.items = []
    return _closures.items


def add_step_closure(closure: Callable[..., Any], args: tuple = (), run_async: bool = False) -> None:
    """Queue closure(*args) to run after the next step marker (run_async closures run in
    the same place: the host is free once the graph is launched)."""
    _queue().append((closure, tuple(args)))


def mark_step(device_str: str = "", sync: bool = False) -> None:
    from habana_frameworks.torch.hpu import metrics
    from habana_frameworks.torch import _lazy

    _lazy.step(wait=sync, reason="mark_step")
    metrics.dump_if_configured("mark_step")
    metrics.dump_on_change()
    items = _queue()
    _closures.items = []
    for fn, args in items:
        fn(*args)


def iter_mark_step() -> None:
    """Step marker for iterating a data loader: one mark_step per batch."""
    mark_step()


def _mark_step_if_lazy() -> None:
    if is_lazy():
        mark_step()


def flush_at_exit() -> None:
    """At exit the pending graph still runs, so its side effects (files written by closures,
    metrics) are complete; a failure is logged, never raised from atexit."""
    from habana_frameworks.torch import _lazy

    try:
        _lazy.step(wait=True, reason="process exit")
    except Exception as e:  # noqa: BLE001
        hl_logger.log("PT_LAZY", 4, f"graph failed at exit: {e}")
