"""`torch.ops.hpu.softmax_fa2`: one step of flash-attention-2's online softmax, which vLLM's
Gaudi unified attention calls (`softmax_fa2(scores, inputM=..., inputL=...)`).

For scores x [..., n] (softmax over the last dim) and the running row statistics inputM (max so
far) and inputL (sum so far) of shape x.shape[:-1]:
    outM   = max(inputM, amax(x, -1))
    result = exp(x - outM[..., None])
    fixup  = exp(inputM - outM)                  (rescales what was summed against inputM)
    outL   = fixup * inputL + sum(result, -1)
returned as (result, outM, outL, fixup). Computed in float32, each output rounded once: result
in x's dtype, the statistics in inputM's dtype.

fp8 scores (float8_e4m3fn) are first dequantised by `descale` into bfloat16 (cast_from_fp8), and
the result comes back in float8_e4m3fn scaled by the power of two 2**floor(log2(R / amax)) that
brings its largest value up to the fp8 range R (448 with experimental_mode, else 240).

On Gaudi3 the statistics are laid out in cache lines: row j of a [..., n] statistic lives at
(j // 8) * V + j % 8 of a [..., ceil(n / 8) * V] tensor, V = 128 for bfloat16 scores, else 64
(vLLM reads them back with its convert_cl_aligned_tensor); the other positions keep what
inputM / inputL held. Gaudi2 uses the plain [..., n] layout.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

_lib = torch.library.Library("hpu", "FRAGMENT")
_lib.define("softmax_fa2(Tensor input, Tensor inputM, Tensor inputL, int dim=-1, bool experimental_mode=False, "
            "Tensor? descale=None) -> (Tensor, Tensor, Tensor, Tensor)")

_PACK = 8


def _vec_size(score_dtype: torch.dtype) -> int:
    """The cache-line layout's vector size on Gaudi3, 1 (plain layout) elsewhere."""
    from ...utils.experimental import _get_device_type, synDeviceType
    if _get_device_type() != synDeviceType.synDeviceGaudi3:
        return 1
    return 128 if score_dtype in (torch.bfloat16, torch.float8_e4m3fn) else 64


def _stat_shape(x: torch.Tensor, vec: int) -> list[int]:
    shape = list(x.shape[:-1])
    if vec > 1 and shape:
        shape[-1] = math.ceil(shape[-1] / _PACK) * vec
    return shape


def _from_layout(t: torch.Tensor, n: int, vec: int) -> torch.Tensor:
    if vec == 1:
        return t
    t = t.reshape(*t.shape[:-1], -1, vec)[..., :_PACK]
    return t.flatten(-2)[..., :n]


def _to_layout(plain: torch.Tensor, like: torch.Tensor, vec: int) -> torch.Tensor:
    if vec == 1:
        return plain.to(like.dtype)
    out = like.clone()
    n = plain.shape[-1]
    groups = math.ceil(n / _PACK)
    padded = torch.nn.functional.pad(plain, (0, groups * _PACK - n)).reshape(*plain.shape[:-1], groups, _PACK)
    view = out.view(*out.shape[:-1], groups, vec)
    keep = view[..., :_PACK].clone()
    filled = torch.where(torch.arange(groups * _PACK, device=plain.device).view(groups, _PACK) < n,
                         padded.to(out.dtype), keep)
    view[..., :_PACK] = filled
    return out


def softmax_fa2(input: torch.Tensor, inputM: torch.Tensor, inputL: torch.Tensor, dim: int = -1,
                experimental_mode: bool = False, descale: Optional[torch.Tensor] = None):
    if input.dim() < 1 or dim not in (-1, input.dim() - 1):
        raise RuntimeError(f"softmax_fa2: only the last dimension is supported, got dim={dim} for a "
                           f"{input.dim()}-D input")
    is_fp8 = input.dtype == torch.float8_e4m3fn
    vec = _vec_size(input.dtype)
    want = _stat_shape(input, vec)
    for name, t in (("inputM", inputM), ("inputL", inputL)):
        if list(t.shape) != want:
            raise RuntimeError(f"softmax_fa2: {name} must have shape {want}, got {list(t.shape)}")
    if is_fp8:
        d = 1.0 if descale is None else descale.float().reshape(-1)[0]
        x = (input.float() * d).to(torch.bfloat16).float()  # cast_from_fp8(input, descale, bfloat16)
    else:
        x = input.float()
    n = input.shape[-2] if input.dim() > 1 else 1
    m_in = _from_layout(inputM, n, vec).float().reshape(x.shape[:-1])
    l_in = _from_layout(inputL, n, vec).float().reshape(x.shape[:-1])
    out_m = torch.maximum(m_in, x.amax(dim=-1))
    result = torch.exp(x - out_m.unsqueeze(-1))
    fixup = torch.exp(m_in - out_m)
    out_l = fixup * l_in + result.sum(dim=-1)
    if is_fp8:
        amax = result.abs().amax()
        top = 448.0 if experimental_mode else 240.0
        scale = torch.where(amax > 0, torch.exp2(torch.floor(torch.log2(top / amax))), torch.ones_like(amax))
        result = (result * scale).clamp(-top, top).to(torch.float8_e4m3fn)
    else:
        result = result.to(input.dtype)
    return (result, _to_layout(out_m, inputM, vec), _to_layout(out_l, inputL, vec),
            _to_layout(fixup, inputM, vec))


for _key in ("HPU", "CPU"):
    _lib.impl("softmax_fa2", softmax_fa2, _key)


@torch.library.register_fake("hpu::softmax_fa2")
def _softmax_fa2_fake(input, inputM, inputL, dim=-1, experimental_mode=False, descale=None):
    out_dtype = torch.float8_e4m3fn if input.dtype == torch.float8_e4m3fn else input.dtype
    return (input.new_empty(input.shape, dtype=out_dtype), torch.empty_like(inputM), torch.empty_like(inputL),
            torch.empty_like(inputM))
