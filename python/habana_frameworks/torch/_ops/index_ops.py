"""Indexing and data-movement ops lowered to Go: cat, gather, scatter (src/value/reduce),
scatter_add, scatter_reduce, index_add, index_copy, index_fill, advanced indexing (index.Tensor, index_put_ /
_index_put_impl_ with accumulate, bool masks, integer indices), nonzero, tril/triu,
sort/argsort/topk, one_hot, arange, linspace.

Shapes, dtypes and argument errors come from running the aten op on meta tensors (torch's
own checks, so the exception classes and messages match CPU); data-dependent errors
(out-of-range indices) are found by the Go kernels before any memory is touched.

Gather, scatter and indexing all use one Go form: a "restrided" view of the indexed tensor
over the iteration shape (stride 0 along indexed dims) plus index tensors broadcast to
that shape; element p addresses view(p) + sum_k index_k(p) * stride_k.
"""
from __future__ import annotations

import math
import warnings

import torch

from .. import _native
from . import registry
from .fallback import type_name as _tname
from .linalg import meta
from .nn_ops import _into
from .registry import NotNative, native

aten = torch.ops.aten
_CODE = _native.DTYPE_CODE
_REDUCED = (torch.bfloat16, torch.float16)
RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN = range(5)
_REDUCE = {"sum": RED_ADD, "add": RED_ADD, "mean": RED_ADD, "prod": RED_MUL, "multiply": RED_MUL,
           "amax": RED_MAX, "amin": RED_MIN}


def _supported(*ts) -> None:
    for t in ts:
        if isinstance(t, torch.Tensor) and t.dtype not in _CODE:
            raise NotNative


def _empty_as(m: torch.Tensor, device) -> torch.Tensor:
    return torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device=device)


def _run_index_error(name, tensors, ints, floats=(), index_error=False, op=None):
    """Run a Go op; its errors become the exception class CPU raises (IndexError for
    out-of-bounds advanced indexing, RuntimeError otherwise), named after the aten op."""
    label = f"{'IndexError' if index_error else 'RuntimeError'}:{op or name}"
    try:
        _native.run(name, tensors, ints, floats, label=label)
    except _native.NativeError as e:
        msg = str(e)
        if msg.startswith(name + ": "):
            msg = msg[len(name) + 2:]
        msg = f"{op or name}: {msg}"
        if index_error and "out of bounds" in msg:
            raise IndexError(msg) from None
        raise RuntimeError(msg) from None


def _wrap_dim(dim: int, n: int) -> int:
    n = max(n, 1)
    return dim + n if dim < 0 else dim


def _parallel_mask(ndim: int, skip) -> int:
    m = 0
    for d in range(min(ndim, 62)):
        if d not in skip:
            m |= 1 << d
    return m


# ------------------------------------------------------------------------------------ cat

@native("aten::cat", "aten::cat.out")
def cat(tensors, dim=0, *, out=None):
    tensors = list(tensors)
    shape = _cat_fast_shape(tensors, dim)
    if shape is not None:
        # The functional cat reaches here as cat.out with a freshly allocated out (a
        # composite kernel): fill it in place when it is already the result's tensor.
        if out is None:
            res = torch.empty(shape, dtype=tensors[0].dtype, device=tensors[0].device)
        elif (out.dtype == tensors[0].dtype and list(out.shape) == shape and out.is_contiguous()
              and all(t.untyped_storage().data_ptr() != out.untyped_storage().data_ptr() for t in tensors)):
            res = out
        else:
            res = None
        if res is not None:
            _native.run("cat", [res] + tensors, (dim % len(shape),))
            return res
    if out is None:
        m = aten.cat(meta(tensors), dim)
    else:
        m = aten.cat.out(meta(tensors), dim, out=meta(out))
    _supported(m, *tensors)
    res = _empty_as(m, tensors[0].device)
    if res.numel():
        ins = [t for t in tensors if t.numel() > 0]
        _native.run("cat", [res] + ins, (_wrap_dim(dim, m.dim()),))
    return res if out is None else _into(out, res)


