"""fp8 casts and the fp8 GEMM: `torch.ops.hpu.cast_to_fp8_v2`, `cast_from_fp8`, `fp8_gemm_v2`,
and the Python wrappers of the same names, as the bridge's Fp8Ops module.

fp8 tensors are torch.float8_e4m3fn / torch.float8_e5m2 on the device (one byte each,
converted with round-to-nearest-even). A cast to fp8 multiplies by `scale` and saturates at
the format's largest value on the configured generation: Gaudi2's E4M3 tops out at 240 (its
exponent bias leaves the top binade to specials), Gaudi3's at 448 like float8_e4m3fn; E5M2 at
57344. Gaudi (first generation) has no fp8. The GEMM widens both operands to float32, applies
their inverse scales, accumulates in float32 and rounds once to `out_dtype`.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

_lib = torch.library.Library("hpu", "FRAGMENT")

_lib.define("cast_to_fp8_v2(Tensor input, Tensor? scale=None, bool stochastic_rounding=False, "
            "bool is_amax=False, ScalarType dtype=int8, int[]? scale_shape=None) -> (Tensor, Tensor)")
_lib.define("cast_from_fp8(Tensor input, Tensor? scale, ScalarType out_dtype, int[]? scale_shape=None) -> Tensor")
_lib.define("fp8_gemm_v2(Tensor A, bool trans_A, Tensor B, bool trans_B, Tensor? D, ScalarType out_dtype, "
            "Tensor? A_scale_inv=None, Tensor? B_scale_inv=None, Tensor? bias=None, bool accumulate=False, "
            "int[]? B_scale_shape=None) -> Tensor")

# The same casts with a Python float scale (vLLM's FP8 KV cache passes one), as the bridge's
# `.scalar` overloads: torch.ops picks them when `scale` is a number.
_lib.define("cast_to_fp8_v2.scalar(Tensor input, float scale, bool stochastic_rounding=False, "
            "bool is_amax=False, ScalarType dtype=int8, int[]? scale_shape=None) -> (Tensor, Tensor)")
_lib.define("cast_from_fp8.scalar(Tensor input, float scale, ScalarType out_dtype, int[]? scale_shape=None) -> Tensor")

_lib.define("conv2d_fp8(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
            "int[2] dilation=1, int groups=1, ScalarType? out_dtype=None, Tensor? scale_input=None, "
            "Tensor? scale_weight=None) -> Tensor")

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def fp8_max(dtype: torch.dtype) -> float:
    """The largest finite value a cast to `dtype` saturates at on the configured device."""
    if dtype == torch.float8_e5m2:
        return 57344.0
    if dtype == torch.float8_e4m3fn:
        from ...utils.experimental import _get_device_type, synDeviceType
        return 240.0 if _get_device_type() == synDeviceType.synDeviceGaudi2 else 448.0
    raise RuntimeError(f"fp8 cast: dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")


def _check_fp8_device() -> None:
    from ...utils.experimental import _get_device_type, synDeviceType
    if _get_device_type() == synDeviceType.synDeviceGaudi:
        raise RuntimeError("fp8 is not supported on Gaudi: it needs Gaudi2 or later")


def _stochastic_to_fp8(y: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round to one of the two neighbouring fp8 values, the upper with probability equal to
    the distance from the lower (in units of their gap)."""
    near = y.to(dtype)
    mag = near.view(torch.uint8) & 0x7F  # sign-magnitude: codes grow with |value|
    sign = near.view(torch.uint8) & 0x80
    over = near.float().abs() > y.abs()
    lo_mag = torch.where(over, mag - 1, mag)
    lo_mag = torch.where(lo_mag.to(torch.int16) < 0, torch.zeros_like(lo_mag), lo_mag)
    hi_mag = lo_mag + 1
    lo = (lo_mag | sign).view(dtype).float().abs()
    hi = (hi_mag | sign).view(dtype).float().abs()
    gap = (hi - lo).clamp_min(torch.finfo(torch.float32).tiny)
    p_up = ((y.abs() - lo) / gap).clamp(0, 1)
    up = torch.rand_like(p_up) < p_up
    exact = near.float().abs() == y.abs()
    out_mag = torch.where(exact, mag, torch.where(up, hi_mag, lo_mag))
    return (out_mag | sign).view(dtype)


