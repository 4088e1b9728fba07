"""`torch.ops.hpu.convert_from_uint4`: dequantization of 4-bit packed weights, as vLLM's
GPTQ and AWQ layers on HPU call it before a plain matmul.

`input` is int32 [K, N / 8] with eight unsigned 4-bit values per word, element j of a word in
bits 4j..4j+3 (lowest first); `zero_point` is packed the same way per group, [G, N / 8];
`scale` is [G, N]. Row k belongs to group g_idx[k] when g_idx is given, else to k // (K / G).
The result is (q - zero) * scale, [K, N] in `out_dtype` (computed in float32, rounded once).
"""
from __future__ import annotations

from typing import Optional

import torch

_lib = torch.library.Library("hpu", "FRAGMENT")
_lib.define("convert_from_uint4(Tensor input, Tensor scale, Tensor zero_point, ScalarType out_dtype, "
            "Tensor? g_idx=None) -> Tensor")


def _unpack(packed: torch.Tensor) -> torch.Tensor:
    shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=packed.device)
    nibbles = torch.bitwise_and(torch.bitwise_right_shift(packed.to(torch.int32).unsqueeze(-1), shifts), 15)
    return nibbles.reshape(packed.shape[0], -1)


def convert_from_uint4(input: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor, out_dtype: torch.dtype,
                       g_idx: Optional[torch.Tensor] = None) -> torch.Tensor:
    if input.dtype not in (torch.int32, torch.uint32) or input.dim() != 2:
        raise RuntimeError(f"convert_from_uint4: input must be a 2-D int32 tensor of packed 4-bit values, "
                           f"got {input.dtype} {tuple(input.shape)}")
    q = _unpack(input)
    z = _unpack(zero_point)
    k, n = q.shape
    if scale.dim() != 2 or scale.shape[1] != n or z.shape != scale.shape:
        raise RuntimeError(f"convert_from_uint4: scale {tuple(scale.shape)} and unpacked zero_point "
                           f"{tuple(z.shape)} must both be [groups, {n}]")
    groups = scale.shape[0]
    if g_idx is None:
        if k % groups:
            raise RuntimeError(f"convert_from_uint4: {k} rows do not split into {groups} groups")
        rows = torch.arange(k, device=input.device) // (k // groups)
    else:
        rows = g_idx.long()
    w = (q.float() - z.float().index_select(0, rows)) * scale.float().index_select(0, rows)
    return w.to(out_dtype)


for _key in ("HPU", "CPU"):
    _lib.impl("convert_from_uint4", convert_from_uint4, _key)


@torch.library.register_fake("hpu::convert_from_uint4")
def _convert_from_uint4_fake(input, scale, zero_point, out_dtype, g_idx=None):
    return input.new_empty((input.shape[0], input.shape[1] * 8), dtype=out_dtype)