def _cat_fast_shape(tensors, dim):
    """cat's result shape, computed without the meta op (costly next to a small cat), when
    the call is plain: one supported dtype, non-empty inputs of one rank that agree off
    dim, and a contiguous result (ranks 4 and 5 could be channels-last: contiguous inputs
    only). None for anything else, which takes the checked path."""
    if not tensors:
        return None
    t0 = tensors[0]
    nd, dt = t0.dim(), t0.dtype
    if nd == 0 or dt not in _CODE or not -nd <= dim < nd:
        return None
    d = dim % nd
    shape = list(t0.shape)
    total = 0
    for t in tensors:
        if t.dtype != dt or t.dim() != nd or t.numel() == 0:
            return None
        s = t.shape
        for k in range(nd):
            if k != d and s[k] != shape[k]:
                return None
        total += s[d]
        if nd in (4, 5) and not t.is_contiguous():
            return None
    shape[d] = total
    return shape


# ------------------------------------------------------------------ gather / scatter / add

def _restride(t: torch.Tensor, shape, zero_dims) -> torch.Tensor:
    """t viewed over `shape` with its own strides, 0 along zero_dims."""
    st = [0 if d in zero_dims else t.stride(d) for d in range(t.dim())]
    return t.as_strided(shape, st, t.storage_offset())


def _as1d(*ts):
    return [t.reshape(1) if isinstance(t, torch.Tensor) and t.dim() == 0 else t for t in ts]


@native("aten::gather", "aten::gather.out")
def gather(self, dim, index, *, sparse_grad=False, out=None):
    if out is None:
        m = aten.gather(meta(self), dim, meta(index), sparse_grad=sparse_grad)
    else:
        m = aten.gather.out(meta(self), dim, meta(index), sparse_grad=sparse_grad, out=meta(out))
    _supported(self)
    res = torch.empty(m.shape, dtype=m.dtype, device=self.device)
    if res.numel():
        d = _wrap_dim(dim, self.dim())
        s, ix, r = _as1d(self, index, res)
        selfR = _restride(s, ix.shape, (d,))
        _run_index_error("index_gather", [r, selfR, ix], (0, 1, s.size(d), s.stride(d), d), op="gather")
    return res if out is None else _into(out, res)


def _scatter_into(res, dim, index, src, kind, alpha=1):
    """res[index along dim] (kind)= src, over index's shape, in place on res."""
    if index.numel() == 0:
        return res
    d = _wrap_dim(dim, res.dim())
    if not isinstance(src, torch.Tensor):
        src = torch.tensor(src, dtype=res.dtype).expand(index.shape)
    elif src.dtype != res.dtype:
        src = src.to(res.dtype)
    r, ix, s = _as1d(res, index, src)
    dstR = _restride(r, ix.shape, (d,))
    srcR = s.as_strided(ix.shape, s.stride(), s.storage_offset()) if s.dim() else s.expand(ix.shape)
    fa, ia = (float(alpha), 1) if res.dtype.is_floating_point else (1.0, int(alpha))
    _run_index_error("index_put", [dstR, srcR, ix],
                     (0, 1, r.size(d), r.stride(d), d, kind, ia, _parallel_mask(ix.dim(), (d,))), (fa,),
                     op="scatter")
    return res


def _scatter_common(meta_fn, self, dim, index, src, kind, inplace, out, include_self=True,
                    mean=False):
    m = meta_fn()
    _supported(self, src)
    if isinstance(src, (complex,)):
        raise NotNative
    res = self if inplace else torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device=self.device)
    if not inplace:
        res.copy_(self)
    if index.numel() == 0:
        return res if out is None else _into(out, res)
    # torch's CPU kernels sum and multiply bf16/fp16 in float32 and round once at the end.
    work = res.float() if res.dtype in _REDUCED and kind in (RED_ADD, RED_MUL) else res
    if not include_self:
        _scatter_into(work, dim, index, _identity(kind, res.dtype), RED_NONE)
    _scatter_into(work, dim, index, src, kind)
    if work is not res:
        res.copy_(work)
    if mean:
        count = torch.full(res.shape, 1 if include_self else 0, dtype=res.dtype, device=res.device)
        _scatter_into(count, dim, index, torch.ones((), dtype=res.dtype).expand(index.shape), RED_ADD)
        _native.run("div_count", [res, count])
    return res if out is None else _into(out, res)


