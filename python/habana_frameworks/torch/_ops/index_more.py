"""More indexing ops on the Go index kernels (index_ops.py's gather/put forms):
take, put_, index_reduce, masked_scatter_, narrow_copy and nonzero_static
(index_copy and index_fill live in index_ops.py).

index_reduce writes through one Go index_put: the destination restrided over the
source's shape with stride 0 along dim, the 1-D index broadcast over the same shape.
Which indices wrap (take/put accept negative ones, index_reduce does not) follows CPU,
and out-of-range indices raise IndexError as there, found by the kernel before it writes.
"""
from __future__ import annotations

import torch

from . import index_ops
from .index_ops import (RED_ADD, RED_MAX, RED_MIN, RED_MUL, RED_NONE, _restride, _run_index_error, _supported, _wrap_dim,
                        _parallel_mask)
from .fallback import type_name as _tname
from .linalg import meta
from .nn_ops import _into
from .registry import NotNative, native

aten = torch.ops.aten


def _real(*ts) -> None:
    for t in ts:
        if isinstance(t, torch.Tensor) and t.is_complex():
            raise NotNative
    _supported(*ts)


def _put_along(res, dim, index, src, kind, wrap, op):
    """res[..., index[j], ...] (kind)= src[..., j, ...] along dim, in place on res (>= 1-D)."""
    if index.numel() == 0 or res.numel() == 0:
        return res
    d = _wrap_dim(dim, res.dim())
    ix = index.reshape(1) if index.dim() == 0 else index
    ixR = ix.as_strided(src.shape, [ix.stride(0) if k == d else 0 for k in range(src.dim())],
                        ix.storage_offset())
    dstR = _restride(res, src.shape, (d,))
    _run_index_error("index_put", [dstR, src, ixR],
                     (int(wrap), 1, res.size(d), res.stride(d), d, kind, 1,
                      _parallel_mask(src.dim(), (d,))), (1.0,), index_error=True, op=op)
    return res


def _as1d(t):
    return t.reshape(1) if t.dim() == 0 else t


# ------------------------------------------------------------------------------- take

def _take(self, index, out=None):
    _real(self)
    aten.take(meta(self), meta(index))  # dtype errors
    if self.numel() == 0 and index.numel():
        raise IndexError("take(): tried to take from an empty tensor")
    flat = self.reshape(-1)
    res = torch.empty(index.shape, dtype=self.dtype, device=self.device)
    if res.numel():
        ix = index.reshape(-1)
        _run_index_error("index_gather", [res.view(-1), _restride(flat, ix.shape, (0,)), ix],
                         (1, 1, flat.numel(), flat.stride(0), 0), index_error=True, op="take")
    return res if out is None else _into(out, res)


native("aten::take")(lambda self, index: _take(self, index))
native("aten::take.out")(lambda self, index, *, out: _take(self, index, out))


# -------------------------------------------------------------------------------- put

def _put(self, index, source, accumulate=False, inplace=True):
    _real(self, source)
    aten.put_(meta(self), meta(index), meta(source), accumulate)  # dtype and numel errors
    if index.numel() == 0:
        return self if inplace else self.clone()
    if self.numel() == 0:
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    res = self if inplace else self.clone()
    work = res if res.is_contiguous() else res.contiguous()
    flat = work.view(-1)
    # CPU accumulates bf16/fp16 element by element in the reduced type: the combiner
    # rounds each add to the stored type as it does.
    vals = source.reshape(-1)
    ix = index.reshape(-1)
    _run_index_error("index_put", [_restride(flat, ix.shape, (0,)), vals, ix],
                     (1, 1, flat.numel(), 1, 0, RED_ADD if accumulate else RED_NONE, 1, 0), (1.0,),
                     index_error=True, op="put_")
    if work is not res:
        res.copy_(work)
    return res


native("aten::put_")(lambda self, index, source, accumulate=False: _put(self, index, source, accumulate))
native("aten::put")(lambda self, index, source, accumulate=False: _put(self, index, source, accumulate, False))
native("aten::put.out")(lambda self, index, source, accumulate=False, *, out:
                        _into(out, _put(self, index, source, accumulate, False)))


# ----------------------------------------------------------------------- index_reduce

_KIND = {"prod": RED_MUL, "mean": RED_ADD, "amax": RED_MAX, "amin": RED_MIN}


