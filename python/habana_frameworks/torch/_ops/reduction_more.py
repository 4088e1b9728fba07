"""Reductions and products that are compositions of native hpu ops, as the bridge's own
decompositions are: norm (linalg_vector_norm), nansum/nanmean, aminmax, count_nonzero,
equal, trace, isin, addr (outer product plus add), addbmm (a chain of addmm, the CPU
kernel's order), linalg_cross (products of rolled operands), vdot (dot on real tensors).

Each lowering calls torch ops on hpu tensors: every step is served by a native lowering
(no host round trip); shape and argument errors come from the meta kernels or match CPU's
messages. Dtypes no native step serves (complex) raise NotNative.
"""
from __future__ import annotations

import torch

from . import reduction
from .linalg import meta
from .nn_ops import _into
from .registry import NotNative, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def _real(*ts) -> None:
    for t in ts:
        if isinstance(t, torch.Tensor) and t.is_complex():
            raise NotNative


def _dimlist(dim):
    if dim is None:
        return None
    return [dim] if isinstance(dim, int) else list(dim)


# ------------------------------------------------------------------------------ norm

def _norm(self, p=2, dim=None, keepdim=False, dtype=None, out=None):
    _real(self)
    if isinstance(p, str) or isinstance(p, complex):
        raise NotNative  # 'fro'/'nuc' reach aten::norm only through other overloads
    if not self.dtype.is_floating_point:
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_tname(self.dtype)}")
    dims = _dimlist(dim)
    res = reduction.linalg_vector_norm(self, 2 if p is None else p, dims if dims else None,
                                       keepdim, dtype=dtype)
    return res if out is None else _into(out, res)


def _tname(dt) -> str:
    from .fallback import type_name
    return type_name(dt)


native("aten::norm.Scalar")(lambda self, p=2: _norm(self, p))
native("aten::norm.ScalarOpt_dtype")(lambda self, p, *, dtype: _norm(self, p, dtype=dtype))
native("aten::norm.ScalarOpt_dim")(lambda self, p, dim, keepdim=False: _norm(self, p, dim, keepdim))
native("aten::norm.ScalarOpt_dim_dtype")(
    lambda self, p, dim, keepdim, *, dtype: _norm(self, p, dim, keepdim, dtype))
native("aten::norm.out")(lambda self, p, dim, keepdim=False, *, out: _norm(self, p, dim, keepdim, out=out))
native("aten::norm.dtype_out")(
    lambda self, p, dim, keepdim, *, dtype, out: _norm(self, p, dim, keepdim, dtype, out=out))
native("aten::norm.Scalar_out")(lambda self, p=2, *, out: _norm(self, p, out=out))
native("aten::norm.ScalarOpt_dtype_out")(lambda self, p, *, dtype, out: _norm(self, p, dtype=dtype, out=out))


# ------------------------------------------------------------------- nansum / nanmean

def _nansum(self, dim=None, keepdim=False, dtype=None, out=None):
    _real(self)
    if self.dtype.is_floating_point:
        x = torch.where(torch.isnan(self), torch.zeros((), dtype=self.dtype, device=self.device), self)
    else:
        x = self
    res = torch.sum(x, _dimlist(dim) or [], keepdim, dtype=dtype)
    return res if out is None else _into(out, res)


native("aten::nansum")(lambda self, dim=None, keepdim=False, *, dtype=None: _nansum(self, dim, keepdim, dtype))
native("aten::nansum.out")(
    lambda self, dim=None, keepdim=False, *, dtype=None, out: _nansum(self, dim, keepdim, dtype, out))


@native("aten::nanmean.out")
def nanmean_out(self, dim=None, keepdim=False, *, dtype=None, out):
    _real(self)
    if not (self.dtype.is_floating_point or (dtype is not None and dtype.is_floating_point)):
        raise NotNative  # torch's own error
    dims = _dimlist(dim)
    every = list(range(self.dim())) if not dims else dims
    count = torch.logical_not(torch.isnan(self)).sum(every, keepdim)
    res = torch.div(_nansum(self, every, keepdim, dtype), count)
    return _into(out, res.to(out.dtype) if res.dtype != out.dtype else res)


# ---------------------------------------------------------------------------- aminmax

def _aminmax(self, dim=None, keepdim=False, outs=None):
    _real(self)
    if dim is None:
        m = aten.aminmax(meta(self), keepdim=keepdim)
        if self.numel() == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                               "operation has no identity.")
        red = ()
    else:
        m = aten.aminmax(meta(self), dim=dim, keepdim=keepdim)
        red = (dim,)
    lo = torch.amin(self, red, keepdim).reshape(m[0].shape)
    hi = torch.amax(self, red, keepdim).reshape(m[1].shape)
    if outs is None:
        return lo, hi
    return _into(outs[0], lo), _into(outs[1], hi)


