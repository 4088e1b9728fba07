"""Weight normalisation (torch.nn.utils.weight_norm / parametrizations.weight_norm, used by
wav2vec2's positional convolution, HiFi-GAN, WaveNet): aten::_weight_norm_interface and its
backward as compositions of native hpu ops, in float32 for bfloat16/float16 weights as
torch's CPU kernel accumulates (the norms come out float32 then, as on CPU).

Like the CPU kernel, only the first or the last dim is served; other dims go to the CPU
fallback, which raises torch's own error there.
"""
from __future__ import annotations

import torch

from .registry import NotNative, native

_FLOATS = (torch.float32, torch.bfloat16)  # CPU has no float16 kernel (its error then)


def _check(dim: int, *ts: torch.Tensor) -> list[int]:
    """The dims the norm reduces over, or NotNative for what the CPU path must handle."""
    v = ts[0]
    if any(t.device.type != "hpu" or t.dtype not in _FLOATS for t in ts):
        raise NotNative
    if v.dim() == 0 or dim not in (0, v.dim() - 1):
        raise NotNative
    return [d for d in range(v.dim()) if d != dim]


def _sum(t: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """A sum over dims keeping them (an empty list reduces nothing, unlike Tensor.sum)."""
    return t.sum(dims, keepdim=True) if dims else t


def _opmath(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype == torch.float32 else t.float()


@native("aten::_weight_norm_interface")
def weight_norm_interface(v, g, dim=0):
    other = _check(dim, v, g)
    if g.numel() != v.shape[dim]:
        raise NotNative
    bshape = [-1 if d == dim else 1 for d in range(v.dim())]
    v32 = _opmath(v)
    norms = _sum(v32.mul(v32), other).sqrt()
    w = v32 * (_opmath(g).reshape(bshape) / norms)
    return w.to(v.dtype).contiguous(), norms.reshape(g.shape)


@native("aten::_weight_norm_interface_backward")
def weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    other = _check(dim, grad_w, saved_v, saved_g)
    if saved_norms.device.type != "hpu" or saved_norms.numel() != saved_g.numel():
        raise NotNative
    bshape = [-1 if d == dim else 1 for d in range(saved_v.dim())]
    gw, v = _opmath(grad_w), _opmath(saved_v)
    norm = _opmath(saved_norms).reshape(bshape)
    g = _opmath(saved_g).reshape(bshape)
    dot = _sum(gw.mul(v), other)
    grad_g = dot / norm
    grad_v = (g / norm) * (gw - v * (dot / (norm * norm)))
    return grad_v.to(saved_v.dtype).contiguous(), grad_g.reshape(saved_g.shape).to(saved_g.dtype)
