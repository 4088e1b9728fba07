"""Random distributions and remaining pointwise compositions on the device.

exponential_, cauchy_, log_normal_ and geometric_ transform draws of the native uniform_ /
normal_ (kernels/philox.go, random_ops.py) by their inverse CDFs, so they draw from the hpu
generator and follow torch.hpu.manual_seed. glu and its backward compose native narrow,
sigmoid, mul and cat, as the bridge's decomposition does; integer linspace is the float64
linspace truncated, as torch's CPU kernel computes it.
"""
from __future__ import annotations

import torch

from .index_ops import linspace_out
from .registry import NotNative, native

_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def _g(v: float) -> str:
    return f"{v:g}"


def _uniform_like(self, generator):
    """Uniform [0, 1) draws in float32 (or self's float dtype) on self's device."""
    dt = self.dtype if self.dtype in _FLOATS else torch.float32
    return torch.empty(self.shape, dtype=dt, device=self.device).uniform_(0.0, 1.0, generator=generator)


@native("aten::exponential_")
def exponential_(self, lambd=1.0, *, generator=None):
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_g(lambd)}")
    if self.dtype not in _FLOATS:
        raise NotNative
    if self.numel():
        u = _uniform_like(self, generator)
        self.copy_(u.neg_().log1p_().mul_(-1.0 / lambd))  # -log(1 - u) / lambda
    return self


@native("aten::cauchy_")
def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_g(sigma)}")
    if self.dtype not in _FLOATS:
        raise NotNative
    if self.numel():
        u = _uniform_like(self, generator)
        self.copy_(u.sub_(0.5).mul_(torch.pi).tan_().mul_(sigma).add_(median))
    return self


@native("aten::log_normal_")
def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_g(std)}")
    if self.dtype not in _FLOATS:
        raise NotNative
    if self.numel():
        n = torch.empty(self.shape, dtype=self.dtype, device=self.device).normal_(mean, std, generator=generator)
        self.copy_(n.exp_())
    return self


@native("aten::geometric_")
def geometric_(self, p, *, generator=None):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_g(p)}")
    if self.dtype == torch.bool or self.is_complex() or self.dtype == torch.float64:
        raise NotNative
    if self.numel():
        u = _uniform_like(self, generator).float()
        # the number of Bernoulli(p) trials to the first success: ceil(log(1-u) / log(1-p)), >= 1
        k = u.neg_().log1p_().div_(torch.log1p(torch.tensor(-p)).item()).ceil_().clamp_min_(1.0)
        self.copy_(k)
    return self


# ---------------------------------------------------------------- glu

def _halves(self, dim):
    if self.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % self.dim()
    n = self.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    return d, self.narrow(d, 0, n // 2), self.narrow(d, n // 2, n // 2)


@native("aten::glu")
def glu(self, dim=-1):
    if not self.dtype.is_floating_point or self.dtype not in _FLOATS:
        raise NotNative
    _, a, b = _halves(self, dim)
    return a * torch.sigmoid(b)


@native("aten::glu.out")
def glu_out(self, dim=-1, *, out):
    r = glu(self, dim)
    return out.resize_(r.shape).copy_(r)


@native("aten::glu_backward")
def glu_backward(grad_output, self, dim):
    if self.dtype not in _FLOATS or grad_output.dtype != self.dtype:
        raise NotNative
    d, a, b = _halves(self, dim)
    sb = torch.sigmoid(b)
    ga = grad_output * sb
    gb = grad_output * a * sb * (1 - sb)
    return torch.cat([ga, gb], d)


# ---------------------------------------------------------------- integer linspace

def _num(v):
    return v.item() if isinstance(v, torch.Tensor) else v


def _linspace_any(start, end, steps, out):
    start, end = _num(start), _num(end)
    if out.dtype.is_floating_point or out.dtype == torch.bool or out.is_complex() or \
            isinstance(start, complex) or isinstance(end, complex):
        return linspace_out(start, end, steps, out=out)
    if steps < 0:
        raise NotNative  # torch's own error
    # torch: (end - start) / (steps - 1) and each value in double, then truncated
    tmp = torch.empty(steps, dtype=torch.float64, device=out.device)
    linspace_out(start, end, steps, out=tmp)
    return out.resize_((steps,)).copy_(tmp.trunc_())


native("aten::linspace.out")(lambda start, end, steps, *, out: _linspace_any(start, end, steps, out))
for _ov in ("Tensor_Tensor_out", "Tensor_Scalar_out", "Scalar_Tensor_out"):
    native(f"aten::linspace.{_ov}")(lambda start, end, steps, *, out: _linspace_any(start, end, steps, out))
