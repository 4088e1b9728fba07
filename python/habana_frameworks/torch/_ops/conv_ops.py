"""Every convolution torch routes to the hpu device: 1-D, 2-D and 3-D, plain and transposed,
any groups/stride/padding/dilation/output_padding, floating and integer dtypes, forward and
backward, all on the native 2-D kernels (kernels/conv*.go, kernels/conv_int.go).

- 1-D runs as 2-D with H = 1.
- 3-D unfolds the depth axis into channels (the depth part of im2col): each output depth
  slice is a 2-D convolution of the KD input depth slices it covers, stacked as channels
  [C*KD] against the weight viewed as [O, Cg*KD, KH, KW]; the batch of those 2-D problems
  is [N*OD]. The input gradient folds back with one strided add per kernel depth offset.
- A transposed convolution is the input gradient of the plain convolution whose input has
  the transposed output's shape (and its backward is the plain forward plus a weight
  gradient with the roles of input and output gradient swapped).
- Integer dtypes (op_db runs int64) take exact int64 direct loops (kernels/conv_int.go).

Plain 1-D/2-D floating convolutions keep the lowering of nn_ops.py (one kernel call); this
module only takes over what that one hands back. No data goes to the host.
"""
from __future__ import annotations

import torch

from .. import _native
from .linalg import meta_of
from .registry import NotNative, _NATIVE, _resolve, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)

_prev_conv = _NATIVE.get(_resolve("aten::convolution_overrideable"))
_prev_conv_bwd = _NATIVE.get(_resolve("aten::convolution_backward_overrideable"))


def _is_int(t: torch.Tensor) -> bool:
    return t.dtype in _INTS


def _served(*ts) -> bool:
    """All present tensors share one dtype the kernels take."""
    ts = [t for t in ts if t is not None]
    d = ts[0].dtype
    return all(t.dtype == d for t in ts) and (d in _FLOATS or d in _INTS)


def _expand(v, nd: int) -> list[int]:
    v = list(v)
    return v * nd if len(v) == 1 else v


def _params2(nd: int, stride, padding, dilation, groups) -> list[int]:
    """The 7 integer attributes of the 2-D kernels for a 1-D or 2-D problem."""
    if nd == 1:
        return [1, stride[0], 0, padding[0], 1, dilation[0], groups]
    return list(stride) + list(padding) + list(dilation) + [groups]


def _as4(t: torch.Tensor, nd: int) -> torch.Tensor:
    return t.unsqueeze(2) if nd == 1 else t


# ------------------------------------------------------------------- 1-D / 2-D primitives

def _fwd2(x, w, bias, nd, s, p, d, groups, out_shape) -> torch.Tensor:
    y = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    if x.numel() == 0 or w.numel() == 0:  # no input channels: the bias alone
        y.zero_()
        if bias is not None:
            y.add_(bias.reshape([1, -1] + [1] * (y.dim() - 2)))
        return y
    name = "conv2d_int_fwd" if _is_int(x) else "conv2d_fwd"
    ts = [_as4(y, nd), _as4(x, nd), _as4(w, nd)] + ([bias] if bias is not None else [])
    _native.run(name, ts, _params2(nd, s, p, d, groups))
    return y


def _acc(dtype: torch.dtype) -> torch.dtype:
    """Where partial results are summed: half-precision ones in float32, rounded once at the
    end as torch's CPU kernels do."""
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


def _grad_input2(gy, w, nd, s, p, d, groups, in_shape, dtype=None) -> torch.Tensor:
    gx = torch.empty(in_shape, dtype=dtype or gy.dtype, device=gy.device)
    if gx.numel() == 0:
        return gx
    if gy.numel() == 0 or w.numel() == 0:
        return gx.zero_()
    ints = _params2(nd, s, p, d, groups)
    if _is_int(gy):
        _native.run("conv2d_int_bwd_input", [_as4(gx, nd), _as4(gy, nd), _as4(w, nd)], ints)
    else:
        # the input operand only gives the shape here (mask 1: input gradient alone)
        _native.run("conv2d_bwd", [_as4(gy, nd), _as4(gx, nd), _as4(w, nd), _as4(gx, nd)], ints + [1])
    return gx


def _grad_weight2(gy, x, nd, s, p, d, groups, w_shape) -> torch.Tensor:
    if _is_int(gy):
        raise NotNative  # integer convolutions are not differentiable
    gw = torch.empty(w_shape, dtype=gy.dtype, device=gy.device)
    if gw.numel() == 0:
        return gw
    if gy.numel() == 0 or x.numel() == 0:
        return gw.zero_()
    # the weight operand only gives the shape here (mask 2: weight gradient alone)
    _native.run("conv2d_bwd", [_as4(gy, nd), _as4(x, nd), _as4(gw, nd), _as4(gw, nd)],
                _params2(nd, s, p, d, groups) + [2])
    return gw


