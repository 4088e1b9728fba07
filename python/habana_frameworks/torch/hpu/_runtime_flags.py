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


# Inference-mode switches (core.quantization's hpu_set_env family calls them). On Gaudi they
# tell the graph compiler it may treat weights as constants, keep quantized dtypes and fold
# 3-D matmuls into 2-D GEMMs; hpusim's kernels compute the same numbers either way, so the
# switches are process-wide state that clients set, read back and reset.
_switches = {"inference_mode": False, "quantization": False, "matmul3d_2d_reshape": False}


def enable_inference_mode() -> None:
    _switches["inference_mode"] = True


def disable_inference_mode() -> None:
    _switches["inference_mode"] = False


def is_inference_mode_enabled() -> bool:
    return _switches["inference_mode"]


def enable_quantization() -> None:
    _switches["quantization"] = True


def disable_quantization() -> None:
    _switches["quantization"] = False


def is_quantization_enabled() -> bool:
    return _switches["quantization"]


def enable_matmul3d_2d_reshape() -> None:
    _switches["matmul3d_2d_reshape"] = True


def disable_matmul3d_2d_reshape() -> None:
    _switches["matmul3d_2d_reshape"] = False


def is_matmul3d_2d_reshape_enabled() -> bool:
    return _switches["matmul3d_2d_reshape"]


# Const-section serialization (optimum-habana's --const_serialization_path): on Gaudi the
# graph compiler's constant sections (weights frozen into inference graphs) are written to
# `path` (per rank, optionally compressed) and read back instead of kept in host memory.
# hpusim has no const sections (weights stay device tensors), so this is state clients set
# and read back; `clear_path` empties the directory as the bridge does, and it is created.
_const_section: dict = {"path": "", "clear_path": False, "use_compression": False}


def enable_const_section_serialization(path, clear_path: bool = False, use_compression: bool = False) -> None:
    import os
    import shutil

    path = str(path)
    if path:
        if clear_path and os.path.isdir(path):
            shutil.rmtree(path)
        os.makedirs(path, exist_ok=True)
    _const_section.update(path=path, clear_path=bool(clear_path), use_compression=bool(use_compression))


def disable_const_section_serialization() -> None:
    enable_const_section_serialization("", False, False)


def is_const_section_serialization_enabled() -> bool:
    return bool(_const_section["path"])


def get_const_section_serialization_path() -> str:
    return _const_section["path"]
