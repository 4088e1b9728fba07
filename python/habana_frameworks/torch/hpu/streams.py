"""Streams and events. The emulated device executes in host order on one default stream
per device, so synchronisation is immediate and events time host progress."""
from __future__ import annotations

import contextlib
import time
from typing import Any

import torch

from ._utils import _get_device_index


def _device(device: Any) -> torch.device:
    return torch.device("hpu", _get_device_index(device))


class Stream(torch.Stream):
    """An hpu stream. `priority` is accepted and unused: HPU has one stream per device."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:
            # torch.Stream's other form (stream_id, device_index, device_type), which dynamo
            # uses to rebuild a stream a compiled region enters (`with torch.hpu.stream(s)`)
            kwargs.pop("device", None)
            return super().__new__(cls, priority=priority, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority, **kwargs)

    def synchronize(self) -> None:
        torch.hpu.synchronize(self.device)

    def query(self) -> bool:
        # False while compiled graphs launched on the device stream are running.
        from .. import _recipe

        return not _recipe.stream_pending()

    def wait_event(self, event: "Event") -> None:
        event.synchronize()

    def wait_stream(self, stream: "Stream") -> None:
        stream.synchronize()

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event if event is not None else Event()
        event.record(self)
        return event


class Event:
    """An hpu event: records host time after the device work queued before it is done."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self._time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        torch.hpu.synchronize()
        self._time = time.perf_counter()

    def wait(self, stream: Stream | None = None) -> None:
        self.synchronize()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        torch.hpu.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0


_current: dict[int, Stream] = {}


def default_stream(device: Any = None) -> Stream:
    return Stream(device)


def current_stream(device: Any = None) -> Stream:
    idx = _get_device_index(device)
    return _current.get(idx) or default_stream(idx)


def set_stream(stream: Stream) -> None:
    _current[stream.device.index] = stream


@contextlib.contextmanager
def stream(s: Stream | None):
    if s is None:
        yield
        return
    prev = _current.get(s.device.index)
    _current[s.device.index] = s
    try:
        yield
    finally:
        if prev is None:
            _current.pop(s.device.index, None)
        else:
            _current[s.device.index] = prev


def record_stream(tensor: torch.Tensor, stream: Stream) -> None:
    """Mark `tensor`'s memory as in use by `stream` until the work queued on it is done
    (DeepSpeed ZeRO-3 and DDP side streams call it when they free or hand over a buffer).
    The emulated device finishes work in host order, so a freed block is always reusable:
    only the arguments are checked, as on the bridge."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "hpu":
        raise RuntimeError(f"record_stream expects an hpu tensor, got {getattr(tensor, 'device', type(tensor))}")
    if not isinstance(stream, torch.Stream) or stream.device.type != "hpu":
        raise RuntimeError(f"record_stream expects an hpu stream, got {stream}")


_torch_record_stream = torch.Tensor.record_stream


def _tensor_record_stream(self: torch.Tensor, stream: Any) -> None:
    if self.device.type == "hpu":
        return record_stream(self, stream)
    return _torch_record_stream(self, stream)


# As the bridge: Tensor.record_stream on an hpu tensor goes to torch.hpu.record_stream.
torch.Tensor.record_stream = _tensor_record_stream  # type: ignore[method-assign]
