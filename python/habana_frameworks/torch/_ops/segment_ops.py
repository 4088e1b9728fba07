"""torch.segment_reduce and its backward on the native kernels (kernels/segment_reduce.go):
sum/mean/max/min/prod over segments given by lengths or offsets, along any axis, with or
without an initial value, unsafe or checked like torch. Data is viewed as [outer, L, inner];
lengths become offsets by a native cumulative sum."""
from __future__ import annotations

import math

import torch

from .. import _native
from .registry import NotNative, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_REDUCE = {"max": 0, "mean": 1, "min": 2, "sum": 3, "prod": 4}
_INDEX = (torch.int64, torch.int32)


def _offsets(data, lengths, offsets, axis):
    """(offsets [outer, S+1], outer, S) for the segments along axis, or NotNative for an
    argument combination torch's CPU kernel should judge (and raise on)."""
    seg = lengths if lengths is not None else offsets
    if seg is None or seg.dtype not in _INDEX or seg.device != data.device:
        raise NotNative
    if seg.dim() < 1 or data.dim() < seg.dim() or axis != seg.dim() - 1 or list(seg.shape[:-1]) != list(data.shape[:axis]):
        raise NotNative
    outer = math.prod(data.shape[:axis])
    if lengths is not None:
        s = lengths.shape[-1]
        l2 = lengths.reshape(outer, s)
        off = torch.zeros(outer, s + 1, dtype=lengths.dtype, device=data.device)
        if s:
            off[:, 1:].copy_(l2.cumsum(-1))
        return off, outer, s
    if offsets.shape[-1] < 1:
        raise NotNative
    return offsets.reshape(outer, offsets.shape[-1]), outer, offsets.shape[-1] - 1


def _check_lengths(data, lengths, axis):
    """torch's checks of lengths when !unsafe, with its messages."""
    if lengths.numel() and bool((lengths.min() < 0).item()):
        raise RuntimeError("lengths contains negative value!")
    if lengths.numel() and not bool((lengths.sum(-1) == data.shape[axis]).all().item()):
        raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                           "data.size(lengths.dim()-1) when !unsafe.")


def _init(initial):
    return (1, float(initial)) if initial is not None else (0, 0.0)


@native("aten::segment_reduce")
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False,
                   initial=None):
    if indices is not None or reduce not in _REDUCE or data.dtype not in _FLOATS or data.dim() == 0:
        raise NotNative
    axis = axis + data.dim() if axis < 0 else axis
    off, outer, s = _offsets(data, lengths, offsets, axis)
    if lengths is not None and not unsafe:
        _check_lengths(data, lengths, axis)
    inner = math.prod(data.shape[axis + 1:])
    out = torch.empty(list(data.shape[:axis]) + [s] + list(data.shape[axis + 1:]), dtype=data.dtype,
                      device=data.device)
    if out.numel():
        has, init = _init(initial)
        _native.run("segment_reduce", [out.view(outer, s, inner), data.reshape(outer, data.shape[axis], inner), off],
                    [_REDUCE[reduce], has], [init])
    return out


@native("aten::_segment_reduce_backward")
def segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0, initial=None):
    if reduce not in _REDUCE or data.dtype not in _FLOATS or data.dim() == 0:
        raise NotNative
    if grad.dtype != data.dtype or output.dtype != data.dtype:
        raise NotNative
    axis = axis + data.dim() if axis < 0 else axis
    off, outer, s = _offsets(data, lengths, offsets, axis)
    inner = math.prod(data.shape[axis + 1:])
    if list(grad.shape) != list(output.shape) or grad.numel() != outer * s * inner:
        raise NotNative
    gin = torch.zeros(data.shape, dtype=data.dtype, device=data.device)
    if gin.numel() and grad.numel():
        has, init = _init(initial)
        _native.run("segment_reduce_bwd", [gin.view(outer, data.shape[axis], inner), grad.reshape(outer, s, inner),
                                           output.reshape(outer, s, inner), data.reshape(outer, data.shape[axis], inner),
                                           off], [_REDUCE[reduce], has], [init])
    return gin