# -------------------------------------------------------------- 3-D by depth unfolding

def _out_len(i, k, s, p, d) -> int:
    return (i + 2 * p - d * (k - 1) - 1) // s + 1


def _unfold_depth(x, kd, sd, pd, dd, od) -> torch.Tensor:
    """[N, C, D, H, W] -> [N*OD, C*KD, H, W]: the KD zero-padded depth slices each output
    depth reads, as channels (c-major, so groups stay contiguous channel blocks)."""
    n, c, _, h, w = x.shape
    if pd:
        x = aten.constant_pad_nd(x, [0, 0, 0, 0, pd, pd], 0)
    sn, sc, sdd, sh, sw = x.stride()
    v = x.as_strided([n, od, c, kd, h, w], [sn, sd * sdd, sc, dd * sdd, sh, sw], x.storage_offset())
    return v.reshape(n * od, c * kd, h, w)


def _fold_depth(gu, n, c, d, kd, sd, pd, dd, od) -> torch.Tensor:
    """The adjoint of _unfold_depth: [N*OD, C*KD, H, W] -> [N, C, D, H, W], summing the
    slices that read the same input depth."""
    h, w = gu.shape[2], gu.shape[3]
    g6 = gu.view(n, od, c, kd, h, w)
    gp = torch.zeros([n, c, d + 2 * pd, h, w], dtype=gu.dtype, device=gu.device)
    for k in range(kd):
        dst = gp[:, :, k * dd: k * dd + sd * (od - 1) + 1: sd]
        dst.add_(g6[:, :, :, k].permute(0, 2, 1, 3, 4))
    return gp[:, :, pd: pd + d] if pd else gp


def _geom3(in_shape, w_shape, s, p, d):
    od = _out_len(in_shape[2], w_shape[2], s[0], p[0], d[0])
    return max(od, 0)


def _fwd3(x, w, bias, s, p, d, groups, out_shape) -> torch.Tensor:
    n, o = out_shape[0], out_shape[1]
    od, oh, ow = out_shape[2:]
    if n * o * od * oh * ow == 0 or x.numel() == 0 or w.numel() == 0:
        return _fwd2(x, w, bias, 2, s[1:], p[1:], d[1:], groups, out_shape)  # empty or bias only
    kd = w.shape[2]
    xu = _unfold_depth(x, kd, s[0], p[0], d[0], od)
    w2 = w.reshape(o, w.shape[1] * kd, w.shape[3], w.shape[4])
    y2 = _fwd2(xu, w2, bias, 2, s[1:], p[1:], d[1:], groups, [n * od, o, oh, ow])
    return y2.view(n, od, o, oh, ow).permute(0, 2, 1, 3, 4)


def _grad_input3(gy, w, s, p, d, groups, in_shape, dtype=None) -> torch.Tensor:
    n, c, dd_, h, wd = in_shape
    o, od, oh, ow = gy.shape[1], gy.shape[2], gy.shape[3], gy.shape[4]
    if gy.numel() == 0 or w.numel() == 0 or n * c * dd_ * h * wd == 0:
        return torch.zeros(in_shape, dtype=dtype or gy.dtype, device=gy.device)
    kd = w.shape[2]
    w2 = w.reshape(o, w.shape[1] * kd, w.shape[3], w.shape[4])
    gy2 = gy.permute(0, 2, 1, 3, 4).reshape(n * od, o, oh, ow)
    # the depth slices are summed in the accumulation dtype, then rounded once
    gu = _grad_input2(gy2, w2, 2, s[1:], p[1:], d[1:], groups, [n * od, c * kd, h, wd], _acc(gy.dtype))
    gx = _fold_depth(gu, n, c, dd_, kd, s[0], p[0], d[0], od)
    return gx.to(dtype or gy.dtype)


def _grad_weight3(gy, x, s, p, d, groups, w_shape) -> torch.Tensor:
    if gy.numel() == 0 or x.numel() == 0:
        return torch.zeros(w_shape, dtype=gy.dtype, device=gy.device)
    n, o, od, oh, ow = gy.shape
    kd = w_shape[2]
    xu = _unfold_depth(x, kd, s[0], p[0], d[0], od)
    gy2 = gy.permute(0, 2, 1, 3, 4).reshape(n * od, o, oh, ow)
    gw2 = _grad_weight2(gy2, xu, 2, s[1:], p[1:], d[1:], groups,
                        [o, w_shape[1] * kd, w_shape[3], w_shape[4]])
    return gw2.view(w_shape)


# ------------------------------------------------------------------ any dimensionality

def _fwd(x, w, bias, nd, s, p, d, groups, out_shape):
    if nd == 3:
        return _fwd3(x, w, bias, s, p, d, groups, out_shape)
    return _fwd2(x, w, bias, nd, s, p, d, groups, out_shape)