def _cast_to_fp8_v2(input: torch.Tensor, scale: Optional[torch.Tensor] = None, stochastic_rounding: bool = False,
                    is_amax: bool = False, dtype: torch.dtype = torch.int8,
                    scale_shape: Optional[Sequence[int]] = None) -> tuple[torch.Tensor, torch.Tensor]:
    if dtype == torch.int8:  # the schema's default means "E4M3", as in the bridge
        dtype = torch.float8_e4m3fn
    if input.device.type == "hpu":
        _check_fp8_device()
    limit = fp8_max(dtype)
    y = input.float()
    if scale is not None:
        y = y * scale.float()
    y = y.clamp(-limit, limit)  # saturating cast; NaN stays NaN
    out = _stochastic_to_fp8(y, dtype) if stochastic_rounding else y.to(dtype)
    if is_amax:
        amax = input.detach().abs().amax().float() if input.numel() else input.new_zeros((), dtype=torch.float32)
    else:
        amax = input.new_empty((0,), dtype=torch.float32)
    return out, amax


def _cast_from_fp8(input: torch.Tensor, scale: Optional[torch.Tensor], out_dtype: torch.dtype,
                   scale_shape: Optional[Sequence[int]] = None) -> torch.Tensor:
    if input.dtype not in FP8_DTYPES:
        raise RuntimeError(f"cast_from_fp8: input must be an fp8 tensor, got {input.dtype}")
    y = input.float()
    if scale is not None:
        y = y * scale.float()
    return y.to(out_dtype)


