"""Multi-class hinge losses lowered as compositions of native hpu ops: multi_margin_loss and
multilabel_margin_loss with their backwards. Each IS a masked sum of hinge terms
max(0, margin - x[target] + x[d]) over the classes d, so the lowering is the gather, the
broadcast difference, the mask and the sums, in torch's CPU kernels' rounding order
(aten/src/ATen/native/LossMultiMargin.cpp, LossMultiLabelMargin.cpp): the per-class terms in
the input's dtype, the frame totals of the reductions in float64 (CPU's accumulate type).

Argument checks raise CPU's exceptions and messages. The target range check reads one
flag back from the device, as CPU's kernel checks every index.
"""
from __future__ import annotations

import torch

from .registry import NotNative, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)
_NONE, _MEAN, _SUM = 0, 1, 2


def _into(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    if dst.dtype != src.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {src.dtype}, but got {dst.dtype} instead")
    if dst.shape != src.shape:
        dst.resize_(src.shape)
    return dst.copy_(src)


def _frames(self: torch.Tensor) -> tuple[int, int]:
    """(nframe, dim) as CPU reads them; raises CPU's error for an empty class dimension."""
    nd = self.dim()
    if not ((nd == 2 and self.shape[1] != 0) or (nd == 1 and self.shape[0] != 0) or nd == 0):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(self.shape)}")
    if nd <= 1:
        return 1, (1 if nd == 0 else self.shape[0])
    return self.shape[0], self.shape[1]


def _check_long(t: torch.Tensor, what: str = "Long") -> None:
    if t.dtype != torch.int64:
        raise RuntimeError(f"expected scalar type {what} but found {_SCALAR_NAME.get(t.dtype, str(t.dtype))}")


_SCALAR_NAME = {torch.float32: "Float", torch.float64: "Double", torch.bfloat16: "BFloat16",
                torch.float16: "Half", torch.int32: "Int", torch.int64: "Long", torch.int16: "Short",
                torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool"}


def _serves(self: torch.Tensor, *others) -> None:
    if self.dtype not in _FLOATS or any(t is not None and t.device.type != "hpu" for t in others):
        raise NotNative


def _any_true(flag: torch.Tensor) -> bool:
    return bool(flag.any().item())


# ------------------------------------------------------------------------------ multi_margin_loss

def _mm_check(self, target, p, weight):
    nframe, dim = _frames(self)
    if target.dim() > 1 or target.numel() != nframe:
        raise RuntimeError(f"inconsistent target size, expected {nframe} but got {list(target.shape)}")
    if weight is not None and (weight.dim() > 1 or weight.numel() != dim):
        raise RuntimeError(f"inconsistent weight size, expected {dim} but got {list(weight.shape)}")
    p = int(p)
    if p not in (1, 2):
        raise RuntimeError("only p == 1 and p == 2 supported")
    _check_long(target)
    if weight is not None and weight.dtype != self.dtype:
        raise RuntimeError(f"expected scalar type {_SCALAR_NAME.get(self.dtype)} but found "
                           f"{_SCALAR_NAME.get(weight.dtype, str(weight.dtype))}")
    return nframe, dim, p


def _mm_terms(x2, y, dim, margin, weight):
    """z[n, d] = margin - x[n, y_n] + x[n, d] (CPU's order), the hinge mask (z > 0, d != y_n)
    and the per-frame weight w[y_n] (or None)."""
    if _any_true((y < 0) | (y >= dim)):
        raise RuntimeError("target out of range")
    yc = y.view(-1, 1)
    xt = x2.gather(1, yc)
    z = (torch.full_like(xt, float(margin)) - xt) + x2
    cls = torch.arange(dim, device=x2.device).view(1, -1)
    active = (z > 0) & (cls != yc)
    wy = weight.reshape(-1).gather(0, y).view(-1, 1) if weight is not None else None
    return z, active, wy


@native("aten::multi_margin_loss")
def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=_MEAN):
    _serves(self, target, weight)
    nframe, dim, p = _mm_check(self, target, p, weight)
    keep = reduction == _NONE and target.dim() > 0
    if self.numel() == 0:  # CPU returns the output unwritten; zeros here
        return torch.zeros((nframe,) if keep else (), dtype=self.dtype, device=self.device)
    x2 = self.reshape(nframe, dim)
    z, active, wy = _mm_terms(x2, target.reshape(-1), dim, margin, weight)
    h = z if p == 1 else z * z
    if wy is not None:
        h = h * wy
    per = torch.where(active, h, torch.zeros((), dtype=h.dtype, device=h.device)).sum(1) / dim
    if keep:
        return per
    total = per.to(torch.float64).sum()
    if reduction == _MEAN:
        total = total / nframe
    return total.to(self.dtype)