def _grad_input(gy, w, nd, s, p, d, groups, in_shape, dtype=None):
    if nd == 3:
        return _grad_input3(gy, w, s, p, d, groups, in_shape, dtype)
    return _grad_input2(gy, w, nd, s, p, d, groups, in_shape, dtype)


def _grad_weight(gy, x, nd, s, p, d, groups, w_shape):
    if nd == 3:
        return _grad_weight3(gy, x, s, p, d, groups, w_shape)
    return _grad_weight2(gy, x, nd, s, p, d, groups, w_shape)


def _extra(s, output_padding) -> list[int]:
    """Output positions past the input's own that the plain convolution inverted by a transposed
    one has, per spatial axis: torch allows output_padding up to max(stride, dilation) - 1, and
    output_padding // stride whole strides of it make the plain convolution over the transposed
    output one position longer each (positions no input element maps to)."""
    return [op // si for si, op in zip(s, output_padding)]


def _pad_end(t, extra):
    """t zero-padded at the end of each spatial axis by extra."""
    if not any(extra):
        return t
    pads = []
    for e in reversed(extra):
        pads += [0, e]
    return aten.constant_pad_nd(t, pads, 0)


def _narrow(t, shape):
    for i in range(2, t.dim()):
        if t.shape[i] != shape[i]:
            t = t.narrow(i, 0, shape[i])
    return t


def _like(y: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """y laid out with the strides torch's own kernel gives the result (meta twin m)."""
    if y.stride() == m.stride():
        return y
    out = torch.empty_strided(m.shape, m.stride(), dtype=y.dtype, device=y.device)
    return out.copy_(y) if y.numel() else out


def _plain_2d(input, weight, transposed) -> bool:
    return not transposed and input.dim() in (3, 4) and input.dtype in _FLOATS


@native("aten::convolution_overrideable")
def convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed,
                             output_padding, groups):
    if _plain_2d(input, weight, transposed) and _prev_conv is not None:
        return _prev_conv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    m = meta_of(aten.convolution.default, input, weight, bias, stride, padding, dilation, transposed,
                output_padding, groups)
    nd = input.dim() - 2
    if nd not in (1, 2, 3) or not _served(input, weight, bias):
        raise NotNative
    s, p, d = _expand(stride, nd), _expand(padding, nd), _expand(dilation, nd)
    if not transposed:
        return _like(_fwd(input, weight, bias, nd, s, p, d, groups, list(m.shape)), m)
    if any(o >= si and o >= di for o, si, di in zip(_expand(output_padding, nd), s, d)):
        raise NotNative  # torch's CPU kernel raises its own message (the meta kernel does not check)
    # conv^T(x) is the input gradient of the plain convolution over an input of the
    # transposed output's shape, for grad_output x (zero-extended where that one is longer)
    extra = _extra(s, _expand(output_padding, nd))
    acc = _acc(input.dtype) if bias is not None else input.dtype
    y = _grad_input(_pad_end(input, extra), weight, nd, s, p, d, groups, list(m.shape), acc)
    if bias is not None:  # added before the one rounding, as torch's CPU kernels do
        y.add_(bias.reshape([1, -1] + [1] * nd))  # y is this call's own buffer
        y = y.to(input.dtype)
    return _like(y, m)


@native("aten::convolution_backward_overrideable")
def convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation,
                                      transposed, output_padding, groups, output_mask):
    if _plain_2d(input, weight, transposed) and _prev_conv_bwd is not None:
        return _prev_conv_bwd(grad_output, input, weight, stride, padding, dilation, transposed,
                              output_padding, groups, output_mask)
    nd = input.dim() - 2
    if nd not in (1, 2, 3) or not _served(grad_output, input, weight) or _is_int(input):
        raise NotNative
    s, p, d = _expand(stride, nd), _expand(padding, nd), _expand(dilation, nd)
    gi = gw = gb = None
    if transposed:
        extra = _extra(s, _expand(output_padding, nd))
        if output_mask[0]:  # d conv^T / dx is the plain convolution of the output gradient
            gi = _fwd(grad_output, weight, None, nd, s, p, d, groups,
                      [input.shape[0], input.shape[1]] + [i + e for i, e in zip(input.shape[2:], extra)])
            gi = _narrow(gi, input.shape)
        if output_mask[1]:  # the plain convolution's weight gradient, input and output swapped
            gw = _grad_weight(_pad_end(input, extra), grad_output, nd, s, p, d, groups, list(weight.shape))
    else:
        if output_mask[0]:
            gi = _grad_input(grad_output, weight, nd, s, p, d, groups, list(input.shape))
        if output_mask[1]:
            gw = _grad_weight(grad_output, input, nd, s, p, d, groups, list(weight.shape))
    if output_mask[2]:
        gb = grad_output.sum([k for k in range(grad_output.dim()) if k != 1])
    if gi is not None and not gi.is_contiguous():
        gi = gi.contiguous()
    return gi, gw, gb