native("aten::aminmax")(lambda self, *, dim=None, keepdim=False: _aminmax(self, dim, keepdim))
native("aten::aminmax.out")(lambda self, *, dim=None, keepdim=False, min, max:
                            _aminmax(self, dim, keepdim, (min, max)))


# ---------------------------------------------------------------------- count_nonzero

def _count_nonzero(self, dims, out=None):
    _real(self)
    red = list(range(self.dim())) if dims is None else _dimlist(dims)
    aten.count_nonzero.dim_IntList(meta(self), red)  # dim errors
    res = torch.ne(self, 0).sum(red)
    return res if out is None else _into(out, res)


native("aten::count_nonzero.dim_IntList")(lambda self, dim: _count_nonzero(self, dim))
native("aten::count_nonzero")(lambda self, dim=None: _count_nonzero(self, dim))
native("aten::count_nonzero.dim_IntList_out")(lambda self, dim, *, out: _count_nonzero(self, dim, out))
native("aten::count_nonzero.out")(lambda self, dim=None, *, out: _count_nonzero(self, dim, out))


# ------------------------------------------------------------------------------ equal

@native("aten::equal")
def equal(self, other):
    _real(self, other)
    if self.dtype != other.dtype or other.device.type != "hpu":
        raise NotNative  # CPU's own dtype/device errors
    if self.shape != other.shape:
        return False
    if self.numel() == 0:
        return True
    return bool(torch.eq(self, other).all().cpu())


# ------------------------------------------------------------------------------ trace

def _trace(self, out=None):
    _real(self)
    if self.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.dim()}")
    d = torch.diagonal(self)
    # CPU sums integers (and bool) into int64, floats in their own dtype (accumulating wider)
    res = d.sum(dtype=torch.int64) if not self.dtype.is_floating_point else d.sum()
    return res if out is None else _into(out, res)


native("aten::trace")(lambda self: _trace(self))
native("aten::trace.out")(lambda self, *, out: _trace(self, out))


# ------------------------------------------------------------------------------- isin

def _isin(elements, test_elements, assume_unique=False, invert=False, out=None):
    e = elements if isinstance(elements, torch.Tensor) else None
    t = test_elements if isinstance(test_elements, torch.Tensor) else None
    _real(e, t)
    ref = e if e is not None else t
    if e is None:
        e = torch.tensor(elements, device=ref.device)
    if t is None:
        t = torch.tensor(test_elements, device=ref.device)
    if e.dtype != t.dtype:
        ct = torch.result_type(elements, test_elements)
        if ct == torch.bool and (e.dtype != torch.bool or t.dtype != torch.bool):
            raise NotNative
    if e.numel() * max(t.numel(), 1) > (1 << 24):
        raise NotNative  # the all-pairs comparison would be too large
    flat = t.reshape(-1)
    if flat.numel() == 0:
        res = torch.zeros(e.shape, dtype=torch.bool, device=ref.device)
    else:
        res = torch.eq(e.unsqueeze(-1), flat).any(-1)
    if invert:
        res = torch.logical_not(res)
    return res if out is None else _into(out, res)


native("aten::isin.Tensor_Tensor")(lambda elements, test_elements, *, assume_unique=False, invert=False:
                                   _isin(elements, test_elements, assume_unique, invert))
native("aten::isin.Tensor_Tensor_out")(
    lambda elements, test_elements, *, assume_unique=False, invert=False, out:
    _isin(elements, test_elements, assume_unique, invert, out))
native("aten::isin.Tensor_Scalar")(lambda elements, test_element, *, assume_unique=False, invert=False:
                                   _isin(elements, test_element, assume_unique, invert))
native("aten::isin.Tensor_Scalar_out")(
    lambda elements, test_element, *, assume_unique=False, invert=False, out:
    _isin(elements, test_element, assume_unique, invert, out))
native("aten::isin.Scalar_Tensor")(lambda element, test_elements, *, assume_unique=False, invert=False:
                                   _isin(element, test_elements, assume_unique, invert))
native("aten::isin.Scalar_Tensor_out")(
    lambda element, test_elements, *, assume_unique=False, invert=False, out:
    _isin(element, test_elements, assume_unique, invert, out))


# ------------------------------------------------------------------------------- addr