def _identity(kind, dtype):
    if kind == RED_ADD:
        return 0
    if kind == RED_MUL:
        return 1
    if dtype.is_floating_point:
        return float("-inf") if kind == RED_MAX else float("inf")
    if dtype == torch.bool:
        return kind == RED_MIN
    info = torch.iinfo(dtype)
    return info.min if kind == RED_MAX else info.max


def _reduce_kind(reduce):
    if reduce is None:
        return RED_NONE
    if reduce not in _REDUCE:
        raise NotNative  # torch raises its own error
    return _REDUCE[reduce]


def _reg_scatter(fname, mname, takes_reduce):
    """Functional, in-place and out= forms of one scatter overload."""
    def make(inplace, out_form):
        def fn(self, dim, index, src, *args, out=None, **kw):
            reduce = kw.get("reduce", args[0] if args else None) if takes_reduce else None
            mfn = getattr(aten, "scatter_" if inplace else "scatter")
            ov = getattr(mfn, mname if not out_form else mname + "_out")
            mself = meta(self)
            margs = (mself, dim, meta(index), meta(src))
            mkw = {"reduce": reduce} if takes_reduce else {}
            meta_fn = (lambda: ov(*margs, out=meta(out), **mkw)) if out_form else (lambda: ov(*margs, **mkw))
            return _scatter_common(meta_fn, self, dim, index, src, _reduce_kind(reduce), inplace, out)
        return fn
    native(f"aten::scatter.{fname}")(make(False, False))
    native(f"aten::scatter_.{fname}")(make(True, False))
    native(f"aten::scatter.{fname}_out")(make(False, True))


_reg_scatter("src", "src", False)
_reg_scatter("value", "value", False)
_reg_scatter("reduce", "reduce", True)
_reg_scatter("value_reduce", "value_reduce", True)


@native("aten::scatter_add")
def scatter_add(self, dim, index, src):
    return _scatter_common(lambda: aten.scatter_add(meta(self), dim, meta(index), meta(src)),
                           self, dim, index, src, RED_ADD, False, None)


@native("aten::scatter_add_")
def scatter_add_(self, dim, index, src):
    return _scatter_common(lambda: aten.scatter_add_(meta(self), dim, meta(index), meta(src)),
                           self, dim, index, src, RED_ADD, True, None)


@native("aten::scatter_add.out")
def scatter_add_out(self, dim, index, src, *, out):
    return _scatter_common(lambda: aten.scatter_add.out(meta(self), dim, meta(index), meta(src), out=meta(out)),
                           self, dim, index, src, RED_ADD, False, out)


def _scatter_reduce(self, dim, index, src, reduce, include_self=True, inplace=False, out=None):
    margs = (meta(self), dim, meta(index), meta(src), reduce)
    if inplace:
        meta_fn = lambda: aten.scatter_reduce_.two(*margs, include_self=include_self)  # noqa: E731
    elif out is not None:
        meta_fn = lambda: aten.scatter_reduce.two_out(*margs, include_self=include_self, out=meta(out))  # noqa: E731
    else:
        meta_fn = lambda: aten.scatter_reduce.two(*margs, include_self=include_self)  # noqa: E731
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        meta_fn()
        raise NotNative
    return _scatter_common(meta_fn, self, dim, index, src, _REDUCE[reduce], inplace, out,
                           include_self=include_self, mean=reduce == "mean")


native("aten::scatter_reduce.two")(
    lambda self, dim, index, src, reduce, *, include_self=True:
    _scatter_reduce(self, dim, index, src, reduce, include_self))
native("aten::scatter_reduce_.two")(
    lambda self, dim, index, src, reduce, *, include_self=True:
    _scatter_reduce(self, dim, index, src, reduce, include_self, inplace=True))
