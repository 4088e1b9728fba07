"""More neural-network ops lowered to Go: upsampling (nearest, nearest-exact, linear,
bilinear, bicubic, trilinear, antialiased), reflection/replication padding (kernels/resample.go,
one separable resampling kernel: every mode is a per-axis table of taps).

Every kernel takes 5-D [N, C, D, H, W] views with any strides (channels_last, slices,
expanded views), so 1-D, 2-D and 3-D inputs, with or without a batch axis, share one path.
Shapes and argument errors come from the aten op on meta tensors (meta_of), as in
nn_ops.py; outputs keep the memory format torch's CPU kernels give them.
"""
from __future__ import annotations

import re

import torch

from .. import _native
from .linalg import meta_of
from .registry import NotNative, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)

# kernels/resample.go modes
_NEAREST, _NEAREST_EXACT, _LINEAR, _CUBIC, _LINEAR_AA, _CUBIC_AA, _REFLECT, _REPLICATE = range(8)


def _vol(t: torch.Tensor, nsp: int) -> torch.Tensor:
    """The 5-D [N, C, D, H, W] view of a [N?, C, *spatial(nsp)] tensor."""
    if t.dim() == nsp + 1:
        t = t.unsqueeze(0)
    while t.dim() < 5:
        t = t.unsqueeze(2)
    return t


def _like_meta(m: torch.Tensor, device) -> torch.Tensor:
    return torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device=device)


