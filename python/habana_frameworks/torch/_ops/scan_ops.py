"""Scans lowered to Go (kernels/scan.go): cumsum of integers, cumprod, logcumsumexp,
cummax/cummin. Each runs over an [M, N] view with the scanned dim last, accumulating as
torch's CPU kernels do (double for float32, float for bf16, int64 for integers).
"""
from __future__ import annotations

import torch

from .. import _native
from . import reduction
from .linalg import meta
from .nn_ops import _into
from .registry import NotNative, native

aten = torch.ops.aten
_CODE = _native.DTYPE_CODE
SCAN_SUM, SCAN_PROD, SCAN_LSE = range(3)


def _rows(t: torch.Tensor, d: int) -> torch.Tensor:
    """[M, N] view (or copy) of t with dim d last."""
    tt = t.movedim(d, -1)
    n = tt.shape[-1]
    try:
        return tt.view(-1, n)
    except RuntimeError:
        return tt.reshape(-1, n)


def _scan(kind, self, dim, dtype=None):
    if self.dtype not in _CODE or self.is_complex() or (dtype is not None and dtype not in _CODE):
        raise NotNative
    if dtype is not None:
        rdt = dtype
    elif self.dtype.is_floating_point:
        rdt = self.dtype
    else:
        rdt = torch.int64  # integers and bool scan in int64
    d = dim % max(self.dim(), 1)
    x = self if self.dim() else self.view(1)
    res = torch.empty(x.movedim(d, -1).shape, dtype=rdt, device=self.device)
    if res.numel():
        _native.run("scan", [res.view(-1, res.shape[-1]), _rows(x, d)], (kind,))
    res = res.movedim(-1, d)
    return res if self.dim() else res.view(())


# ---------------------------------------------------------------------------- cumsum
# Floats keep reduction.cumsum's kernel (torch's float summation); integers and bool are
# summed here exactly.

def _cumsum(self, dim, dtype=None, out=None):
    aten.cumsum(meta(self), dim, dtype=dtype)  # dim errors
    if (dtype or self.dtype).is_floating_point:
        res = reduction.cumsum(self, dim, dtype=dtype)
    else:
        res = _scan(SCAN_SUM, self, dim, dtype)
    return res if out is None else _into(out, res)


native("aten::cumsum")(lambda self, dim, *, dtype=None: _cumsum(self, dim, dtype))
native("aten::cumsum.out")(lambda self, dim, *, dtype=None, out: _cumsum(self, dim, dtype, out))
native("aten::cumsum_")(lambda self, dim, *, dtype=None: self.copy_(_cumsum(self, dim, dtype)))


# --------------------------------------------------------------------------- cumprod

def _cumprod(self, dim, dtype=None, out=None):
    aten.cumprod(meta(self), dim, dtype=dtype)
    res = _scan(SCAN_PROD, self, dim, dtype)
    return res if out is None else _into(out, res)


native("aten::cumprod")(lambda self, dim, *, dtype=None: _cumprod(self, dim, dtype))
native("aten::cumprod.out")(lambda self, dim, *, dtype=None, out: _cumprod(self, dim, dtype, out))
native("aten::cumprod_")(lambda self, dim, *, dtype=None: self.copy_(_cumprod(self, dim, dtype)))


# --------------------------------------------------------------------- logcumsumexp

def _logcumsumexp(self, dim, out=None):
    if not self.dtype.is_floating_point:
        raise NotNative  # torch's own error for integer inputs
    res = _scan(SCAN_LSE, self, dim)
    return res if out is None else _into(out, res)


native("aten::_logcumsumexp")(lambda self, dim: _logcumsumexp(self, dim))
native("aten::_logcumsumexp.out")(lambda self, dim, *, out: _logcumsumexp(self, dim, out))


# ------------------------------------------------------------------- cummax / cummin

def _cummaxmin_helper(is_min):
    def fn(self, values, indices, dim):
        if self.dtype not in _CODE or self.is_complex():
            raise NotNative
        x = self if self.dim() else self.view(1)
        d = dim % x.dim()
        v = torch.empty(x.movedim(d, -1).shape, dtype=self.dtype, device=self.device)
        i = torch.empty(v.shape, dtype=torch.int64, device=self.device)
        if v.numel():
            _native.run("cummaxmin", [v.view(-1, v.shape[-1]), i.view(-1, i.shape[-1]), _rows(x, d)],
                        (int(is_min),))
        v, i = v.movedim(-1, d), i.movedim(-1, d)
        if not self.dim():
            v, i = v.view(()), i.view(())
        _into(values, v)
        _into(indices, i)
    return fn


native("aten::_cummax_helper")(_cummaxmin_helper(False))
native("aten::_cummin_helper")(_cummaxmin_helper(True))


# ------------------------------------------------------------------------------ prod
# Integer, bool and reduced-float products (float32 goes on to reduction.py's kernel): the last
# column of the running product, which accumulates as CPU's product does (int64 wrapping;
# float for bf16, rounded to bf16 once at the end).

def _prod(self, dim=None, keepdim=False, dtype=None, out=None):
    if self.dtype.is_floating_point and (dtype or self.dtype) in (torch.float32, torch.float64):
        res = reduction.prod_all(self, dtype=dtype) if dim is None else \
            reduction.prod_dim(self, dim, keepdim, dtype=dtype)  # its float kernel
        return res if out is None else _into(out, res)
    if dim is None:
        aten.prod(meta(self), dtype=dtype)
        x = self.reshape(1, -1)
        scan_dim, shape = 1, ()
    else:
        m = aten.prod.dim_int(meta(self), dim, keepdim, dtype=dtype)
        d = dim % max(self.dim(), 1)
        x = self if self.dim() else self.view(1)
        scan_dim, shape = d, m.shape
    if x.numel() == 0:
        rdt = dtype or (self.dtype if self.dtype.is_floating_point else torch.int64)
        res = torch.ones(shape, dtype=rdt, device=self.device)
    else:
        res = _scan(SCAN_PROD, x, scan_dim, dtype).select(scan_dim, -1).reshape(shape).clone()
    return res if out is None else _into(out, res)


native("aten::prod")(lambda self, *, dtype=None: _prod(self, dtype=dtype))
native("aten::prod.dim_int")(lambda self, dim, keepdim=False, *, dtype=None: _prod(self, dim, keepdim, dtype))
native("aten::prod.int_out")(lambda self, dim, keepdim=False, *, dtype=None, out: _prod(self, dim, keepdim, dtype, out))
native("aten::prod.out")(lambda self, *, dtype=None, out: _prod(self, dtype=dtype, out=out))