native("aten::scatter_reduce.two_out")(
    lambda self, dim, index, src, reduce, *, include_self=True, out:
    _scatter_reduce(self, dim, index, src, reduce, include_self, out=out))


def _index_add(self, dim, index, source, alpha, inplace, out):
    margs = (meta(self), dim, meta(index), meta(source))
    if inplace:
        aten.index_add_(*margs, alpha=alpha)
    elif out is not None:
        aten.index_add.out(*margs, alpha=alpha, out=meta(out))
    else:
        m = aten.index_add(*margs, alpha=alpha)
    _supported(self, source)
    if isinstance(alpha, complex) or (isinstance(alpha, float) and not self.dtype.is_floating_point):
        raise NotNative
    if inplace:
        res = self
    else:
        res = torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device=self.device) \
            if out is None else torch.empty_like(self)
        res.copy_(self)
    if index.numel() and res.numel():
        d = _wrap_dim(dim, res.dim())
        r, src, ix = _as1d(res, source, index)
        if src.dtype != r.dtype:
            src = src.to(r.dtype)
        ixR = ix.as_strided(src.shape, [ix.stride(0) if k == d else 0 for k in range(src.dim())],
                            ix.storage_offset())
        dstR = _restride(r, src.shape, (d,))
        fa, ia = (float(alpha), 1) if r.dtype.is_floating_point else (1.0, int(alpha))
        if r.dtype in _REDUCED:  # CPU sums bf16/fp16 in float32, rounding once
            w = r.float()
            _run_index_error("index_put", [_restride(w, src.shape, (d,)), src.float(), ixR],
                             (0, 1, w.size(d), w.stride(d), d, RED_ADD, ia, _parallel_mask(src.dim(), (d,))),
                             (fa,), op="index_add")
            r.copy_(w)
        else:
            _run_index_error("index_put", [dstR, src, ixR],
                             (0, 1, r.size(d), r.stride(d), d, RED_ADD, ia, _parallel_mask(src.dim(), (d,))),
                             (fa,), op="index_add")
    return res if out is None else _into(out, res)


native("aten::index_add")(lambda self, dim, index, source, *, alpha=1:
                          _index_add(self, dim, index, source, alpha, False, None))
native("aten::index_add_")(lambda self, dim, index, source, *, alpha=1:
                           _index_add(self, dim, index, source, alpha, True, None))
native("aten::index_add.out")(lambda self, dim, index, source, *, alpha=1, out:
                              _index_add(self, dim, index, source, alpha, False, out))


def _index_copy(self, dim, index, source, inplace, out):
    """self[..., index[i], ...] = source[..., i, ...] along dim (optimum-habana's static KV
    caches write each new token this way, also inside HPU-graph captures)."""
    margs = (meta(self), dim, meta(index), meta(source))
    if inplace:
        aten.index_copy_(*margs)
    elif out is not None:
        aten.index_copy.out(*margs, out=meta(out))
    else:
        m = aten.index_copy(*margs)
    _supported(self, source)
    if inplace:
        res = self
    else:
        res = torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device=self.device) \
            if out is None else torch.empty_like(self)
        res.copy_(self)
    if index.numel() and res.numel():
        d = _wrap_dim(dim, res.dim())
        r, src, ix = _as1d(res, source, index)
        ixR = ix.as_strided(src.shape, [ix.stride(0) if k == d else 0 for k in range(src.dim())],
                            ix.storage_offset())
        _run_index_error("index_put", [_restride(r, src.shape, (d,)), src, ixR],
                         (0, 1, r.size(d), r.stride(d), d, RED_NONE, 1, _parallel_mask(src.dim(), (d,))),
                         (1.0,), index_error=True, op="index_copy_()")
    return res if out is None else _into(out, res)


