"""Random ops lowered to Go's Philox4x32-10 generator (kernels/philox.go): uniform_,
normal_ (and the normal.* functional forms), bernoulli_ (float and tensor p), random_,
native_dropout and its backward. torch.rand/randn/randint/bernoulli/dropout on hpu reach
these.

Each call draws a fresh (seed, offset) pair from the hpu generator (a host
torch.Generator, hpu/random.py), so torch.hpu.manual_seed / torch.manual_seed make
results reproducible and get_rng_state / set_rng_state replay them. Values differ from
CPU's (a different generator, as on Gaudi); element i depends only on (seed, offset, i).
"""
from __future__ import annotations

from typing import Callable

import torch

from .. import _native
from ..hpu import random as hpu_random
from .linalg import meta
from .registry import NotNative, native

aten = torch.ops.aten
_CODE = _native.DTYPE_CODE
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


# Set by _recipe.capture while it records: told of each draw, so a recipe draws the same.
capture_hook: Callable[[torch.Generator], None] | None = None


def _draw(generator) -> tuple[int, int]:
    """A (seed, offset) pair for one op, advancing the generator."""
    g = generator if generator is not None else hpu_random.default_generators[0]
    if not isinstance(g, torch.Generator) or g.device.type != "cpu":
        raise NotNative
    if capture_hook is not None:
        capture_hook(g)
    s = torch.empty(2, dtype=torch.int64).random_(generator=g)
    return int(s[0]), int(s[1])


def _num(v):
    return v.item() if isinstance(v, torch.Tensor) else v


def _check_target(self):
    if self.dtype not in _CODE:
        raise NotNative


@native("aten::uniform_")
def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    aten.uniform_(meta(self), from_, to)  # torch's argument checks
    if self.dtype not in _FLOATS:
        raise NotNative
    if self.numel():
        seed, off = _draw(generator)
        _native.run("uniform", [self], (seed, off), (float(from_), float(to)))
    return self


@native("aten::normal_")
def normal_(self, mean=0.0, std=1.0, *, generator=None):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    aten.normal_(meta(self), mean, std)
    if self.dtype not in _FLOATS:
        raise NotNative
    if self.numel():
        seed, off = _draw(generator)
        _native.run("normal", [self], (seed, off), (float(mean), float(std)))
    return self


def _normal_out(mean, std, generator, out):
    if out.numel():
        normal_(out, 0.0, 1.0, generator=generator)
        out.mul_(std).add_(mean)
    return out


@native("aten::normal.Tensor_float", "aten::normal.Tensor_float_out")
def normal_tensor_float(mean, std=1.0, *, generator=None, out=None):
    m = aten.normal.Tensor_float(meta(mean), std)
    if m.dtype not in _FLOATS:
        raise NotNative
    res = torch.empty(m.shape, dtype=m.dtype, device=mean.device) if out is None else out
    if out is not None and out.shape != m.shape:
        out.resize_(m.shape)
    return _normal_out(mean, std, generator, res)


@native("aten::normal.float_Tensor", "aten::normal.float_Tensor_out")
def normal_float_tensor(mean, std, *, generator=None, out=None):
    m = aten.normal.float_Tensor(mean, meta(std))
    if m.dtype not in _FLOATS:
        raise NotNative
    res = torch.empty(m.shape, dtype=m.dtype, device=std.device) if out is None else out
    if out is not None and out.shape != m.shape:
        out.resize_(m.shape)
    return _normal_out(mean, std, generator, res)


@native("aten::normal.Tensor_Tensor", "aten::normal.Tensor_Tensor_out")
def normal_tensor_tensor(mean, std, *, generator=None, out=None):
    m = aten.normal.Tensor_Tensor(meta(mean), meta(std))
    if m.dtype not in _FLOATS:
        raise NotNative
    res = torch.empty(m.shape, dtype=m.dtype, device=mean.device) if out is None else out
    if out is not None and out.shape != m.shape:
        out.resize_(m.shape)
    return _normal_out(mean, std, generator, res)