def _block_scale(scale: torch.Tensor, operand: torch.Tensor, name: str) -> torch.Tensor:
    """The inverse scale for every element of op(A)/op(B): a scalar, a broadcastable tensor, or
    blockwise (optimum-habana's finegrained fp8: [M, K/bk] for A, [K/bk, N/bn] for B), one entry
    per block of the operand's last two dims, spread over its block."""
    s = scale.float()
    if s.dim() < 2 or operand.dim() < 2:
        return s
    for d in (-2, -1):
        n, k = operand.shape[d], s.shape[d]
        if k in (1, n):
            continue
        if k == 0 or n % k:
            raise RuntimeError(f"fp8_gemm_v2: {name} of shape {tuple(scale.shape)} does not divide the operand's "
                               f"shape {tuple(operand.shape)} into blocks")
        s = s.repeat_interleave(n // k, dim=d)
    return s


def _fp8_gemm_v2(A: torch.Tensor, trans_A: bool, B: torch.Tensor, trans_B: bool, D: Optional[torch.Tensor],
                 out_dtype: torch.dtype, A_scale_inv: Optional[torch.Tensor] = None,
                 B_scale_inv: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                 accumulate: bool = False, B_scale_shape: Optional[Sequence[int]] = None) -> torch.Tensor:
    a = A.float()
    b = B.float()
    if trans_A:
        a = a.transpose(-2, -1)
    if trans_B:
        b = b.transpose(-2, -1)
    if A_scale_inv is not None:
        a = a * _block_scale(A_scale_inv, a, "A_scale_inv")
    if B_scale_inv is not None:
        b = b * _block_scale(B_scale_inv, b, "B_scale_inv")
    out = torch.matmul(a, b)
    if bias is not None:
        out = out + bias.float()
    if accumulate and D is not None:
        out = out + D.float()
    return out.to(out_dtype)


def _conv2d_fp8(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                stride: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1),
                groups: int = 1, out_dtype: Optional[torch.dtype] = None, scale_input: Optional[torch.Tensor] = None,
                scale_weight: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The fp8 convolution, as the GEMM: operands widened to float32 with their inverse scales
    applied, accumulated in float32, rounded once to `out_dtype` (bfloat16 by default)."""
    x = input.float()
    w = weight.float()
    if scale_input is not None:
        x = x * scale_input.float()
    if scale_weight is not None:
        w = w * scale_weight.float()
    out = torch.nn.functional.conv2d(x, w, None if bias is None else bias.float(), stride, padding, dilation, groups)
    return out.to(torch.bfloat16 if out_dtype is None else out_dtype)


def _cast_to_fp8_v2_scalar(input: torch.Tensor, scale: float, stochastic_rounding: bool = False,
                           is_amax: bool = False, dtype: torch.dtype = torch.int8,
                           scale_shape: Optional[Sequence[int]] = None) -> tuple[torch.Tensor, torch.Tensor]:
    return _cast_to_fp8_v2(input, torch.tensor(scale, dtype=torch.float32, device=input.device), stochastic_rounding,
                           is_amax, dtype, scale_shape)


def _cast_from_fp8_scalar(input: torch.Tensor, scale: float, out_dtype: torch.dtype,
                          scale_shape: Optional[Sequence[int]] = None) -> torch.Tensor:
    return _cast_from_fp8(input, torch.tensor(scale, dtype=torch.float32, device=input.device), out_dtype,
                          scale_shape)


for _key in ("HPU", "CPU"):
    _lib.impl("cast_to_fp8_v2.scalar", _cast_to_fp8_v2_scalar, _key)
    _lib.impl("cast_from_fp8.scalar", _cast_from_fp8_scalar, _key)
    _lib.impl("cast_to_fp8_v2", _cast_to_fp8_v2, _key)
    _lib.impl("cast_from_fp8", _cast_from_fp8, _key)
    _lib.impl("fp8_gemm_v2", _fp8_gemm_v2, _key)
    _lib.impl("conv2d_fp8", _conv2d_fp8, _key)


@torch.library.register_fake("hpu::cast_to_fp8_v2")
def _cast_to_fp8_v2_fake(input, scale=None, stochastic_rounding=False, is_amax=False, dtype=torch.int8,
                         scale_shape=None):
    dt = torch.float8_e4m3fn if dtype == torch.int8 else dtype
    amax_shape = () if is_amax else (0,)
    return input.new_empty(input.shape, dtype=dt), input.new_empty(amax_shape, dtype=torch.float32)


@torch.library.register_fake("hpu::cast_from_fp8")
def _cast_from_fp8_fake(input, scale, out_dtype, scale_shape=None):
    return input.new_empty(input.shape, dtype=out_dtype)


torch.library.register_fake("hpu::cast_to_fp8_v2.scalar")(_cast_to_fp8_v2_fake)
torch.library.register_fake("hpu::cast_from_fp8.scalar")(_cast_from_fp8_fake)


@torch.library.register_fake("hpu::fp8_gemm_v2")
def _fp8_gemm_v2_fake(A, trans_A, B, trans_B, D, out_dtype, A_scale_inv=None, B_scale_inv=None, bias=None,
                      accumulate=False, B_scale_shape=None):
    m = A.shape[-1] if trans_A else A.shape[-2]
    n = B.shape[-2] if trans_B else B.shape[-1]
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    return A.new_empty((*batch, m, n), dtype=out_dtype)


@torch.library.register_fake("hpu::conv2d_fp8")
def _conv2d_fp8_fake(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                     out_dtype=None, scale_input=None, scale_weight=None):
    n, _, h, w = input.shape
    k = weight.shape[0]
    size = [(d + 2 * p - dl * (kk - 1) - 1) // s + 1
            for d, p, dl, kk, s in zip((h, w), padding, dilation, weight.shape[2:], stride)]
    return input.new_empty((n, k, *size), dtype=torch.bfloat16 if out_dtype is None else out_dtype)


def cast_to_fp8_v2(input, scale=None, stochastic_rounding=False, is_amax=False, dtype=torch.float8_e4m3fn,
                   scale_shape=None):
    """(fp8 tensor, amax): `input * scale` saturated and rounded to `dtype`; amax is
    max(|input|) when `is_amax`, else an empty tensor."""
    return torch.ops.hpu.cast_to_fp8_v2(input, scale, stochastic_rounding, is_amax, dtype, scale_shape)


def cast_from_fp8(input, scale, out_dtype, scale_shape=None):
    """`input * scale` (scale is the inverse of the cast's scale) in `out_dtype`."""
    return torch.ops.hpu.cast_from_fp8(input, scale, out_dtype, scale_shape)


def fp8_gemm_v2(A, trans_A, B, trans_B, D, out_dtype, A_scale_inv=None, B_scale_inv=None, bias=None,
                accumulate=False, B_scale_shape=None):
    """op(A) @ op(B) with inverse scales applied, plus bias (and D when accumulate)."""
    return torch.ops.hpu.fp8_gemm_v2(A, trans_A, B, trans_B, D, out_dtype, A_scale_inv, B_scale_inv, bias,
                                     accumulate, B_scale_shape)
