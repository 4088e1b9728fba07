"""`torch.ops.hpu.softmax_fp8` and `torch.ops.hpu.cast_to_fp8_just_in_time`: the fp8 softmax of
optimum-habana's Falcon/diffusers attention and the blockwise dynamic fp8 cast of its
finegrained-fp8 Linear (whose result feeds `fp8_gemm_v2` with blockwise inverse scales).

softmax_fp8(input, dim, input_scale, output_scale, inv_attn_heads, fused_add):
    softmax over `dim` of input * inv_attn_heads * input_scale (+ fused_add), in float32 and
    rounded to bfloat16; with scales given, that result times output_scale is cast (saturating)
    to float8_e4m3fn. The scales are float32 tensors (default overload) or numbers (`.Scalar_scales`,
    `.Scalar`). The bridge's checks and messages: input bfloat16 or float8_e4m3fn, both scales or
    neither, an fp8 input needs the scales, fused_add only with the scales (same rank, the
    input's first and last sizes, every other size 1 or the input's).
cast_to_fp8_just_in_time(input, block_shape, out_dtype, scale_dtype) -> (fp8, scale):
    the last two dims are cut into [block_height, block_width] blocks; each block's scale is
    max|x| / (the fp8 format's largest value on the configured generation), rounded to
    scale_dtype (default: the input's dtype), and the block is divided by that rounded scale and
    cast (saturating, round to nearest even) to out_dtype (default float8_e4m3fn), so that
    fp8 * scale reconstructs the block. An all-zero block gets scale 0 and zeros.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from .Fp8Ops import _check_fp8_device, fp8_max

_lib = torch.library.Library("hpu", "FRAGMENT")
_lib.define("softmax_fp8(Tensor input, int dim, Tensor? input_scale=None, Tensor? output_scale=None, "
            "Tensor? inv_attn_heads=None, Tensor? fused_add=None) -> Tensor")
_lib.define("softmax_fp8.Scalar_scales(Tensor input, int dim, float input_scale, float output_scale, "
            "Tensor? inv_attn_heads=None, Tensor? fused_add=None) -> Tensor")
_lib.define("softmax_fp8.Scalar(Tensor input, int dim, float input_scale, float output_scale, "
            "float inv_attn_heads, Tensor? fused_add=None) -> Tensor")
_lib.define("cast_to_fp8_just_in_time(Tensor input, int[] block_shape, ScalarType? out_dtype=None, "
            "ScalarType? scale_dtype=None) -> (Tensor, Tensor)")

Scale = Union[torch.Tensor, float, None]


def _check_scale(scale: Scale) -> None:
    if isinstance(scale, torch.Tensor) and scale.dtype != torch.float32:
        raise RuntimeError("Input scale must be of dtype: Float")


def _softmax_fp8(input: torch.Tensor, dim: int, input_scale: Scale = None, output_scale: Scale = None,
                 inv_attn_heads: Scale = None, fused_add: Optional[torch.Tensor] = None) -> torch.Tensor:
    if input.dtype not in (torch.bfloat16, torch.float8_e4m3fn):
        raise RuntimeError("Input tensor must be of torch.bfloat16 or torch.float8_e4m3fn dtype.")
    if (input_scale is None) != (output_scale is None):
        raise RuntimeError("Output and input scales must be both given or None")
    scaled = input_scale is not None
    if input.dtype == torch.float8_e4m3fn and not scaled:
        raise RuntimeError("If Input is of torch.float8_e4m3fn dtype then input scale must be given.")
    rank = input.dim()
    if fused_add is not None:
        if not scaled:
            raise RuntimeError("FusedAdd available only for Float8 output, but input scale is not given.")
        if fused_add.dim() != rank:
            raise RuntimeError("FusedAdd tensor must have the same rank as the input tensor")
        if fused_add.shape[0] != input.shape[0] or fused_add.shape[-1] != input.shape[-1]:
            raise RuntimeError("FusedAdd tensor must have the same first and last dim as the input tensor")
        if any(fused_add.shape[d] not in (1, input.shape[d]) for d in range(1, rank - 1)):
            raise RuntimeError("FusedAdd tensor's dim other than first and last should be equal to 1 or the same "
                               "as the input tensor")
        if fused_add.dtype != torch.bfloat16:
            raise RuntimeError("Input fused_add must be of dtype: BFloat16")
    for s in (input_scale, output_scale, inv_attn_heads):
        _check_scale(s)
    if scaled and input.device.type == "hpu":
        _check_fp8_device()
    x = input.float()
    if inv_attn_heads is not None:
        x = x * inv_attn_heads
    if scaled:
        x = x * input_scale
        if fused_add is not None:
            x = x + fused_add.float()
    y = torch.softmax(x, dim).to(torch.bfloat16)  # a bad dim raises torch's IndexError
    if not scaled:
        return y
    limit = fp8_max(torch.float8_e4m3fn)
    return (y.float() * output_scale).clamp(-limit, limit).to(torch.float8_e4m3fn)


def _softmax_fp8_scalar_scales(input: torch.Tensor, dim: int, input_scale: float, output_scale: float,
                               inv_attn_heads: Optional[torch.Tensor] = None,
                               fused_add: Optional[torch.Tensor] = None) -> torch.Tensor:
    return _softmax_fp8(input, dim, float(input_scale), float(output_scale), inv_attn_heads, fused_add)


def _softmax_fp8_scalar(input: torch.Tensor, dim: int, input_scale: float, output_scale: float,
                        inv_attn_heads: float, fused_add: Optional[torch.Tensor] = None) -> torch.Tensor:
    return _softmax_fp8(input, dim, float(input_scale), float(output_scale), float(inv_attn_heads), fused_add)


def _check_blocks(input: torch.Tensor, block_shape: Sequence[int]) -> tuple[int, int]:
    rank = input.dim()
    if rank < 2:
        raise RuntimeError(f"convert_to_fp8_just_in_time: input tensor must have at least 2 dimensions, got {rank}")
    if len(block_shape) != 2:
        raise RuntimeError(f"convert_to_fp8_just_in_time: block_shape must have 2 elements, got {list(block_shape)}")
    bh, bw = int(block_shape[0]), int(block_shape[1])
    if bh <= 0 or bw <= 0:
        raise RuntimeError(f"convert_to_fp8_just_in_time: block sizes must be positive, got {bh} and {bw}")
    if not (bh == 1 or bw == 1 or bh == bw):
        raise RuntimeError("convert_to_fp8_just_in_time: block_height and block_width must be equal or one of "
                           f"them must be 1, got {bh} and {bw}")
    h, w = input.shape[-2], input.shape[-1]
    if h % bh or w % bw:
        raise RuntimeError("convert_to_fp8_just_in_time: two last dimensions of input tensor must be divisible by "
                           f"block_height and block_width, got [{h}, {w}] and [{bh}, {bw}]")
    return bh, bw


def _cast_to_fp8_just_in_time(input: torch.Tensor, block_shape: Sequence[int],
                              out_dtype: Optional[torch.dtype] = None,
                              scale_dtype: Optional[torch.dtype] = None) -> tuple[torch.Tensor, torch.Tensor]:
    bh, bw = _check_blocks(input, block_shape)
    out_dtype = torch.float8_e4m3fn if out_dtype is None else out_dtype
    scale_dtype = input.dtype if scale_dtype is None else scale_dtype
    limit = fp8_max(out_dtype)  # raises for a non-fp8 out_dtype
    if input.device.type == "hpu":
        _check_fp8_device()
    *lead, h, w = input.shape
    x = input.float().reshape(*lead, h // bh, bh, w // bw, bw)
    amax = x.abs().amax(dim=(-3, -1)) if input.numel() else x.new_zeros((*lead, h // bh, w // bw))
    scale = (amax / limit).to(scale_dtype)
    s = scale.float()
    s = torch.where(s == 0, torch.ones_like(s), s).unsqueeze(-1).unsqueeze(-3)
    q = (x / s).clamp(-limit, limit).to(out_dtype).reshape(input.shape)
    return q, scale


for _key in ("HPU", "CPU"):
    _lib.impl("softmax_fp8", _softmax_fp8, _key)
    _lib.impl("softmax_fp8.Scalar_scales", _softmax_fp8_scalar_scales, _key)
    _lib.impl("softmax_fp8.Scalar", _softmax_fp8_scalar, _key)
    _lib.impl("cast_to_fp8_just_in_time", _cast_to_fp8_just_in_time, _key)


def _softmax_fp8_fake(input, dim, input_scale=None, output_scale=None, inv_attn_heads=None, fused_add=None):
    return input.new_empty(input.shape, dtype=torch.bfloat16 if input_scale is None else torch.float8_e4m3fn)


for _overload in ("softmax_fp8", "softmax_fp8.Scalar_scales", "softmax_fp8.Scalar"):
    torch.library.register_fake(f"hpu::{_overload}")(_softmax_fp8_fake)


@torch.library.register_fake("hpu::cast_to_fp8_just_in_time")
def _cast_to_fp8_just_in_time_fake(input, block_shape, out_dtype=None, scale_dtype=None):
    bh, bw = _check_blocks(input, block_shape)
    *lead, h, w = input.shape
    out = input.new_empty(input.shape, dtype=torch.float8_e4m3fn if out_dtype is None else out_dtype)
    scale = input.new_empty((*lead, h // bh, w // bw), dtype=input.dtype if scale_dtype is None else scale_dtype)
    return out, scale
