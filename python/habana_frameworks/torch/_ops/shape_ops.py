"""flip and roll as compositions of native kernels (index_select with a reversed arange,
cat of two narrowed slices): no data goes to the host. Malformed arguments raise
NotNative, so torch's CPU kernel raises its own error."""
from __future__ import annotations

import torch

from .registry import native, NotNative


def _dim(d: int, nd: int) -> int:
    if not -max(nd, 1) <= d < max(nd, 1):
        raise NotNative
    return d % max(nd, 1)


def _flip(self, dims):
    if self.is_complex() or self.dim() == 0:
        raise NotNative
    ds = [_dim(d, self.dim()) for d in dims]
    if len(set(ds)) != len(ds):
        raise NotNative
    out = self
    for d in ds:
        n = self.shape[d]
        if n > 1:
            out = out.index_select(d, torch.arange(n - 1, -1, -1, device=self.device))
    return out.clone() if out is self else out


@native("aten::flip")
def flip(self, dims):
    return _flip(self, dims)


@native("aten::flip.out")
def flip_out(self, dims, *, out):
    r = _flip(self, dims)
    return out.resize_(r.shape).copy_(r)


def _roll(self, shifts, dims=()):
    if self.is_complex():
        raise NotNative
    shifts, dims = list(shifts), list(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if not dims and len(shifts) == 1:
        return _roll(self.reshape(-1), shifts, [0]).view(self.shape)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    if self.dim() == 0:
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    for d in dims:
        if not -self.dim() <= d < self.dim():
            raise IndexError(f"Dimension out of range (expected to be in range of [{-self.dim()}, "
                             f"{self.dim() - 1}], but got {d})")
    out = self
    for s, d in zip(shifts, dims):
        d = _dim(d, self.dim())
        n = self.shape[d]
        if n == 0:
            continue
        s %= n
        if s:
            out = torch.cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out.clone() if out is self else out


@native("aten::roll")
def roll(self, shifts, dims=()):
    return _roll(self, shifts, dims)


@native("aten::roll.out")
def roll_out(self, shifts, dims=(), *, out):
    r = _roll(self, shifts, dims)
    return out.resize_(r.shape).copy_(r)
