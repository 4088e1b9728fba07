"""`habana_frameworks.torch.utils.experimental` (htexp): device generation queries, raw data
pointers and the recompilation detector."""
from __future__ import annotations

import enum

import torch

from ... import hpu  # noqa: F401  (clients call htexp.hpu.is_available()/device_count())
from .detect_recompilation import detect_recompilation_auto_model  # noqa: F401


class synDeviceType(enum.IntEnum):
    """The Synapse device generations clients compare against."""
    synDeviceGaudi = 1
    synDeviceGaudi2 = 4
    synDeviceGaudi3 = 5

    def __str__(self) -> str:  # as the bridge's (pybind11) enum prints
        return f"synDeviceType.{self.name}"


_BY_NAME = {
    "GAUDI": synDeviceType.synDeviceGaudi,
    "GAUDI2": synDeviceType.synDeviceGaudi2,
    "GAUDI3": synDeviceType.synDeviceGaudi3,
}


def _get_device_type() -> synDeviceType:
    """The generation of the current device (HPUSIM_DEVICE_TYPE picks it)."""
    name = hpu.get_device_name()
    try:
        return _BY_NAME[name]
    except KeyError:
        raise RuntimeError(f"Unknown device type {name!r}") from None


def _is_fp16_supported() -> bool:
    """float16 needs Gaudi2 or later (first-generation Gaudi has no fp16 TPC support)."""
    return _get_device_type() != synDeviceType.synDeviceGaudi


def _is_fp8_supported() -> bool:
    """fp8 (float8_e4m3fn/e5m2) needs Gaudi2 or later."""
    return _get_device_type() != synDeviceType.synDeviceGaudi


def _data_ptr(tensor: torch.Tensor) -> int:
    """The device address of the tensor's first element."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"_data_ptr(): argument 'tensor' must be Tensor, not {type(tensor).__name__}")
    return tensor.data_ptr()


def _compute_stream() -> "hpu.Stream":
    """The stream compute ops are issued on (hpusim has one stream per device)."""
    return hpu.current_stream()