def _index_fill(self, dim, index, value, inplace):
    """self[..., index[i], ...] = value along dim (index_copy's backward uses it)."""
    if isinstance(value, torch.Tensor):
        mvalue = value.to("meta") if value.device.type != "cpu" else value
    else:
        mvalue = value
    m = (aten.index_fill_ if inplace else aten.index_fill)(meta(self), dim, meta(index), mvalue)
    _supported(self)
    if isinstance(value, complex) or (isinstance(value, torch.Tensor) and value.dim() != 0):
        raise NotNative  # torch's own error
    res = self if inplace else torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device=self.device)
    if not inplace:
        res.copy_(self)
    if index.numel() and res.numel():
        d = _wrap_dim(dim, res.dim())
        r, ix = _as1d(res, index)
        shape = list(r.shape)
        shape[d] = ix.numel()
        v = value.item() if isinstance(value, torch.Tensor) else value
        src = torch.tensor(v, dtype=r.dtype).to(r.device).expand(shape)
        ixR = ix.reshape(-1).as_strided(shape, [1 if k == d else 0 for k in range(len(shape))])
        try:
            _run_index_error("index_put", [_restride(r, shape, (d,)), src, ixR],
                             (0, 1, r.size(d), r.stride(d), d, RED_NONE, 1, _parallel_mask(len(shape), (d,))),
                             (1.0,), index_error=True, op="index_fill_")
        except IndexError as e:  # CPU's message has no op name
            raise IndexError(str(e).removeprefix("index_fill_: ")) from None
    return res


native("aten::index_copy")(lambda self, dim, index, source: _index_copy(self, dim, index, source, False, None))
native("aten::index_copy_")(lambda self, dim, index, source: _index_copy(self, dim, index, source, True, None))
native("aten::index_copy.out")(lambda self, dim, index, source, *, out:
                               _index_copy(self, dim, index, source, False, out))
for _ov in ("int_Scalar", "int_Tensor"):
    native(f"aten::index_fill.{_ov}")(lambda self, dim, index, value: _index_fill(self, dim, index, value, False))
    native(f"aten::index_fill_.{_ov}")(lambda self, dim, index, value: _index_fill(self, dim, index, value, True))


# ------------------------------------------------------------------- advanced indexing

def _nonzero(self: torch.Tensor) -> torch.Tensor:
    count = torch.zeros((), dtype=torch.int64)
    _native.run("nonzero_count", [count, self])
    n = int(count)
    out = torch.empty((n, self.dim()), dtype=torch.int64, device=self.device)
    if n:
        _native.run("nonzero", [out, self])
    return out


@native("aten::nonzero", "aten::nonzero.out")
def nonzero(self, *, out=None):
    _supported(self)
    res = _nonzero(self)
    return res if out is None else _into(out, res)


def _expand_masks(self, indices):
    """Bool/uint8 masks become integer indices (one per mask dim); returns a list with one
    entry (index tensor or None) per indexed dim."""
    res = []
    for idx in indices:
        if idx is None:
            res.append(None)
            continue
        if idx.dtype in (torch.bool, torch.uint8):
            k = len(res)
            for j in range(idx.dim()):
                if k + j >= self.dim() or idx.shape[j] != self.shape[k + j]:
                    raise IndexError(
                        f"The shape of the mask {list(idx.shape)} at index {j} does not match the "
                        f"shape of the indexed tensor {list(self.shape)} at index {k + j}")
            nz = _nonzero(idx) if idx.device.type == "hpu" else idx.nonzero()
            for j in range(idx.dim()):
                res.append(nz.select(1, j))
        elif idx.dtype in (torch.int64, torch.int32):
            res.append(idx)
        else:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return res


