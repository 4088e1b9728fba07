"""Runtime switches of `torch.hpu`: dynamic-shape handling and recomputing FusedSDPA.

Dynamic shapes: the bridge's switch turns on bucket refinement of dynamic-shape graphs
(PT_HPU_ENABLE_REFINE_DYNAMIC_SHAPES). hpusim's lazy compiler makes one recipe per graph
shape either way, so the switch is state that scripts can set and read back.

Recompute SDPA: FusedSDPA (hpex.kernels) reads `recompute_sdp_enabled()` when a call does not
choose itself, as the bridge's sdp_kernel context does.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from ..internal import bridge_config

_state = threading.local()


def enable_dynamic_shape() -> None:
    bridge_config.set("PT_HPU_ENABLE_REFINE_DYNAMIC_SHAPES", True)


def disable_dynamic_shape() -> None:
    bridge_config.set("PT_HPU_ENABLE_REFINE_DYNAMIC_SHAPES", False)


def get_dynamic_shape_status() -> bool:
    return bool(bridge_config.get("PT_HPU_ENABLE_REFINE_DYNAMIC_SHAPES"))


def enable_recompute_sdp(enabled: bool) -> None:
    """Whether FusedSDPA recomputes the attention in backward instead of keeping it."""
    _state.recompute = bool(enabled)


def recompute_sdp_enabled() -> bool:
    return getattr(_state, "recompute", False)


@contextlib.contextmanager
def sdp_kernel(enable_recompute: bool = True) -> Iterator[None]:
    """Run the block with FusedSDPA recompute on (or off); the previous choice comes back after."""
    previous = recompute_sdp_enabled()
    enable_recompute_sdp(enable_recompute)
    try:
        yield
    finally:
        enable_recompute_sdp(previous)
