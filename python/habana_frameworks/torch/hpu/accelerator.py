"""hpu as `torch.accelerator`, as on Gaudi.

On Gaudi, torch is built without CUDA and the bridge's HPU hooks report the HPU as built and
present, so torch's accelerator is hpu: `torch.accelerator.current_accelerator()` is
`device(type='hpu')`, `torch.accelerator.is_available()` is True, and code that follows the
accelerator uses hpu. DataLoader(pin_memory=True) is one: without `pin_memory_device` it pins
for the accelerator (a pin-memory thread that selects `torch.accelerator.current_device_index()`
and calls `Tensor.pin_memory()`), while on the CUDA-built wheel hpusim runs on torch picks CUDA
(compile time) and, with no GPU, warns "no accelerator is found" and does not pin.

So while CUDA is unusable (as in pinned_memory.py), torch._C's accelerator bindings, which
torch.accelerator and torch.distributed call, answer for hpu: `_accelerator_getAccelerator`,
`_get_accelerator`, the device count and index, streams and synchronize. torch's C++ callers
of at::getAccelerator() are unchanged (the hooks do not claim `isBuilt`: torch 2.7 refuses two
compiled-in accelerators); with a working CUDA, torch's choice stands.
"""
from __future__ import annotations

from typing import Any

import torch

_originals: dict[str, Any] = {}


def _hpu():
    return torch.hpu  # the device module (registered before install())


def _get_accelerator() -> torch.device:
    return torch.device("hpu")


def _get_accelerator_or_cpu(check: Any = None) -> torch.device:
    # as distributed/hccl's version of it (which sees the _hpusim mark and keeps this one)
    if _hpu().is_available():
        return torch.device("hpu", _hpu().current_device())
    original = _originals["_get_accelerator"]
    return original() if check is None else original(check)


_get_accelerator_or_cpu._hpusim = True  # type: ignore[attr-defined]


def _device_count() -> int:
    return _hpu().device_count()


def _get_device_index() -> int:
    return _hpu().current_device()


def _set_device_index(index: int) -> None:
    if index >= 0:  # torch's binding ignores a negative index
        _hpu().set_device(index)


def _get_stream(index: int):
    return _hpu().current_stream(None if index < 0 else index)


def _set_stream(stream) -> None:
    _hpu().set_stream(stream)


def _synchronize_device(index: int) -> None:
    _hpu().synchronize(None if index < 0 else index)


_BINDINGS = {
    "_accelerator_getAccelerator": _get_accelerator,
    "_get_accelerator": _get_accelerator_or_cpu,
    "_accelerator_deviceCount": _device_count,
    "_accelerator_getDeviceIndex": _get_device_index,
    "_accelerator_setDeviceIndex": _set_device_index,
    "_accelerator_getStream": _get_stream,
    "_accelerator_setStream": _set_stream,
    "_accelerator_synchronizeDevice": _synchronize_device,
}


def install() -> bool:
    """Make hpu torch's accelerator unless CUDA works; True if it did."""
    if _originals or torch.cuda.is_available():
        return bool(_originals)
    for name, fn in _BINDINGS.items():
        if hasattr(torch._C, name):
            _originals[name] = getattr(torch._C, name)
            setattr(torch._C, name, fn)
    return True


def uninstall() -> None:
    """torch's own bindings again (for tests)."""
    for name, fn in _originals.items():
        setattr(torch._C, name, fn)
    _originals.clear()