def _index_plan(self, indices):
    """(result shape, restrided view of self, index views, spec ints, parallel mask)."""
    idx = _expand_masks(self, indices)
    m = aten.index.Tensor(meta(self), [meta(i) for i in idx])  # shape and errors (IndexError)
    dims = [d for d, t in enumerate(idx) if t is not None]
    if not dims:
        return m.shape, None, [], [], 0
    B = list(torch.broadcast_shapes(*(idx[d].shape for d in dims)))
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    rest = [d for d in range(self.dim()) if d not in dims]
    if adjacent:
        before, after = [d for d in rest if d < dims[0]], [d for d in rest if d > dims[-1]]
        shape = [self.shape[d] for d in before] + B + [self.shape[d] for d in after]
        sst = [self.stride(d) for d in before] + [0] * len(B) + [self.stride(d) for d in after]
        bpos = len(before)
    else:
        shape = B + [self.shape[d] for d in rest]
        sst = [0] * len(B) + [self.stride(d) for d in rest]
        bpos = 0
    assert list(m.shape) == shape, (m.shape, shape)
    selfR = self.as_strided(shape, sst, self.storage_offset())
    views, ints = [], [1, len(dims)]
    for d in dims:
        e = idx[d].expand(B)
        st = [0] * len(shape)
        st[bpos:bpos + len(B)] = e.stride()
        views.append(e.as_strided(shape, st, e.storage_offset()))
        ints += [self.shape[d], self.stride(d), d]
    par = _parallel_mask(len(shape), range(bpos, bpos + len(B)))
    return shape, selfR, views, ints, par


@native("aten::index.Tensor", "aten::index.Tensor_out")
def index(self, indices, *, out=None):
    _supported(self)
    shape, selfR, views, ints, _ = _index_plan(self, indices)
    res = torch.empty(shape, dtype=self.dtype, device=self.device)
    if selfR is None:
        res.copy_(self)
    elif res.numel():
        _run_index_error("index_gather", [res, selfR] + views, ints, index_error=True, op="index")
    return res if out is None else _into(out, res)


@native("aten::masked_select", "aten::masked_select.out")
def masked_select(self, mask, *, out=None):
    if mask.dtype != torch.bool:
        raise NotNative  # torch's own dtype error
    _supported(self)
    shape = torch.broadcast_shapes(self.shape, mask.shape) or (1,)
    res = index(self.expand(shape), [mask.expand(shape)])
    return res if out is None else _into(out, res)


def _index_put(self, indices, values, accumulate):
    _supported(self, values)
    if values.dtype != self.dtype:
        raise RuntimeError("Index put requires the source and destination dtypes match, got "
                           f"{_tname(self.dtype)} for the destination and {_tname(values.dtype)} for the source.")
    shape, selfR, views, ints, par = _index_plan(self, indices)
    try:
        v = values.expand(shape)
    except RuntimeError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be "
                           f"broadcast to indexing result of shape {list(shape)}") from None
    if selfR is None:
        selfR = self
        ints, par = [1, 0], _parallel_mask(self.dim(), ())
    if v.numel() == 0:
        return self
    _run_index_error("index_put", [selfR, v] + views,
                     ints + [RED_ADD if accumulate else RED_NONE, 1, par], (1.0,), index_error=True,
                     op="index_put_")
    return self


@native("aten::index_put_", "aten::_index_put_impl_")
def index_put_(self, indices, values, accumulate=False, unsafe=False):
    return _index_put(self, indices, values, accumulate)


@native("aten::index_put")
def index_put(self, indices, values, accumulate=False):
    return _index_put(self.clone(), indices, values, accumulate)


@native("aten::index_put.out", "aten::_index_put_impl.out")
def index_put_out(self, indices, values, accumulate=False, unsafe=False, *, out):
    return _into(out, _index_put(self.clone(), indices, values, accumulate))


# ------------------------------------------------------------------------------ tril/triu

def _tri(upper):
    def fn(self, diagonal=0, *, out=None, inplace=False):
        mfn = aten.triu if upper else aten.tril
        if inplace:
            (aten.triu_ if upper else aten.tril_)(meta(self), diagonal)
        elif out is not None:
            mfn.out(meta(self), diagonal, out=meta(out))
        else:
            mfn(meta(self), diagonal)
        _supported(self)
        res = self if inplace else torch.empty_like(self)
        if res.numel():
            _native.run("tri", [res, self], (int(diagonal), int(upper)))
        return res if out is None else _into(out, res)
    return fn