def _addr(self, vec1, vec2, beta=1, alpha=1, out=None, inplace=False):
    _real(self, vec1, vec2)
    if isinstance(beta, complex) or isinstance(alpha, complex):
        raise NotNative
    margs = (meta(self), meta(vec1), meta(vec2))
    if inplace:
        m = aten.addr_(*margs, beta=beta, alpha=alpha)
    else:
        m = aten.addr(*margs, beta=beta, alpha=alpha)
    if vec1.dim() != 1 or vec2.dim() != 1:
        raise NotNative
    dt = m.dtype
    if dt == torch.bool:
        outer = torch.logical_and(vec1.unsqueeze(1), vec2.unsqueeze(0))
        outer = outer if alpha else torch.zeros_like(outer)
        res = torch.logical_or(self.expand(m.shape), outer) if beta else outer
    else:
        # CPU's kernel: beta * self + alpha * vec1 * vec2, left to right, with alpha and
        # beta converted to the tensors' dtype first (bf16 0.6 is 0.6015625) and each
        # product rounded to it.
        def cast(v):
            return float(torch.tensor(v, dtype=dt)) if dt.is_floating_point else v
        a1 = vec1 if alpha == 1 else torch.mul(vec1, cast(alpha))
        outer = torch.mul(a1.unsqueeze(1), vec2.unsqueeze(0))
        if beta == 0:  # self is ignored (its NaN too), as on CPU
            res = outer
        else:
            s = self.expand(m.shape)
            res = torch.add(s if beta == 1 else torch.mul(s, cast(beta)), outer)
    if res.dtype != dt:
        res = res.to(dt)
    if inplace:
        self.copy_(res)
        return self
    return res if out is None else _into(out, res)


native("aten::addr")(lambda self, vec1, vec2, *, beta=1, alpha=1: _addr(self, vec1, vec2, beta, alpha))
native("aten::addr_")(lambda self, vec1, vec2, *, beta=1, alpha=1: _addr(self, vec1, vec2, beta, alpha,
                                                                        inplace=True))
native("aten::addr.out")(lambda self, vec1, vec2, *, beta=1, alpha=1, out:
                         _addr(self, vec1, vec2, beta, alpha, out=out))


# ----------------------------------------------------------------------------- addbmm

def _addbmm(self, batch1, batch2, beta=1, alpha=1, out=None, inplace=False):
    _real(self, batch1, batch2)
    margs = (meta(self), meta(batch1), meta(batch2))
    if inplace:  # CPU's addbmm_ resizes self to the result (addbmm_out(self, self, ...))
        m = aten.addbmm(*margs, beta=beta, alpha=alpha)
    elif out is not None:
        m = aten.addbmm.out(*margs, beta=beta, alpha=alpha, out=meta(out))
    else:
        m = aten.addbmm(*margs, beta=beta, alpha=alpha)
    # CPU: the result starts as self (unless beta is 0), then one addmm_ per batch, the
    # first with beta, the others accumulating (beta 1): the same sums in the same order.
    if beta != 0:
        res = self.expand(m.shape).clone()
    else:
        res = torch.zeros(m.shape, dtype=m.dtype, device=self.device)
    if batch1.shape[0] == 0:
        if beta != 0 and beta != 1:
            res = torch.mul(res, beta)
    else:
        b = beta
        for k in range(batch1.shape[0]):
            res = torch.addmm(res, batch1[k], batch2[k], beta=b, alpha=alpha)
            b = 1
    if inplace:
        return _into(self, res)
    return res if out is None else _into(out, res)


native("aten::addbmm")(lambda self, batch1, batch2, *, beta=1, alpha=1: _addbmm(self, batch1, batch2, beta, alpha))
native("aten::addbmm_")(lambda self, batch1, batch2, *, beta=1, alpha=1:
                        _addbmm(self, batch1, batch2, beta, alpha, inplace=True))
native("aten::addbmm.out")(lambda self, batch1, batch2, *, beta=1, alpha=1, out:
                           _addbmm(self, batch1, batch2, beta, alpha, out=out))


# ----------------------------------------------------------------------- linalg_cross

def _rolled(t, d, k):
    """t rotated by k (1 or 2) positions along d (size 3): components (k, k+1, k+2) mod 3."""
    return torch.cat([t.narrow(d, k, 3 - k), t.narrow(d, 0, k)], d)


def _cross(self, other, dim=-1, out=None):
    _real(self, other)
    m = aten.linalg_cross(meta(self), meta(other), dim=dim)
    if self.dtype != other.dtype:
        raise NotNative
    d = dim % m.dim()
    a, b = self.expand(m.shape), other.expand(m.shape)
    res = torch.sub(torch.mul(_rolled(a, d, 1), _rolled(b, d, 2)),
                    torch.mul(_rolled(a, d, 2), _rolled(b, d, 1)))
    return res if out is None else _into(out, res)


native("aten::linalg_cross")(lambda self, other, *, dim=-1: _cross(self, other, dim))
native("aten::linalg_cross.out")(lambda self, other, *, dim=-1, out: _cross(self, other, dim, out))


# ------------------------------------------------------------------------------- vdot

def _vdot(self, other, out=None):
    _real(self, other)
    res = torch.dot(self, other)  # vdot of real vectors is dot, as on CPU (its checks too)
    return res if out is None else _into(out, res)


native("aten::vdot")(lambda self, other: _vdot(self, other))
native("aten::vdot.out")(lambda self, other, *, out: _vdot(self, other, out))
