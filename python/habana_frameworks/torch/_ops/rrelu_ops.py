"""Randomized leaky ReLU (rrelu_with_noise, its in-place and out= forms) on native hpu ops.

Training: each non-positive element gets a slope drawn uniformly from [lower, upper] by the
hpu generator (the native uniform_ of random_ops.py, so torch.hpu.manual_seed reproduces it);
the slopes are written to `noise` (1 for positive elements), which the backward
(rrelu_with_noise_backward, torch's composite: grad * noise) reads. Evaluation: a leaky ReLU
with the mean slope (lower + upper) / 2, deterministic, as on CPU.
"""
from __future__ import annotations

import torch

from .registry import NotNative, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def _rrelu(self, noise, lower, upper, training, generator, out=None):
    if self.dtype not in _FLOATS or noise.device.type != "hpu" or noise.dtype != self.dtype:
        raise NotNative
    if noise.shape != self.shape:
        raise RuntimeError("noise tensor shape must match self tensor shape. Got self.shape = "
                           f"{list(self.shape)} noise.shape = {list(noise.shape)}")
    lower, upper = float(lower), float(upper)
    if not training:
        res = aten.leaky_relu(self, (lower + upper) / 2)
    else:
        if lower > upper:
            raise RuntimeError("Expected from <= to to be true, but got false.  (Could this error "
                               "message be improved?  If so, please report an enhancement request "
                               "to PyTorch.)")
        slopes = torch.empty_like(self, memory_format=torch.contiguous_format)
        if slopes.numel():
            slopes.uniform_(lower, upper, generator=generator)
        # CPU draws a slope for x <= 0 and keeps x (noise 1) above
        slopes = torch.where(self <= 0, slopes, torch.ones((), dtype=self.dtype, device=self.device))
        noise.copy_(slopes)
        res = self * slopes
    if out is None:
        return res
    if out.shape != res.shape:
        out.resize_(res.shape)
    return out.copy_(res)


@native("aten::rrelu_with_noise")
def rrelu_with_noise(self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    return _rrelu(self, noise, lower, upper, training, generator)


@native("aten::rrelu_with_noise_")
def rrelu_with_noise_(self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    return _rrelu(self, noise, lower, upper, training, generator, out=self)


@native("aten::rrelu_with_noise.out")
def rrelu_with_noise_out(self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None, *, out):
    return _rrelu(self, noise, lower, upper, training, generator, out=out)