@native("aten::bernoulli_.float")
def bernoulli_float_(self, p=0.5, *, generator=None):
    p = _num(p)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    _check_target(self)
    if self.numel():
        seed, off = _draw(generator)
        _native.run("bernoulli", [self], (seed, off), (float(p),))
    return self


@native("aten::bernoulli_.Tensor")
def bernoulli_tensor_(self, p, *, generator=None):
    aten.bernoulli_.Tensor(meta(self), meta(p))
    _check_target(self)
    if p.dtype not in _FLOATS:
        raise NotNative
    if self.numel():
        pe = p.expand(self.shape)
        if p.device.type != "hpu" and p.dim() != 0:
            raise NotNative
        seed, off = _draw(generator)
        _native.run("bernoulli", [self, pe], (seed, off), (0.0,))
    return self


@native("aten::bernoulli.p")
def bernoulli_p(self, p=0.5, *, generator=None):
    return bernoulli_float_(torch.empty_like(self), p, generator=generator)


@native("aten::bernoulli")
def bernoulli(self, *, generator=None):
    return bernoulli_tensor_(torch.empty_like(self), self, generator=generator)


@native("aten::bernoulli.out")
def bernoulli_out(self, *, generator=None, out):
    if torch._debug_has_internal_overlap(out) == 1:  # CPU's check of the written-to tensor
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers "
                           "to a single memory location. Please clone() the tensor before performing the "
                           "operation.")
    r = bernoulli(self, generator=generator)
    if out.dtype != r.dtype:
        raise NotNative
    if out.shape != r.shape:
        out.resize_(r.shape)
    return out.copy_(r)


_MANTISSA = {torch.float32: 24, torch.float64: 53, torch.bfloat16: 8, torch.float16: 11}


def _random(self, from_, to, generator):
    _check_target(self)
    if self.numel() == 0:
        return self
    seed, off = _draw(generator)
    span = (to - from_) & ((1 << 64) - 1)
    if span >= 1 << 63:
        span -= 1 << 64  # the Go side reads the bits as uint64
    _native.run("random_int", [self], (seed, off, int(from_), span))
    return self


def _default_to(dtype) -> int:
    if dtype in _MANTISSA:
        return (1 << _MANTISSA[dtype]) + 1
    if dtype == torch.bool:
        return 2
    return torch.iinfo(dtype).max + 1


@native("aten::random_.from")
def random_from(self, from_, to=None, *, generator=None):
    if to is None:
        to = _default_to(self.dtype)  # [from, the type's largest random value]
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    return _random(self, from_, to, generator)


@native("aten::random_.to")
def random_to(self, to, *, generator=None):
    if to <= 0:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from=0 >= to={to}")
    return _random(self, 0, to, generator)


@native("aten::random_")
def random_(self, *, generator=None):
    return _random(self, 0, _default_to(self.dtype), generator)


@native("aten::native_dropout")
def native_dropout(input, p, train):
    if input.dtype not in _FLOATS:
        raise NotNative
    if input.numel() == 0:
        return input, torch.empty_like(input)
    if train is None or train:
        if not 0 <= p <= 1:
            raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
        out = torch.empty_like(input)
        mask = torch.empty_like(input, dtype=torch.bool)
        seed, off = _draw(None)
        _native.run("dropout", [out, mask, input], (seed, off), (float(p),))
        return out, mask
    return input.clone(), torch.ones_like(input, dtype=torch.bool)


@native("aten::native_dropout_backward")
def native_dropout_backward(grad_output, mask, scale):
    m = aten.native_dropout_backward(meta(grad_output), meta(mask), scale)
    if grad_output.dtype not in _FLOATS or m.dtype != grad_output.dtype or mask.dtype != torch.bool:
        # integer/bool gradients or masks: CPU's own formula, on native elementwise ops
        return (grad_output * mask) * scale
    gi = torch.empty(m.shape, dtype=m.dtype, device=grad_output.device)
    if gi.numel():
        _native.run("dropout_bwd", [gi, grad_output.expand(m.shape), mask.expand(m.shape)], (), (float(scale),))
    return gi
