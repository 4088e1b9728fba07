"""aten::randperm on hpu (detection samplers, on-device shuffles): a stable sort of n
random 62-bit keys drawn from the hpu generator, all native (random_ and sort), so the
permutation stays on the device as on Gaudi. Ties among the keys are vanishingly rare
and the stable sort resolves them by position, so the result is always a permutation.
"""
from __future__ import annotations

import torch

from .random_ops import _MANTISSA, _random
from .registry import NotNative, native

_DTYPES = (torch.int64, torch.int32, torch.int16, torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _randperm(n: int, dtype, device, generator) -> torch.Tensor:
    dtype = torch.int64 if dtype is None else dtype
    if n < 0 or dtype not in _DTYPES:
        raise NotNative  # CPU raises its own error / serves the other dtypes
    if dtype in (torch.float16, torch.float32, torch.float64) and n > (1 << _MANTISSA[dtype]) + 1:
        raise NotNative  # CPU's "n cannot be greater than ..." message (bfloat16 has no such check)
    if not dtype.is_floating_point and n - 1 > torch.iinfo(dtype).max:
        raise NotNative
    keys = torch.empty(n, dtype=torch.int64, device=device)
    _random(keys, 0, 1 << 62, generator)
    return keys.sort(stable=True).indices.to(dtype)


@native("aten::randperm", "aten::randperm.generator")
def randperm(n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    device = torch.device(device) if device is not None else None
    if device is None or device.type != "hpu":
        raise NotNative
    return _randperm(int(n), dtype, device, generator)


@native("aten::randperm.out", "aten::randperm.generator_out")
def randperm_out(n, *, generator=None, out):
    if out.device.type != "hpu":
        raise NotNative
    r = _randperm(int(n), out.dtype, out.device, generator)
    if out.shape != r.shape:
        out.resize_(r.shape)
    return out.copy_(r)