for _up, _n in ((False, "tril"), (True, "triu")):
    _f = _tri(_up)
    native(f"aten::{_n}", f"aten::{_n}.out")(_f)
    native(f"aten::{_n}_")(lambda self, diagonal=0, _f=_f: _f(self, diagonal, inplace=True))


# -------------------------------------------------------------------------- sort / topk

def _sort(self, stable, dim, descending, values=None, indices=None):
    mv, mi = aten.sort.stable(meta(self), stable=stable, dim=dim, descending=descending)
    _supported(self)
    v = torch.empty(mv.shape, dtype=mv.dtype, device=self.device)
    i = torch.empty(mi.shape, dtype=torch.int64, device=self.device)
    if v.numel():
        # stable=None is unstable, as aten's stable.value_or(false)
        _native.run("sort", [v, i, self], (_wrap_dim(dim, self.dim()), int(bool(descending)), int(bool(stable))))
    if values is not None:
        return _into(values, v), _into(indices, i)
    return v, i


native("aten::sort")(lambda self, dim=-1, descending=False: _sort(self, False, dim, descending))
native("aten::sort.stable")(lambda self, *, stable=None, dim=-1, descending=False:
                            _sort(self, stable, dim, descending))
native("aten::sort.values")(lambda self, dim=-1, descending=False, *, values, indices:
                            _sort(self, False, dim, descending, values, indices))
native("aten::sort.values_stable")(lambda self, *, stable=None, dim=-1, descending=False, values, indices:
                                   _sort(self, stable, dim, descending, values, indices))


def _topk(self, k, dim=-1, largest=True, sorted=True, values=None, indices=None):
    mv, mi = aten.topk(meta(self), k, dim, largest, sorted)
    _supported(self)
    if self.dim() and (k < 0 or k > self.shape[_wrap_dim(dim, self.dim())]):
        raise RuntimeError("selected index k out of range")
    v = torch.empty(mv.shape, dtype=mv.dtype, device=self.device)
    i = torch.empty(mi.shape, dtype=torch.int64, device=self.device)
    if v.numel():
        _native.run("topk", [v, i, self], (_wrap_dim(dim, self.dim()), int(k), int(bool(largest)), int(bool(sorted))))
    if values is not None:
        return _into(values, v), _into(indices, i)
    return v, i


native("aten::topk")(_topk)
native("aten::topk.values")(lambda self, k, dim=-1, largest=True, sorted=True, *, values, indices:
                            _topk(self, k, dim, largest, sorted, values, indices))


# ------------------------------------------------------------------------------- one_hot

@native("aten::one_hot")
def one_hot(self, num_classes=-1):
    if self.dtype != torch.int64 or self.numel() == 0:
        raise NotNative  # torch's own error / shape inference for empty input
    flat = self.reshape(-1)
    # min and max of the classes (one_hot validates them on the host, as CPU does).
    lo, _ = _topk(flat, 1, 0, False)
    hi, _ = _topk(flat, 1, 0, True)
    mn, mx = int(lo.cpu()[0]), int(hi.cpu()[0])
    if mn < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = mx + 1
    elif num_classes <= mx:
        raise RuntimeError("Class values must be smaller than num_classes.")
    res = torch.zeros(tuple(self.shape) + (num_classes,), dtype=torch.int64, device=self.device)
    _scatter_into(res, -1, self.unsqueeze(-1), 1, RED_NONE)
    return res


_one_hot_lib = torch.library.Library("aten", "IMPL")
# one_hot is CompositeImplicitAutograd: without a kernel of its own at the HPU key it
# decomposes into min/max/scatter_ before reaching the fallback.
_one_hot_lib.impl("one_hot", lambda *a, **k: registry.hpu_kernel(aten.one_hot.default, *a, **k), "HPU")


# ------------------------------------------------------------------------ arange/linspace

def _num(v):
    return v.item() if isinstance(v, torch.Tensor) else v


def _fmt(v) -> str:
    """A number as C++'s ostream prints it (6 significant digits, inf, nan)."""
    if isinstance(v, int):
        return str(v)
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "nan" if math.isnan(v) else f"{v:g}"