def _index_reduce(self, dim, index, source, reduce, include_self=True, inplace=False, out=None):
    _real(self, source)
    margs = (meta(self), dim, meta(index), meta(source), reduce)
    if inplace:
        aten.index_reduce_(*margs, include_self=include_self)
    elif out is not None:
        aten.index_reduce.out(*margs, include_self=include_self, out=meta(out))
    else:
        aten.index_reduce(*margs, include_self=include_self)
    if reduce not in _KIND:
        raise NotNative
    res = self if inplace else self.clone()
    if index.numel() == 0 or res.numel() == 0:
        return res if out is None else _into(out, res)
    # CPU combines source slices into self one index at a time, in the self dtype (bf16
    # rounds at each step); the kernel walks the index dim in order and rounds as it does.
    r, s = _as1d(res), _as1d(source)
    d = _wrap_dim(dim, r.dim())
    kind = _KIND[reduce]
    if not include_self:
        ident = index_ops._identity(kind, r.dtype)
        fill = torch.full((), ident, dtype=r.dtype, device=r.device).expand(s.shape)
        _put_along(r, d, index, fill, RED_NONE, False, "index_reduce_()")
    _put_along(r, d, index, s, kind, False, "index_reduce_()")
    if reduce == "mean":
        count = torch.full(r.shape, 1 if include_self else 0, dtype=r.dtype, device=r.device)
        _put_along(count, d, index, torch.ones((), dtype=r.dtype, device=r.device).expand(s.shape),
                   RED_ADD, False, "index_reduce_()")
        index_ops._native.run("div_count", [r, count])
    return res if out is None else _into(out, res)


native("aten::index_reduce")(lambda self, dim, index, source, reduce, *, include_self=True:
                             _index_reduce(self, dim, index, source, reduce, include_self))
native("aten::index_reduce_")(lambda self, dim, index, source, reduce, *, include_self=True:
                              _index_reduce(self, dim, index, source, reduce, include_self, True))
native("aten::index_reduce.out")(lambda self, dim, index, source, reduce, *, include_self=True, out:
                                 _index_reduce(self, dim, index, source, reduce, include_self, out=out))


# --------------------------------------------------------------------- masked_scatter

@native("aten::masked_scatter_")
def masked_scatter_(self, mask, source):
    _real(self, source)
    if mask.dtype != torch.bool:  # (uint8 masks too, past their deprecation warning)
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {_tname(mask.dtype)}")
    if source.dtype != self.dtype:
        raise NotNative  # CPU's own error
    aten.masked_scatter_(meta(self), meta(mask), meta(source))
    if self.numel() == 0:
        return self
    m = mask.expand(self.shape)
    count = torch.zeros((), dtype=torch.int64)
    index_ops._native.run("nonzero_count", [count, m])
    n = int(count)
    if n == 0:
        return self
    if n > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    vals = source.reshape(-1)[:n]
    if self.dim() == 0:  # a 0-d mask indexes nothing: write through 1-element views
        index_ops.index_put_(self.view(1), [m.reshape(1)], vals)
    else:
        index_ops.index_put_(self, [m], vals)
    return self


# ----------------------------------------------------------------------- narrow_copy

def _narrow_copy(self, dim, start, length, out=None):
    _real(self)
    if dim >= max(self.dim(), 1):  # (a dim below the range is an IndexError, from the meta op)
        raise RuntimeError("Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, but got false.  "
                           "(Could this error message be improved?  If so, please report an enhancement "
                           "request to PyTorch.)")
    aten.narrow_copy(meta(self), dim, start, length)
    res = self.narrow(dim, start, length).clone(memory_format=torch.contiguous_format)
    return res if out is None else _into(out, res)


native("aten::narrow_copy")(lambda self, dim, start, length: _narrow_copy(self, dim, start, length))
native("aten::narrow_copy.out")(lambda self, dim, start, length, *, out: _narrow_copy(self, dim, start, length, out))


# --------------------------------------------------------------------- nonzero_static

def _nonzero_static(self, size, fill_value=-1, out=None):
    _real(self)
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    nz = index_ops._nonzero(self)
    n = nz.shape[0]
    if n >= size:
        res = nz[:size].clone() if n > size else nz
    else:
        pad = torch.full((size - n, self.dim()), fill_value, dtype=torch.int64, device=self.device)
        res = torch.cat([nz, pad], 0) if n else pad
    return res if out is None else _into(out, res)


native("aten::nonzero_static")(lambda self, *, size, fill_value=-1: _nonzero_static(self, size, fill_value))
native("aten::nonzero_static.out")(lambda self, *, size, fill_value=-1, out:
                                   _nonzero_static(self, size, fill_value, out))

