"""The dynamo DeviceInterface for hpu, wired to `torch.hpu` (registered for "hpu" and
"hpu:0" as the bridge does)."""
from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device

from .. import hpu as _hpu


class HpuInterface(DeviceInterface):
    device = _hpu.device  # type: ignore[assignment]
    Event = _hpu.Event  # type: ignore[assignment]
    Stream = _hpu.Stream  # type: ignore[assignment]

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            _hpu.set_device(device)

        @staticmethod
        def current_device() -> int:
            return _hpu.current_device()

        @staticmethod
        def get_device_properties(device: Any = None):
            return _hpu.get_device_properties(device)

    current_device = staticmethod(_hpu.current_device)
    set_device = staticmethod(_hpu.set_device)
    device_count = staticmethod(_hpu.device_count)
    is_available = staticmethod(_hpu.is_available)
    stream = staticmethod(_hpu.stream)
    current_stream = staticmethod(_hpu.current_stream)
    set_stream = staticmethod(_hpu.set_stream)
    synchronize = staticmethod(_hpu.synchronize)
    get_device_properties = staticmethod(_hpu.get_device_properties)  # type: ignore[assignment]

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        prev = _hpu.current_device()
        if device >= 0 and device != prev:
            _hpu.set_device(device)
        return prev

    exchange_device = maybe_exchange_device

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        # Every device has one default stream (the device guard's); its handle is 0.
        return 0

    @staticmethod
    def get_compute_capability(device: Any = None):
        return _hpu.get_device_capability(device)

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True


def register() -> None:
    for name in ("hpu", "hpu:0"):
        register_interface_for_device(name, HpuInterface)


__all__ = ["HpuInterface", "register"]
_ = torch  # the interface types refer to torch.Stream through torch.hpu
