"""`torch.hpu`: the device module, with the bridge's functions and formats."""
from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any

import torch

from .. import _native
from ._utils import _get_device_index
from .memory import *  # noqa: F401,F403  (also re-exports `hpu`, as the bridge does)
from .memory import _extended_memory_summary_dict  # noqa: F401
from .metrics import metric_global, metric_localcontext, metrics_dump  # noqa: F401
from .random import (  # noqa: F401
    default_generators, get_rng_state, get_rng_state_all, initial_seed, manual_seed,
    manual_seed_all, seed, seed_all, set_rng_state, set_rng_state_all,
)
from .streams import Event, Stream, current_stream, default_stream, record_stream, set_stream, stream  # noqa: F401
from . import random  # noqa: F401
from . import pinned_memory  # noqa: F401  (Tensor.pin_memory() pins for hpu, as on Gaudi)

_initialized = False


def _lazy_init() -> None:
    """Called by torch before the first hpu tensor is made (device_lazy_init)."""
    global _initialized
    if _initialized:
        return
    _native.load()
    _initialized = True
    try:
        torch.utils.checkpoint.DefaultDeviceType.set_device_type("hpu")
    except Exception:  # checkpoint utilities are optional for device bring-up
        pass


def init() -> None:
    _lazy_init()


def is_initialized() -> bool:
    return _initialized


def is_available() -> bool:
    try:
        return _native.device_count() > 0
    except Exception:
        return False


def device_count() -> int:
    try:
        return _native.device_count()
    except Exception:
        return 0


def current_device() -> int:
    return int(_native.glue().hpusim_glue_current_device())


def _modules_configured() -> bool:
    return bool(os.getenv("HABANA_VISIBLE_MODULES") or os.getenv("HLS_MODULE_ID"))


def set_device(device: Any) -> None:
    idx = _get_device_index(device)
    if idx != 0 and not _modules_configured() and device_count() < 8:
        raise AssertionError(
            "As HABANA_VISIBLE_MODULES is not provided, the only supported device idx is 0.")
    if idx < 0 or idx >= device_count():
        raise AssertionError("Invalid device id")
    _native.glue().hpusim_glue_set_device(idx)
    if idx != 0:
        os.environ["HLS_MODULE_ID"] = str(idx)


def get_device_name(device: Any = None) -> str:
    if not is_available():
        warnings.warn("Device not available")
        return ""
    idx = _get_device_index(device)
    if idx < 0 or idx >= device_count():
        raise AssertionError("Invalid device id")
    return _native.device_name(idx)


def get_arch_list() -> list[str]:
    return [get_device_name()]


def get_gencode_flags() -> str:
    return ""


def get_device_capability(device: Any = None) -> str:
    """The bridge returns the driver version string here, not a (major, minor) tuple."""
    return "1.22.0-e8ee9c8"


def get_device_properties(device: Any = None) -> str:
    idx = _get_device_index(device)
    limit = _native.memory_stats(idx)["Limit"]
    name = get_device_name(idx)
    return (f"(sramBaseAddress=1153202979583557632, dramBaseAddress=1153203529339371520, "
            f"sramSize=0, dramSize={limit}, tpcEnabledMask=16777215, dramEnabled=1, fd=16, "
            f"device_id={idx}, device_type={name})")


def synchronize(device: Any = None) -> None:
    idx = _get_device_index(device) if device is not None else current_device()
    _native.synchronize(idx)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return is_available()


@contextlib.contextmanager
def device(device: Any):
    """Select the current hpu device for the block."""
    idx = _get_device_index(device, optional=True) if device is not None else -1
    if idx < 0:
        yield
        return
    prev = current_device()
    if idx != prev:
        if idx >= device_count():
            raise AssertionError("Invalid device id")
        _native.glue().hpusim_glue_set_device(idx)
    try:
        yield
    finally:
        _native.glue().hpusim_glue_set_device(prev)


@contextlib.contextmanager
def device_of(obj: Any):
    if isinstance(obj, torch.Tensor) and obj.device.type == "hpu":
        with device(obj.device):
            yield
    else:
        yield


# Autocast state; the AutocastHPU casting kernels and the ops lists live in torch/_autocast.py.
def is_autocast_hpu_enabled() -> bool:
    return torch.is_autocast_enabled("hpu")


def set_autocast_hpu_enabled(enabled: bool) -> None:
    torch.set_autocast_enabled("hpu", enabled)


def get_autocast_hpu_dtype() -> torch.dtype:
    return torch.get_autocast_dtype("hpu")


def set_autocast_hpu_dtype(dtype: torch.dtype) -> None:
    torch.set_autocast_dtype("hpu", dtype)


def _is_in_bad_fork() -> bool:
    return False


from ._runtime_flags import (  # noqa: E402,F401
    disable_dynamic_shape, enable_dynamic_shape, enable_recompute_sdp, get_dynamic_shape_status,
    recompute_sdp_enabled, sdp_kernel,
    disable_inference_mode, disable_matmul3d_2d_reshape, disable_quantization, enable_inference_mode,
    enable_matmul3d_2d_reshape, enable_quantization, is_inference_mode_enabled,
    is_matmul3d_2d_reshape_enabled, is_quantization_enabled,
    disable_const_section_serialization, enable_const_section_serialization,
    get_const_section_serialization_path, is_const_section_serialization_enabled,
)

# HPU graphs (lazy mode; in eager mode HPUGraph() and graph() raise, as on the bridge).
from .graphs import *  # noqa: E402,F401,F403
from . import graphs  # noqa: E402,F401