def _arange_size(start, end, step, dtype: torch.dtype) -> int:
    """torch CPU arange's checks, in its accumulation type: int64 for integral dtypes (each
    bound truncated first), float for bfloat16/float16, double otherwise; and its length: from
    the truncated bounds for int64, ceil((end - start) / step) in double of the given values
    for every other dtype (int32 arange(-2.5, 3) has 6 elements, int64 5).
    Python's own arithmetic here never raises (a meta call raised ZeroDivisionError for an
    integral step that truncates to 0, where CPU says "step must be nonzero")."""
    if dtype == torch.bool or any(isinstance(x, complex) for x in (start, end, step)):
        raise NotNative  # the CPU kernel's own error
    if not dtype.is_floating_point:
        if any(isinstance(x, float) and not (math.isfinite(x) and abs(x) < 2.0 ** 63)
               for x in (start, end, step)):
            raise NotNative  # Scalar conversion errors: let CPU raise them
        xs, xe, xst = int(start), int(end), int(step)
    elif dtype in _REDUCED:
        if any(math.isfinite(float(x)) and abs(float(x)) > 3.4028234663852886e38 for x in (start, end, step)):
            raise RuntimeError("value cannot be converted to type float without overflow")
        xs, xe, xst = (float(torch.tensor(float(x), dtype=torch.float32)) for x in (start, end, step))
    else:
        xs, xe, xst = float(start), float(end), float(step)
    if not (xst > 0 or xst < 0):
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(xs) and math.isfinite(xe)):
        raise RuntimeError(f"unsupported range: {_fmt(xs)} -> {_fmt(xe)}")
    if not ((xst > 0 and xe >= xs) or (xst < 0 and xe <= xs)):
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    if dtype == torch.int64:  # CPU's exact integer length for int64 only
        sgn = 1 if xst > 0 else -1
        num = xe - xs + xst - sgn
        q = abs(num) // abs(xst)  # C++ integer division truncates toward zero
        size_d = float(q if (num >= 0) == (xst > 0) else -q)
    else:
        try:
            size_d = math.ceil((float(end) - float(start)) / float(step))
        except (OverflowError, ValueError):  # inf / nan
            size_d = math.nan
    if not (0 <= size_d <= 9.223372036854775807e18):
        raise RuntimeError("invalid size, possible overflow?")
    return int(size_d)


@native("aten::arange.start_out")
def arange_start_out(start, end, step=1, *, out):
    start, end, step = _num(start), _num(end), _num(step)
    if out.dtype not in _CODE:
        raise NotNative
    size = _arange_size(start, end, step, out.dtype)
    n = out.numel()
    if n != size:
        if n > 0:
            warnings.warn(f"The number of elements in the out tensor of shape {list(out.shape)} is {n} which "
                          f"does not match the computed number of elements {size}. Note that this may occur "
                          f"as a result of rounding error. The out tensor will be resized to a tensor of shape "
                          f"({size},).")
        out.resize_((size,))
    if out.numel():
        is_int = not out.dtype.is_floating_point
        if out.dim() != 1:
            raise NotNative  # CPU keeps an out of the right numel in its shape
        # an integral dtype takes float bounds truncated to int64, as CPU's Scalar.to<int64_t>()
        # (Funnel's torch.arange(-n, n, 1.0, dtype=torch.long)); _arange_size checked they fit
        _native.run("arange", [out], (int(is_int), int(start) if is_int else 0, int(step) if is_int else 0),
                    (float(start), float(step)))
    return out


@native("aten::linspace.out")
def linspace_out(start, end, steps, *, out):
    start, end = _num(start), _num(end)
    if not out.dtype.is_floating_point or out.dtype not in _CODE or \
            any(isinstance(x, complex) for x in (start, end)):
        raise NotNative
    aten.linspace.out(start, end, steps, out=meta(out))
    if steps < 0:
        raise NotNative
    if out.shape != (steps,):
        out.resize_((steps,))
    if steps:
        _native.run("linspace", [out], (), (float(start), float(end)))
    return out
