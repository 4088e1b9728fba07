"""GPU migration: CUDA code runs on the HPU unchanged, as the bridge's GPU Migration toolkit
does. Importing this module (done at import of habana_frameworks.torch when
PT_HPU_GPU_MIGRATION=1) maps:

* devices: "cuda", "cuda:N", torch.device("cuda", N) and bare integer device ordinals passed
  to tensor factories, `Tensor.to`/`.cuda()`, `Module.to`/`.cuda()` become the hpu device;
* `torch.cuda.*` device, stream, event, memory and RNG functions to their `torch.hpu`
  counterparts (`torch.cuda.is_available()` then reports the HPU);
* `torch.autocast("cuda", ...)`, `torch.cuda.amp.autocast` and `torch.amp.autocast` to HPU
  autocast (float16 requests become bfloat16, as the toolkit does);
* `torch.backends.cudnn` switches are accepted and have no effect.

GPU_MIGRATION_LOG_LEVEL=1 prints each mapped call the first time it happens.
"""
from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable

import torch

from .. import hpu as _hpu

_applied = False
_logged: set[str] = set()


def _log(what: str) -> None:
    if os.environ.get("GPU_MIGRATION_LOG_LEVEL", "0") not in ("", "0") and what not in _logged:
        _logged.add(what)
        print(f"[gpu_migration] {what}", file=sys.stderr, flush=True)


def map_device(device: Any) -> Any:
    """The hpu device for a CUDA device spec; anything else unchanged."""
    if isinstance(device, torch.device):
        if device.type == "cuda":
            return torch.device("hpu", device.index) if device.index is not None else torch.device("hpu")
        return device
    if isinstance(device, str):
        if device == "cuda" or device.startswith("cuda:"):
            return "hpu" + device[4:]
        return device
    if isinstance(device, int) and not isinstance(device, bool):
        return torch.device("hpu", device)
    return device


def _wrap_device_kwarg(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "device" in kwargs:
            mapped = map_device(kwargs["device"])
            if mapped is not kwargs["device"]:
                _log(f"{fn.__name__}(device={kwargs['device']!r}) -> {mapped!r}")
            kwargs["device"] = mapped
        return fn(*args, **kwargs)
    wrapper._gpu_migration_original = fn  # type: ignore[attr-defined]
    return wrapper


_FACTORIES = ("tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
              "randperm", "arange", "linspace", "logspace", "eye", "zeros_like", "ones_like", "empty_like",
              "full_like", "rand_like", "randn_like", "randint_like", "empty_strided", "scalar_tensor")


def _map_to_args(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    if args and isinstance(args[0], (str, torch.device, int)) and not isinstance(args[0], bool):
        args = (map_device(args[0]),) + args[1:]
    if "device" in kwargs:
        kwargs["device"] = map_device(kwargs["device"])
    return args, kwargs


def _patch_tensor_and_module() -> None:
    tensor_to = torch.Tensor.to

    @functools.wraps(tensor_to)
    def to(self, *args, **kwargs):
        args, kwargs = _map_to_args(args, kwargs)
        return tensor_to(self, *args, **kwargs)

    def cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        _log("Tensor.cuda -> Tensor.to('hpu')")
        return tensor_to(self, map_device(device if device is not None else "cuda"),
                         non_blocking=non_blocking, memory_format=memory_format)

    torch.Tensor.to = to
    torch.Tensor.cuda = cuda
    torch.Tensor.is_cuda = property(lambda self: self.device.type == "hpu")

    module_to = torch.nn.Module.to

    @functools.wraps(module_to)
    def module_to_mapped(self, *args, **kwargs):
        args, kwargs = _map_to_args(args, kwargs)
        return module_to(self, *args, **kwargs)

    def module_cuda(self, device=None):
        _log("Module.cuda -> Module.to('hpu')")
        return module_to(self, map_device(device if device is not None else "cuda"))

    torch.nn.Module.to = module_to_mapped
    torch.nn.Module.cuda = module_cuda


def _patch_factories() -> None:
    for name in _FACTORIES:
        fn = getattr(torch, name, None)
        if fn is not None and not hasattr(fn, "_gpu_migration_original"):
            setattr(torch, name, _wrap_device_kwarg(fn))


class _autocast(torch.autocast):
    """torch.autocast with CUDA requests sent to the HPU (float16 becomes bfloat16)."""

    def __init__(self, device_type: str = "cuda", dtype=None, enabled: bool = True, cache_enabled=None):
        if device_type == "cuda":
            _log("autocast('cuda') -> autocast('hpu')")
            device_type = "hpu"
            if dtype in (None, torch.float16):
                dtype = torch.bfloat16
        super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def _cuda_autocast(enabled: bool = True, dtype=torch.float16, cache_enabled: bool = True):
    return _autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


_CUDA_FUNCS = (
    "is_available", "device_count", "current_device", "set_device", "synchronize", "get_device_name",
    "get_device_capability", "get_device_properties", "is_bf16_supported", "is_initialized", "init",
    "device", "device_of", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "memory_stats", "memory_summary", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "empty_cache", "mem_get_info", "manual_seed", "manual_seed_all",
    "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all",
    "set_rng_state_all", "Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
)


def _patch_cuda_module() -> None:
    for name in _CUDA_FUNCS:
        target = getattr(_hpu, name, None)
        if target is not None:
            setattr(torch.cuda, name, target)
    torch.cuda._lazy_init = _hpu._lazy_init
    torch.cuda.amp.autocast = _cuda_autocast
    torch.autocast = _autocast
    torch.amp.autocast = _autocast


def apply() -> None:
    """Install the mappings (once)."""
    global _applied
    if _applied:
        return
    _patch_tensor_and_module()
    _patch_factories()
    _patch_cuda_module()
    _applied = True


apply()