def _into(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    if dst.shape != src.shape:
        dst.resize_(src.shape)
    dst.copy_(src)
    return dst


def _axes(mode: int, ins, outs, align=False, scales=(), pads=()) -> tuple[list[int], list[float]]:
    """resample's attributes for spatial sizes ins -> outs (the last len(ins) axes of D, H, W)."""
    k = len(ins)
    ints = [int(bool(align))]
    floats = []
    for a in range(3):
        j = a - (3 - k)
        if j < 0:
            ints += [_NEAREST, 1, 1, 0]
            floats.append(0.0)
            continue
        ints += [mode, int(ins[j]), int(outs[j]), int(pads[j]) if pads else 0]
        s = scales[j] if scales and j < len(scales) else None
        floats.append(float(s) if s is not None else 0.0)
    return ints, floats


# -------------------------------------------------------------------------------- upsampling

# How torch's CPU kernels compute bfloat16 interpolation: 1 = weights kept in bfloat16 (the
# sums in float32), 2 = everything in bfloat16 arithmetic; others compute in float32.
_BF16_ARITH = {"upsample_bicubic2d": 1, "upsample_trilinear3d": 1}


def _upsample(op, mode: int, nsp: int, has_align: bool):
    rb_op = _BF16_ARITH.get(op._schema.name.split("::")[1], 0)

    def fwd(self, output_size, *rest):
        align = bool(rest[0]) if has_align else False
        scales = rest[1:] if has_align else rest
        m = meta_of(op, self, output_size, *rest)
        if mode not in (_NEAREST, _NEAREST_EXACT) and self.dtype not in _FLOATS:
            raise NotNative  # uint8 interpolation rounds its own way on CPU
        out = _like_meta(m, self.device)
        if out.numel():
            ints, floats = _axes(mode, self.shape[-nsp:], m.shape[-nsp:], align, scales)
            ints.append(rb_op if self.dtype == torch.bfloat16 else 0)
            _native.run("resample", [_vol(out, nsp), _vol(self, nsp)], ints, floats)
        return out
    return fwd


def _upsample_bwd(op, mode: int, nsp: int, has_align: bool):
    def bwd(grad_output, output_size, input_size, *rest):
        align = bool(rest[0]) if has_align else False
        scales = rest[1:] if has_align else rest
        m = meta_of(op, grad_output, output_size, input_size, *rest)
        if grad_output.dtype not in _FLOATS:
            raise NotNative
        gi = torch.empty(m.shape, dtype=m.dtype, device=grad_output.device)
        if gi.numel():
            ints, floats = _axes(mode, gi.shape[-nsp:], grad_output.shape[-nsp:], align, scales)
            _native.run("resample_bwd", [_vol(gi, nsp), _vol(grad_output, nsp)], ints, floats)
        return gi
    return bwd


_UPSAMPLE = {
    # name: (mode, spatial dims, has align_corners)
    "upsample_nearest1d": (_NEAREST, 1, False), "upsample_nearest2d": (_NEAREST, 2, False),
    "upsample_nearest3d": (_NEAREST, 3, False),
    "_upsample_nearest_exact1d": (_NEAREST_EXACT, 1, False),
    "_upsample_nearest_exact2d": (_NEAREST_EXACT, 2, False),
    "_upsample_nearest_exact3d": (_NEAREST_EXACT, 3, False),
    "upsample_linear1d": (_LINEAR, 1, True), "upsample_bilinear2d": (_LINEAR, 2, True),
    "upsample_trilinear3d": (_LINEAR, 3, True), "upsample_bicubic2d": (_CUBIC, 2, True),
    "_upsample_bilinear2d_aa": (_LINEAR_AA, 2, True), "_upsample_bicubic2d_aa": (_CUBIC_AA, 2, True),
}


def _register_upsample() -> None:
    for name, (mode, nsp, has_align) in _UPSAMPLE.items():
        op = getattr(aten, name).default
        fwd = _upsample(op, mode, nsp, has_align)
        native(f"aten::{name}")(fwd)
        native(f"aten::{name}.out")(lambda *a, out, _f=fwd: _into(out, _f(*a)))
        bop = getattr(aten, name + "_backward").default
        bwd = _upsample_bwd(bop, mode, nsp, has_align)
        native(f"aten::{name}_backward")(bwd)
        native(f"aten::{name}_backward.grad_input")(lambda *a, grad_input, _f=bwd: _into(grad_input, _f(*a)))


_register_upsample()


# ----------------------------------------------------------------------------------- padding

def _pad_axes(mode: int, nsp: int, ins, padding):
    # padding lists (left, right) pairs from the last axis backwards
    pads = [int(padding[2 * (nsp - 1 - j)]) for j in range(nsp)]
    outs = [int(ins[j]) + pads[j] + int(padding[2 * (nsp - 1 - j) + 1]) for j in range(nsp)]
    return _axes(mode, ins, outs, pads=pads)


def _pad(op, mode: int, nsp: int):
    def fwd(self, padding):
        m = meta_of(op, self, padding)
        out = _like_meta(m, self.device)
        if out.numel():
            ints, floats = _pad_axes(mode, nsp, self.shape[-nsp:], padding)
            _native.run("resample", [_vol(out, nsp), _vol(self, nsp)], ints, floats)
        return out
    return fwd


def _pad_bwd(op, mode: int, nsp: int):
    def bwd(grad_output, self, padding):
        m = meta_of(op, grad_output, self, padding)
        if grad_output.dtype not in _FLOATS:
            raise NotNative
        gi = torch.empty(m.shape, dtype=m.dtype, device=grad_output.device)
        if gi.numel():
            ints, floats = _pad_axes(mode, nsp, self.shape[-nsp:], padding)
            ints.append(int(grad_output.dtype == torch.bfloat16))  # CPU adds into a bf16 gradient
            _native.run("resample_bwd", [_vol(gi, nsp), _vol(grad_output, nsp)], ints, floats)
        return gi
    return bwd


def _register_pads() -> None:
    for kind, mode in (("reflection", _REFLECT), ("replication", _REPLICATE)):
        for nsp in (1, 2, 3):
            name = f"{kind}_pad{nsp}d"
            fwd = _pad(getattr(aten, name).default, mode, nsp)
            native(f"aten::{name}")(fwd)
            native(f"aten::{name}.out")(lambda self, padding, *, out, _f=fwd: _into(out, _f(self, padding)))
            bwd = _pad_bwd(getattr(aten, name + "_backward").default, mode, nsp)
            native(f"aten::{name}_backward")(bwd)
            native(f"aten::{name}_backward.grad_input")(
                lambda g, self, padding, *, grad_input, _f=bwd: _into(grad_input, _f(g, self, padding)))


_register_pads()


# ----------------------------------------------------------------------------------- pooling
# kernels/pool3d.go: 1-D/2-D/3-D windows over 5-D volumes, flat (d*H + h)*W + w indices.

def _tup(v, n: int, default=None) -> list[int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return list(default) if default is not None else None
    if isinstance(v, int):
        return [v] * n
    v = [int(x) for x in v]
    return v * n if len(v) == 1 else v


def _pool_ints(nsp: int, k, s, p, d) -> list[int]:
    """{k, s, p, dil} for axes D, H, W; absent leading axes are single-element windows."""
    ints = []
    for a in range(3):
        j = a - (3 - nsp)
        ints += [1, 1, 0, 1] if j < 0 else [k[j], s[j], p[j], d[j]]
    return ints


def _not_bool(*ts) -> None:
    for t in ts:
        if t.dtype not in _native.DTYPE_CODE or t.dtype == torch.bool:
            raise NotNative


def _floats(*ts) -> None:
    for t in ts:
        if t is not None and t.dtype not in _FLOATS:
            raise NotNative


def _max_pool(nsp: int):
    op = getattr(aten, f"max_pool{nsp}d_with_indices").default

    def fwd(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        mo, mi = meta_of(op, self, kernel_size, stride, padding, dilation, ceil_mode)
        _not_bool(self)
        k = _tup(kernel_size, nsp)
        ints = [0] + _pool_ints(nsp, k, _tup(stride, nsp, k), _tup(padding, nsp), _tup(dilation, nsp))
        out, idx = _like_meta(mo, self.device), _like_meta(mi, self.device)
        if out.numel():
            _native.run("pool_max", [_vol(out, nsp), _vol(idx, nsp), _vol(self, nsp)], ints)
        return out, idx
    return fwd


def _max_pool_bwd(op, nsp: int):
    def bwd(grad_output, self, *rest):
        indices = rest[-1]
        m = meta_of(op, grad_output, self, *rest)
        _floats(grad_output, self)
        gi = torch.empty(m.shape, dtype=m.dtype, device=self.device)
        if gi.numel():
            _native.run("pool_max_bwd", [_vol(gi, nsp), _vol(grad_output, nsp), _vol(indices, nsp)])
        return gi
    return bwd


def _adaptive_max(nsp: int):
    op = getattr(aten, f"adaptive_max_pool{nsp}d").default

    def fwd(self, output_size):
        mo, mi = meta_of(op, self, output_size)
        _not_bool(self)
        out, idx = _like_meta(mo, self.device), _like_meta(mi, self.device)
        if out.numel():
            _native.run("pool_max", [_vol(out, nsp), _vol(idx, nsp), _vol(self, nsp)], [1] + [1, 1, 0, 1] * 3)
        return out, idx
    return fwd


def _fractional(nsp: int):
    op = getattr(aten, f"fractional_max_pool{nsp}d").default

    def fwd(self, kernel_size, output_size, random_samples):
        mo, mi = meta_of(op, self, kernel_size, output_size, random_samples)
        _floats(self, random_samples)
        out, idx = _like_meta(mo, self.device), _like_meta(mi, self.device)
        if out.numel():
            k = [1] * (3 - nsp) + _tup(kernel_size, nsp)
            rs = random_samples if random_samples.dim() == 3 else random_samples.unsqueeze(0)
            _native.run("pool_max_frac", [_vol(out, nsp), _vol(idx, nsp), _vol(self, nsp), rs], [nsp] + k)
        return out, idx
    return fwd


def _out2(fn):
    def f(*args, out=None, indices, output=None):
        o, i = fn(*args)
        return _into(out if out is not None else output, o), _into(indices, i)
    return f


def _register_max_pools() -> None:
    for nsp, name, fwd in ((3, "max_pool3d_with_indices", _max_pool(3)),
                           (2, "adaptive_max_pool2d", _adaptive_max(2)),
                           (3, "adaptive_max_pool3d", _adaptive_max(3)),
                           (2, "fractional_max_pool2d", _fractional(2)),
                           (3, "fractional_max_pool3d", _fractional(3))):
        native(f"aten::{name}")(fwd)
        native(f"aten::{name}.output" if name.startswith("fractional") else f"aten::{name}.out")(_out2(fwd))
        bwd = _max_pool_bwd(getattr(aten, name + "_backward").default, nsp)
        native(f"aten::{name}_backward")(bwd)
        native(f"aten::{name}_backward.grad_input")(lambda *a, grad_input, _f=bwd: _into(grad_input, _f(*a)))


_register_max_pools()


def _int_fallthrough(name: str, ours):
    """nn_ops.py serves the float dtypes of this op; other dtypes come here."""
    from . import registry
    op = registry._resolve(name)
    prev = registry._NATIVE.get(op)

    def fn(self, *args, **kwargs):
        if prev is not None and self.dtype in _FLOATS:
            return prev(self, *args, **kwargs)
        return ours(self, *args, **kwargs)
    native(name)(fn)


_max2 = _max_pool(2)
_int_fallthrough("aten::max_pool2d_with_indices", _max2)
_int_fallthrough("aten::max_pool2d_with_indices.out", _out2(_max2))


def _avg_pool(nsp: int):
    op = getattr(aten, f"avg_pool{nsp}d").default

    def fwd(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
            divisor_override=None):
        m = meta_of(op, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        _not_bool(self)
        out = _like_meta(m, self.device)
        if out.numel():
            k = _tup(kernel_size, nsp)
            ints = [0] + _pool_ints(nsp, k, _tup(stride, nsp, k), _tup(padding, nsp), [1] * nsp) + [
                int(bool(count_include_pad)), int(divisor_override or 0)]
            _native.run("pool_avg", [_vol(out, nsp), _vol(self, nsp)], ints)
        return out
    return fwd


def _avg_pool3d_bwd(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override):
    m = meta_of(aten.avg_pool3d_backward.default, grad_output, self, kernel_size, stride, padding,
                ceil_mode, count_include_pad, divisor_override)
    _floats(grad_output, self)
    gi = torch.empty(m.shape, dtype=m.dtype, device=self.device)
    if gi.numel():
        k = _tup(kernel_size, 3)
        ints = [0] + _pool_ints(3, k, _tup(stride, 3, k), _tup(padding, 3), [1] * 3) + [
            int(bool(count_include_pad)), int(divisor_override or 0)]
        _native.run("pool_avg_bwd", [_vol(gi, 3), _vol(grad_output, 3)], ints)
    return gi


_avg3 = _avg_pool(3)
native("aten::avg_pool3d")(_avg3)
native("aten::avg_pool3d.out")(lambda *a, out: _into(out, _avg3(*a)))
native("aten::avg_pool3d_backward")(_avg_pool3d_bwd)
native("aten::avg_pool3d_backward.grad_input")(lambda *a, grad_input: _into(grad_input, _avg_pool3d_bwd(*a)))
_avg2 = _avg_pool(2)
_int_fallthrough("aten::avg_pool2d", _avg2)
_int_fallthrough("aten::avg_pool2d.out", lambda *a, out: _into(out, _avg2(*a)))


def _adaptive_avg3d(self, output_size):
    m = meta_of(aten._adaptive_avg_pool3d.default, self, output_size)
    _floats(self)
    out = _like_meta(m, self.device)
    if out.numel():
        rb = int(self.dtype == torch.bfloat16)  # CPU sums and divides bfloat16 in bfloat16
        _native.run("pool_avg", [_vol(out, 3), _vol(self, 3)], [1] + [1, 1, 0, 1] * 3 + [1, 0, rb])
    return out


def _adaptive_avg3d_bwd(grad_output, self):
    m = meta_of(aten._adaptive_avg_pool3d_backward.default, grad_output, self)
    _floats(grad_output, self)
    gi = torch.empty(m.shape, dtype=m.dtype, device=self.device)
    if gi.numel():
        rb = int(grad_output.dtype == torch.bfloat16)
        _native.run("pool_avg_bwd", [_vol(gi, 3), _vol(grad_output, 3)], [1] + [1, 1, 0, 1] * 3 + [1, 0, rb])
    return gi


native("aten::_adaptive_avg_pool3d")(_adaptive_avg3d)
native("aten::_adaptive_avg_pool3d.out")(lambda self, output_size, *, out: _into(out, _adaptive_avg3d(self, output_size)))
native("aten::_adaptive_avg_pool3d_backward")(_adaptive_avg3d_bwd)
native("aten::_adaptive_avg_pool3d_backward.out")(
    lambda g, self, *, out: _into(out, _adaptive_avg3d_bwd(g, self)))


def _max_unpool(nsp: int):
    op = getattr(aten, f"max_unpool{nsp}d").default

    def fwd(self, indices, output_size, *rest):
        m = meta_of(op, self, indices, output_size, *rest)
        if indices.device.type != "hpu":
            raise NotNative
        out = torch.empty(m.shape, dtype=m.dtype, device=self.device)
        if out.numel():
            try:
                _native.run("max_unpool", [_vol(out, nsp), _vol(self, nsp), _vol(indices, nsp)])
            except _native.NativeError as e:
                if "invalid max index" not in str(e):
                    raise
                bad = re.search(r"invalid max index: (-?\d+)", str(e))
                # torch's message, its missing closing parenthesis included
                raise RuntimeError(f"Found an invalid max index: {bad.group(1) if bad else '?'} (output "
                                   f"volumes are of size {'x'.join(str(int(s)) for s in m.shape[-nsp:])}") from None
        return out
    return fwd


for _nsp in (2, 3):
    _unpool = _max_unpool(_nsp)
    native(f"aten::max_unpool{_nsp}d")(_unpool)
    native(f"aten::max_unpool{_nsp}d.out")(lambda *a, out, _f=_unpool: _into(out, _f(*a)))
