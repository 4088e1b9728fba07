"""Native data movement: copies between host and device (any strides and dtypes), fills,
and reading a scalar back to the host."""
from __future__ import annotations

import torch

from .. import _native
from . import int64_support
from .registry import native

_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_MAX_DIMS = 64  # capi/main.go maxDims


@native("aten::_copy_from")
def copy_from(self: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    src = self
    if dst.dtype == torch.int64:
        int64_support.check_host_to_device(src, dst)
    if src.shape != dst.shape:
        src = src.expand(dst.shape)  # copy_ broadcasts src into dst
    if dst.numel():
        if dst.dim() > _MAX_DIMS and dst.is_contiguous() and src.is_contiguous():
            dst_, src_ = dst.view(-1), src.reshape(-1)  # the core takes up to 64 dims
        else:
            dst_, src_ = dst, src
        _native.run("copy", (dst_, src_))
    return dst


@native("aten::_copy_from_and_resize")
def copy_from_and_resize(self: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    if dst.shape != self.shape:
        dst.resize_(self.shape)
    return copy_from(self, dst)


def fill_value(t: torch.Tensor, value) -> None:
    if t.numel() == 0:
        return
    if isinstance(value, torch.Tensor):
        value = value.item()
    if isinstance(value, complex):
        raise RuntimeError("Complex datatype is not supported on HPU device.")
    if isinstance(value, bool) or (isinstance(value, int) and t.dtype not in _FLOATS):
        _native.run("fill", (t,), (1, int(value)), (0.0,))
    elif isinstance(value, int):
        _native.run("fill", (t,), (1, value), (float(value),))
    else:
        _native.run("fill", (t,), (0, 0), (float(value),))


@native("aten::fill_.Scalar", "aten::fill_.Tensor")
def fill_(self: torch.Tensor, value) -> torch.Tensor:
    if isinstance(value, torch.Tensor) and value.dim() != 0:
        raise RuntimeError(
            f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions.")
    fill_value(self, value)
    return self


@native("aten::zero_")
def zero_(self: torch.Tensor) -> torch.Tensor:
    fill_value(self, 0)
    return self


@native("aten::eye.out", "aten::eye.m_out")
def eye_out(n, m=None, *, out: torch.Tensor) -> torch.Tensor:
    """torch.eye: zeros with ones on the diagonal, two fills (the diagonal is a strided view)."""
    m = n if m is None else m
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    if tuple(out.shape) != (n, m):
        out.resize_((n, m))
    fill_value(out, 0)
    fill_value(out.diagonal(), 1)
    return out


@native("aten::_local_scalar_dense")
def local_scalar_dense(self: torch.Tensor):
    if self.numel() != 1:
        raise RuntimeError(
            f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
    host = torch.empty((), dtype=self.dtype)
    _native.run("copy", (host, self.reshape(())))
    return host.item()
