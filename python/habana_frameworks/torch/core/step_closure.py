"""Step markers and step closures. Eager execution has no pending graph, so a step marker
only runs the closures queued for it."""
from __future__ import annotations

import threading
from typing import Any, Callable

from habana_frameworks.torch.utils.internal import is_lazy

_closures = threading.local()


def _queue() -> list[tuple[Callable[..., Any], tuple]]:
    if not hasattr(_closures, "items"):
        _closures.items = []
    return _closures.items


def add_step_closure(closure: Callable[..., Any], args: tuple = (), run_async: bool = False) -> None:
    _queue().append((closure, tuple(args)))


def mark_step(device_str: str = "", sync: bool = False) -> None:
    from habana_frameworks.torch.hpu import metrics

    items = _queue()
    _closures.items = []
    for fn, args in items:
        fn(*args)
    metrics.dump_if_configured("mark_step")


def _mark_step_if_lazy() -> None:
    if is_lazy():
        mark_step()