@native("aten::multi_margin_loss_backward")
def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=_MEAN):
    _serves(self, grad_output, target, weight)
    nframe, dim, p = _mm_check(self, target, p, weight)
    if self.numel() == 0:
        return torch.zeros_like(self, memory_format=torch.contiguous_format)
    x2 = self.reshape(nframe, dim)
    z, active, wy = _mm_terms(x2, target.reshape(-1), dim, margin, weight)
    # g as CPU computes it: 1/(nframe*dim) or 1/dim in double, rounded to the input's dtype
    g = 1.0 / (nframe * dim) if reduction == _MEAN else 1.0 / dim
    gt = torch.full((), g, dtype=torch.float64, device=self.device).to(self.dtype)
    h = gt.expand_as(z) if p == 1 else (gt * 2) * z
    if wy is not None:
        h = h * wy
    h = torch.where(active, h, torch.zeros((), dtype=h.dtype, device=h.device))
    grad = h.scatter(1, target.reshape(-1, 1), -h.sum(1, keepdim=True))
    if reduction != _NONE or grad_output.dim() == 0:
        grad = grad * grad_output.reshape(())
    else:
        grad = grad * grad_output.reshape(-1, 1)
    return grad.reshape(self.shape)


native("aten::multi_margin_loss.out")(
    lambda self, target, p=1, margin=1, weight=None, reduction=_MEAN, *, out:
    _into(out, multi_margin_loss(self, target, p, margin, weight, reduction)))
native("aten::multi_margin_loss_backward.grad_input")(
    lambda grad_output, self, target, p, margin, weight=None, reduction=_MEAN, *, grad_input:
    _into(grad_input, multi_margin_loss_backward(grad_output, self, target, p, margin, weight, reduction)))


# ------------------------------------------------------------------------- multilabel_margin_loss

def _ml_check(self, target):
    nframe, dim = _frames(self)
    if self.dim() <= 1:
        ok = target.dim() <= 1 and target.numel() == dim
    else:
        ok = target.dim() == 2 and target.shape[0] == nframe and target.shape[1] == dim
    if not ok:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(self.shape)}")
    _check_long(target)
    return nframe, dim


def _ml_terms(x2, t2, dim):
    """The valid targets (those before the first -1), the is_target mask [N, C] and the hinge
    terms z[n, k, d] = 1 - x[n, t_k] + x[n, d] with their mask (k valid, d not a target, z > 0)."""
    if _any_true((t2 < -1) | (t2 >= dim)):
        raise RuntimeError("argument #2 'target' is out of range")
    valid = (t2 >= 0).to(torch.int64).cumprod(1).bool()
    tc = t2.clamp(min=0)
    hits = torch.zeros(t2.shape, dtype=torch.int64, device=x2.device).scatter_add_(1, tc, valid.to(torch.int64))
    is_target = hits > 0
    xt = x2.gather(1, tc)
    z = (torch.ones_like(xt) - xt).unsqueeze(2) + x2.unsqueeze(1)
    active = valid.unsqueeze(2) & ~is_target.unsqueeze(1) & (z > 0)
    return tc, valid, is_target, z, active


@native("aten::multilabel_margin_loss_forward")
def multilabel_margin_loss_forward(self, target, reduction):
    _serves(self, target)
    nframe, dim = _ml_check(self, target)
    keep = reduction == _NONE and self.dim() == 2
    is_target = torch.zeros(target.shape, dtype=self.dtype, device=self.device)
    if self.numel() == 0:  # CPU returns the output unwritten; zeros here
        return torch.zeros((nframe,) if keep else (), dtype=self.dtype, device=self.device), is_target
    x2, t2 = self.reshape(nframe, dim), target.reshape(nframe, dim)
    _, _, ist, z, active = _ml_terms(x2, t2, dim)
    is_target.copy_(ist.view(target.shape))
    # CPU sums the terms of a frame in float64 and rounds the frame total to the input's dtype
    terms = torch.where(active, z, torch.zeros((), dtype=z.dtype, device=z.device))
    per = terms.to(torch.float64).sum((1, 2)).to(self.dtype)
    if keep:
        return per / dim, is_target
    total = per.to(torch.float64).sum() / dim
    if reduction == _MEAN:
        total = total / nframe
    return total.to(self.dtype), is_target


@native("aten::multilabel_margin_loss_backward")
def multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    _serves(self, grad_output, target, is_target)
    nframe, dim = _ml_check(self, target)
    if self.numel() == 0:
        return torch.zeros_like(self, memory_format=torch.contiguous_format)
    x2, t2 = self.reshape(nframe, dim), target.reshape(nframe, dim)
    tc, valid, _, z, active = _ml_terms(x2, t2, dim)
    g = 1.0 / (nframe * dim) if reduction == _MEAN else 1.0 / dim
    gt = torch.full((), g, dtype=torch.float64, device=self.device).to(self.dtype)
    cnt = active.to(torch.int64)
    # each active (k, d) pair adds g to x[d] and subtracts g from x[t_k]; counts are exact
    net = cnt.sum(1).scatter_add_(1, tc, -cnt.sum(2))
    grad = net.to(self.dtype) * gt
    if reduction != _NONE or grad_output.dim() == 0:
        grad = grad * grad_output.reshape(())
    else:
        grad = grad * grad_output.reshape(-1, 1)
    return grad.reshape(self.shape)


def _ml_out(self, target, reduction, *, output, is_target):
    o, it = multilabel_margin_loss_forward(self, target, reduction)
    return _into(output, o), _into(is_target, it)


native("aten::multilabel_margin_loss_forward.output")(_ml_out)
native("aten::multilabel_margin_loss_backward.grad_input")(
    lambda grad_output, self, target, reduction, is_target, *, grad_input:
    _into(grad_input, multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)))
