"""nn ops that ARE compositions of native hpu ops, lowered as such (the bridge decomposes them
the same way): channel_shuffle (a view, a transpose and a copy), unfold_backward (one strided
add per window offset), renorm (a norm, a select and a product), nll_loss2d (nll_loss over the
channels-last rows), cdist / pdist and their backwards (differences, norms, index sums). Transposed convolution
is in conv_ops.py.

Each lowering runs below autograd, so the ops it calls dispatch straight to their hpu
lowerings; none copies data to the host.
"""
from __future__ import annotations

import math

import torch

from .. import _native
from .linalg import meta_of
from .registry import NotNative, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def _into(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    if dst.shape != src.shape:
        dst.resize_(src.shape)
    dst.copy_(src)
    return dst


# ------------------------------------------------------------------------------ channel_shuffle

@native("aten::channel_shuffle", "aten::native_channel_shuffle")
def channel_shuffle(self, groups):
    m = meta_of(aten.channel_shuffle.default, self, groups)
    if self.dtype not in _native.DTYPE_CODE:
        raise NotNative
    out = torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device=self.device)
    if out.numel():
        n, c = self.shape[0], self.shape[1]
        g = int(groups)
        rest = tuple(self.shape[2:])
        # out channel j*g + i holds input channel i*(C/g) + j
        out.view(n, c // g, g, *rest).copy_(self.reshape(n, g, c // g, *rest).transpose(1, 2))
    return out


native("aten::channel_shuffle.out")(lambda self, groups, *, out: _into(out, channel_shuffle(self, groups)))


# ------------------------------------------------------------------------------- unfold_backward

@native("aten::unfold_backward")
def unfold_backward(grad_in, input_sizes, dim, size, step):
    if grad_in.dtype not in _FLOATS + (torch.float64,):
        raise NotNative
    nd = len(input_sizes)
    d = dim % nd if nd else 0
    out = torch.zeros(list(input_sizes), dtype=grad_in.dtype, device=grad_in.device)
    if nd == 0:
        return out.copy_(grad_in.reshape(()))
    n = grad_in.shape[d] if grad_in.dim() > d else 0
    if n == 0 or out.numel() == 0:
        return out
    # the k-th element of every window: input positions k, k+step, ..., k+(n-1)*step;
    # k descending adds each position's windows in ascending order, as torch's CPU kernel
    # sums them (which matters for bfloat16 rounding)
    for k in reversed(range(int(size))):
        dst = aten.slice.Tensor(out, d, k, k + (n - 1) * step + 1, step)
        dst.add_(grad_in.select(-1, k))
    return out


native("aten::unfold_backward.out")(
    lambda g, input_sizes, dim, size, step, *, out: _into(out, unfold_backward(g, input_sizes, dim, size, step)))


# ----------------------------------------------------------------------------------------- renorm

def _renorm(self, p, dim, maxnorm, out=None, inplace=False):
    if self.dtype not in _FLOATS + (torch.float64,) or self.dim() == 0:
        raise NotNative  # torch raises its own errors
    p, maxnorm = float(p), float(maxnorm)
    if p < 0 or maxnorm < 0:
        raise NotNative
    d = dim % self.dim()
    dims = [i for i in range(self.dim()) if i != d]
    acc = torch.float32 if self.dtype in (torch.bfloat16, torch.float16) else self.dtype
    norm = torch.linalg.vector_norm(self, p, dims, keepdim=True, dtype=acc)
    # torch's renorm_scale_factor: maxnorm / (norm + 1e-7) where norm > maxnorm, else 1
    scale = torch.full_like(norm, maxnorm) / (norm + 1e-7)
    factor = torch.where(norm > maxnorm, scale, torch.ones_like(norm)).to(self.dtype)
    if inplace:
        return self.mul_(factor)
    r = self * factor
    return r if out is None else _into(out, r)


native("aten::renorm")(lambda self, p, dim, maxnorm: _renorm(self, p, dim, maxnorm))
native("aten::renorm.out")(lambda self, p, dim, maxnorm, *, out: _renorm(self, p, dim, maxnorm, out=out))
native("aten::renorm_")(lambda self, p, dim, maxnorm: _renorm(self, p, dim, maxnorm, inplace=True))


# -------------------------------------------------------------------------------------- nll_loss2d

def _rows(self):
    """[N, C, *spatial] -> [N*prod(spatial), C]."""
    c = self.shape[1]
    return self.movedim(1, -1).reshape(-1, c)


@native("aten::nll_loss2d_forward")
def nll_loss2d_forward(self, target, weight, reduction, ignore_index):
    mo, mw = meta_of(aten.nll_loss2d_forward.default, self, target, weight, reduction, ignore_index)
    if self.dim() != 4 or target.device.type != "hpu":
        raise NotNative
    out, tw = aten.nll_loss_forward.default(_rows(self), target.reshape(-1), weight, reduction, ignore_index)
    return out.reshape(mo.shape), tw.reshape(mw.shape)


@native("aten::nll_loss2d_backward")
def nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    meta_of(aten.nll_loss2d_backward.default, grad_output, self, target, weight, reduction, ignore_index,
            total_weight)
    if self.dim() != 4 or target.device.type != "hpu":
        raise NotNative
    g = grad_output.reshape(-1) if reduction == 0 else grad_output
    gr = aten.nll_loss_backward.default(g, _rows(self), target.reshape(-1), weight, reduction, ignore_index,
                                        total_weight)
    n, c, h, w = self.shape
    return gr.reshape(n, h, w, c).permute(0, 3, 1, 2).contiguous()


native("aten::nll_loss2d_forward.output")(
    lambda self, target, weight, reduction, ignore_index, *, output, total_weight: tuple(
        _into(d, s) for d, s in zip((output, total_weight),
                                    nll_loss2d_forward(self, target, weight, reduction, ignore_index))))
native("aten::nll_loss2d_backward.grad_input")(
    lambda g, self, target, weight, reduction, ignore_index, total_weight, *, grad_input: _into(
        grad_input, nll_loss2d_backward(g, self, target, weight, reduction, ignore_index, total_weight)))


# ---------------------------------------------------------------------------------- cdist / pdist

def _dist_floats(*ts) -> None:
    for t in ts:
        if t.dtype not in (torch.float32, torch.float64):
            raise NotNative  # torch's cdist/pdist take float32/float64 only


def _pair_grad(diff, dist, grad, p: float):
    """d dist / d x1 of each pair times grad, as torch's CPU backward writes it (zero where
    the distance is zero)."""
    if p == 0:
        return torch.zeros_like(diff)
    zero = torch.zeros_like(diff)
    if p == 1:
        return torch.sign(diff) * grad
    if math.isinf(p):
        return torch.sign(diff) * (diff.abs() == dist) * grad
    if p == 2:
        return torch.where(dist == 0, zero, grad * diff / dist)
    if p < 2:
        r = torch.sign(diff) * diff.abs().pow(p - 1) * grad / dist.pow(p - 1)
        bad = (dist == 0) | ((diff == 0) & (p < 1))
        return torch.where(bad, zero, r)
    r = diff * diff.abs().pow(p - 2) * grad / dist.pow(p - 1)
    return torch.where(dist == 0, zero, r)


@native("aten::_cdist_forward")
def cdist_forward(x1, x2, p, compute_mode):
    m = meta_of(aten._cdist_forward.default, x1, x2, p, compute_mode)
    _dist_floats(x1, x2)
    if m.numel() == 0:
        return torch.zeros(m.shape, dtype=m.dtype, device=x1.device)
    if x1.shape[-1] == 0:
        return torch.zeros(m.shape, dtype=m.dtype, device=x1.device)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return torch.linalg.vector_norm(diff, float(p), -1).reshape(m.shape)


@native("aten::_cdist_backward")
def cdist_backward(grad, x1, x2, p, cdist):
    _dist_floats(grad, x1, x2, cdist)
    if x1.numel() == 0 or x2.numel() == 0 or grad.numel() == 0:
        return torch.zeros(x1.shape, dtype=x1.dtype, device=x1.device)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # [..., P, R, M]
    g = _pair_grad(diff, cdist.unsqueeze(-1), grad.unsqueeze(-1), float(p)).sum(-2)
    return g.sum_to_size(x1.shape) if g.shape != x1.shape else g


def _pairs(n: int, device):
    """Row and column indices of the pairs i < j in pdist's order (row-major)."""
    i, j = torch.triu_indices(n, n, 1)
    return i.to(device), j.to(device)


@native("aten::_pdist_forward")
def pdist_forward(self, p=2):
    m = meta_of(aten._pdist_forward.default, self, p)
    _dist_floats(self)
    n = self.shape[0]
    if m.numel() == 0 or self.shape[1] == 0:
        return torch.zeros(m.shape, dtype=m.dtype, device=self.device)
    i, j = _pairs(n, self.device)
    diff = self.index_select(0, i) - self.index_select(0, j)
    return torch.linalg.vector_norm(diff, float(p), -1)


@native("aten::_pdist_backward")
def pdist_backward(grad, self, p, pdist):
    _dist_floats(grad, self, pdist)
    n = self.shape[0]
    out = torch.zeros(self.shape, dtype=self.dtype, device=self.device)
    if n < 2 or self.shape[1] == 0:
        return out
    i, j = _pairs(n, self.device)
    diff = self.index_select(0, i) - self.index_select(0, j)
    gp = _pair_grad(diff, pdist.unsqueeze(-1), grad.unsqueeze(-1), float(p))
    out.index_add_(0, i, gp)
    out.index_add_(0, j, gp, alpha=-1)
    return out


# ------------------------------------------------------------------------------- im2col / col2im

def _geom(kernel_size, dilation, padding, stride, H, W):
    kh, kw = kernel_size
    dh, dw = dilation
    ph, pw = padding
    sh, sw = stride
    oh = (H + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    ow = (W + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    return kh, kw, dh, dw, ph, pw, sh, sw, oh, ow


@native("aten::im2col")
def im2col(self, kernel_size, dilation, padding, stride):
    m = meta_of(aten.im2col.default, self, kernel_size, dilation, padding, stride)
    if self.dtype not in _native.DTYPE_CODE:
        raise NotNative
    x = self if self.dim() == 4 else self.unsqueeze(0)
    n, c, H, W = x.shape
    kh, kw, dh, dw, ph, pw, sh, sw, oh, ow = _geom(kernel_size, dilation, padding, stride, H, W)
    out = torch.empty(n, c, kh, kw, oh, ow, dtype=self.dtype, device=self.device)
    if out.numel():
        xp = torch.zeros(n, c, H + 2 * ph, W + 2 * pw, dtype=self.dtype, device=self.device)
        xp[:, :, ph:ph + H, pw:pw + W].copy_(x)
        s = xp.stride()
        # every (kernel offset, output position) window of the padded input as one view
        out.copy_(xp.as_strided((n, c, kh, kw, oh, ow),
                                (s[0], s[1], dh * s[2], dw * s[3], sh * s[2], sw * s[3])))
    return out.view(m.shape)


@native("aten::col2im")
def col2im(self, output_size, kernel_size, dilation, padding, stride):
    m = meta_of(aten.col2im.default, self, output_size, kernel_size, dilation, padding, stride)
    if self.dtype not in _FLOATS + (torch.float64,):
        raise NotNative
    cols = self if self.dim() == 3 else self.unsqueeze(0)
    H, W = output_size
    kh, kw, dh, dw, ph, pw, sh, sw, oh, ow = _geom(kernel_size, dilation, padding, stride, H, W)
    n = cols.shape[0]
    c = cols.shape[1] // (kh * kw)
    outp = torch.zeros(n, c, H + 2 * ph, W + 2 * pw, dtype=self.dtype, device=self.device)
    if outp.numel() and cols.numel():
        cv = cols.reshape(n, c, kh, kw, oh, ow)
        for i in range(kh):
            for j in range(kw):
                dst = outp[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
                dst.add_(cv[:, :, i, j])
    out = outp[:, :, ph:ph + H, pw:pw + W].contiguous()
    return out.view(m.shape)


native("aten::im2col.out")(lambda self, k, d, p, s, *, out: _into(out, im2col(self, k, d, p, s)))
native("aten::col2im.out")(lambda self, o, k, d, p, s, *, out: _into(out, col2im(self, o, k, d, p, s)))
