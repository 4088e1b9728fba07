"""Pinned host memory for hpu.

The glue's HPU hooks hand torch a pinned host allocator (csrc/hpu_glue.cpp), so
`t.pin_memory("hpu")`, `t.is_pinned("hpu")` and `DataLoader(pin_memory=True,
pin_memory_device="hpu")` give and recognise pinned host tensors.

On Gaudi the bridge is the process's only accelerator, so `t.pin_memory()` and `t.is_pinned()`
without a device mean hpu. The public torch wheel hpusim runs on is CUDA-built, and torch then
resolves a missing device to CUDA ("Found no NVIDIA driver on your system"). So while CUDA is
unusable, a missing device means hpu here too; with a working CUDA torch's choice stands.
Factories with `pin_memory=True` (torch.empty/zeros/full/tensor...) allocate in C++; the glue
wraps torch's CPU empty kernels so they pin through the same allocator
(csrc/hpu_pinned_factories.cpp), under the same condition.
"""
from __future__ import annotations

import warnings
from typing import Optional, Union

import torch

from .. import _native

_tensor_pin_memory = torch.Tensor.pin_memory
_tensor_is_pinned = torch.Tensor.is_pinned

_DEVICE_ARG_DEPRECATED = r"The argument 'device' of Tensor\.(pin_memory|is_pinned)\(\) is deprecated"


def _hpu_is_the_accelerator() -> bool:
    return not torch.cuda.is_available()


def pin_memory(self: torch.Tensor, device: Optional[Union[str, torch.device]] = None) -> torch.Tensor:
    if device is None and _hpu_is_the_accelerator():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_DEVICE_ARG_DEPRECATED)
            return _tensor_pin_memory(self, "hpu")
    return _tensor_pin_memory(self) if device is None else _tensor_pin_memory(self, device)


def is_pinned(self: torch.Tensor, device: Optional[Union[str, torch.device]] = None) -> bool:
    if device is None and _hpu_is_the_accelerator():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_DEVICE_ARG_DEPRECATED)
            return _tensor_is_pinned(self, "hpu")
    return _tensor_is_pinned(self) if device is None else _tensor_is_pinned(self, device)


pin_memory.__doc__ = _tensor_pin_memory.__doc__
is_pinned.__doc__ = _tensor_is_pinned.__doc__
torch.Tensor.pin_memory = pin_memory  # type: ignore[method-assign]
torch.Tensor.is_pinned = is_pinned  # type: ignore[method-assign]

if _hpu_is_the_accelerator() and _native.glue().hpusim_glue_pinned_factories() != 0:
    raise RuntimeError("hpusim: torch refused the pinned-memory factory kernels (csrc/hpu_pinned_factories.cpp)")
