"""fp8 availability and the fp8_autocast state."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Optional, Tuple

from .recipe import DelayedScaling

_state = threading.local()


def is_fp8_available() -> Tuple[bool, str]:
    """(available, reason if not): fp8 needs Gaudi2 or later."""
    from ....utils.experimental import _get_device_type, synDeviceType
    try:
        gen = _get_device_type()
    except Exception as e:  # no device
        return False, f"no HPU device: {e}"
    if gen == synDeviceType.synDeviceGaudi:
        return False, "FP8 is supported on Gaudi2 and later devices only"
    return True, ""


def _stack() -> list:
    if not hasattr(_state, "stack"):
        _state.stack = []
    return _state.stack


def is_fp8_enabled() -> bool:
    """Whether the innermost fp8_autocast region is enabled."""
    s = _stack()
    return bool(s) and s[-1][0]


def get_fp8_recipe() -> DelayedScaling:
    s = _stack()
    return s[-1][1] if s and s[-1][1] is not None else DelayedScaling()


def get_fp8_group() -> Any:
    s = _stack()
    return s[-1][2] if s else None


def is_first_fp8_module() -> bool:
    return getattr(_state, "first_module", False)


@contextlib.contextmanager
def fp8_autocast(enabled: bool = False, fp8_recipe: Optional[DelayedScaling] = None,
                 fp8_group: Any = None, **kwargs: Any) -> Iterator[None]:
    """Run the TE modules of the block in fp8 (when `enabled`) with `fp8_recipe`."""
    if enabled:
        ok, reason = is_fp8_available()
        if not ok:
            raise RuntimeError(f"fp8_autocast: {reason}")
    if fp8_recipe is not None and not isinstance(fp8_recipe, DelayedScaling):
        raise TypeError(f"fp8_recipe must be a recipe.DelayedScaling, got {type(fp8_recipe).__name__}")
    _stack().append((bool(enabled), fp8_recipe, fp8_group))
    try:
        yield
    finally:
        _stack().pop()
