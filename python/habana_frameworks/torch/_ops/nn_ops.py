"""Neural-network ops lowered to Go: convolution (im2col + GEMM), pooling, batch/layer
norm, embedding.

Shapes, dtypes and argument errors come from running the same aten op on meta tensors
(memoized per shape, meta_of), so they match torch's own checks; the Go kernels then fill
hpu memory in place.
"""
from __future__ import annotations

import torch

from .. import _native
from .linalg import meta_of
from .registry import NotNative, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def _floats(*ts) -> None:
    for t in ts:
        if t is not None and t.dtype not in _FLOATS:
            raise NotNative


def _pair(v, default=None):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    return v * 2 if len(v) == 1 else v


def _empty(m: torch.Tensor, device) -> torch.Tensor:
    return torch.empty(m.shape, dtype=m.dtype, device=device)


def _mask(*ts) -> tuple[list, int]:
    present, mask = [], 0
    for i, t in enumerate(ts):
        if t is not None:
            present.append(t)
            mask |= 1 << i
    return present, mask


# ---------------------------------------------------------------------------- convolution

def _conv_args(input, weight, stride, padding, dilation, transposed, groups):
    if transposed or input.dim() not in (3, 4) or weight.dim() != input.dim():
        raise NotNative
    if input.dtype != weight.dtype:
        raise NotNative  # the CPU path raises torch's own dtype error
    stride, padding, dilation = list(stride), list(padding), list(dilation)
    if input.dim() == 3:  # 1-D: run as 2-D with H = 1
        input, weight = input.unsqueeze(2), weight.unsqueeze(2)
        stride, padding, dilation = [1] + stride[-1:], [0] + padding[-1:], [1] + dilation[-1:]
    else:
        stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    return input, weight, stride + padding + dilation + [groups]


@native("aten::convolution_overrideable")
def convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed,
                             output_padding, groups):
    _floats(input, weight, bias)
    m = meta_of(aten.convolution, input, weight, bias, stride, padding, dilation,
                transposed, output_padding, groups)
    x4, w4, ints = _conv_args(input, weight, stride, padding, dilation, transposed, groups)
    out = _empty(m, input.device)
    if bias is not None and bias.dtype != input.dtype:
        raise NotNative
    o4 = out.unsqueeze(2) if input.dim() == 3 else out
    if out.numel():
        _native.run("conv2d_fwd", [o4, x4, w4] + ([bias] if bias is not None else []), ints)
    return out


@native("aten::convolution_backward_overrideable")
def convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation,
                                      transposed, output_padding, groups, output_mask):
    _floats(grad_output, input, weight)
    if grad_output.dtype != input.dtype:
        raise NotNative
    x4, w4, ints = _conv_args(input, weight, stride, padding, dilation, transposed, groups)
    g4 = grad_output.unsqueeze(2) if input.dim() == 3 else grad_output
    gi = torch.empty_like(input, memory_format=torch.contiguous_format) if output_mask[0] else None
    gw = torch.empty_like(weight, memory_format=torch.contiguous_format) if output_mask[1] else None
    gb = torch.empty(weight.shape[0], dtype=weight.dtype, device=weight.device) if output_mask[2] else None
    if input.dim() == 3:
        gi4 = gi.unsqueeze(2) if gi is not None else None
        gw4 = gw.unsqueeze(2) if gw is not None else None
    else:
        gi4, gw4 = gi, gw
    present, mask = _mask(gi4, gw4, gb)
    if present:
        _native.run("conv2d_bwd", [g4, x4, w4] + present, ints + [mask])
    return gi, gw, gb


# -------------------------------------------------------------------------------- pooling

def _into(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """out= semantics: resize dst to src's shape, then copy (native device copy)."""
    if dst.shape != src.shape:
        dst.resize_(src.shape)
    dst.copy_(src)
    return dst


def _fits(dst: torch.Tensor, m: torch.Tensor, *srcs: torch.Tensor) -> bool:
    """dst can take the result m in place: same shape and dtype, and no storage shared with
    an input. The functional forms of these ops reach the out= overload through a composite
    kernel that allocates dst, so filling it directly saves a copy of the whole result."""
    if dst.shape != m.shape or dst.dtype != m.dtype or dst.device.type != "hpu":
        return False
    p = dst.untyped_storage().data_ptr()
    return all(s.untyped_storage().data_ptr() != p for s in srcs)


@native("aten::max_pool2d_with_indices.out")
def max_pool2d_with_indices_out(self, kernel_size, stride=(), padding=0, dilation=1,
                                ceil_mode=False, *, out, indices):
    out_m, idx_m = meta_of(aten.max_pool2d_with_indices, self, kernel_size, stride, padding, dilation, ceil_mode)
    _floats(self)
    if _fits(out, out_m, self, indices) and _fits(indices, idx_m, self, out):
        if out.numel():
            k = _pair(kernel_size)
            ints = k + _pair(stride, k) + _pair(padding) + _pair(dilation)
            _native.run("max_pool2d", [_as4(out), _as4(indices), _as4(self)], ints)
        return out, indices
    o, i = max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
    return _into(out, o), _into(indices, i)


@native("aten::max_pool2d_with_indices_backward.grad_input")
def max_pool2d_with_indices_backward_out(grad_output, self, kernel_size, stride, padding, dilation,
                                         ceil_mode, indices, *, grad_input):
    m = meta_of(aten.max_pool2d_with_indices_backward, grad_output, self, kernel_size, stride,
                padding, dilation, ceil_mode, indices)
    _floats(grad_output, self)
    if _fits(grad_input, m, grad_output, indices):
        if grad_input.numel():
            _native.run("max_pool2d_bwd", [_as4(grad_input), _as4(grad_output), _as4(indices)])
        return grad_input
    return _into(grad_input, max_pool2d_with_indices_backward(
        grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices))


@native("aten::avg_pool2d.out")
def avg_pool2d_out(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                   divisor_override=None, *, out):
    return _into(out, avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                 divisor_override))


@native("aten::avg_pool2d_backward.grad_input")
def avg_pool2d_backward_out(grad_output, self, kernel_size, stride, padding, ceil_mode,
                            count_include_pad, divisor_override, *, grad_input):
    return _into(grad_input, avg_pool2d_backward(grad_output, self, kernel_size, stride, padding,
                                                 ceil_mode, count_include_pad, divisor_override))


@native("aten::index_select.out")
def index_select_out(self, dim, index, *, out):
    return _into(out, index_select(self, dim, index))

def _as4(t):
    return t.unsqueeze(0) if t.dim() == 3 else t


@native("aten::max_pool2d_with_indices")
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    out_m, idx_m = meta_of(aten.max_pool2d_with_indices, self, kernel_size, stride, padding, dilation, ceil_mode)
    _floats(self)
    k = _pair(kernel_size)
    ints = k + _pair(stride, k) + _pair(padding) + _pair(dilation)
    out, idx = _empty(out_m, self.device), _empty(idx_m, self.device)
    if out.numel():
        _native.run("max_pool2d", [_as4(out), _as4(idx), _as4(self)], ints)
    return out, idx


@native("aten::max_pool2d_with_indices_backward")
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
                                     ceil_mode, indices):
    m = meta_of(aten.max_pool2d_with_indices_backward, grad_output, self, kernel_size, stride,
                padding, dilation, ceil_mode, indices)
    _floats(grad_output, self)
    gi = _empty(m, self.device)
    if gi.numel():
        _native.run("max_pool2d_bwd", [_as4(gi), _as4(grad_output), _as4(indices)])
    return gi


def _avg_ints(kernel_size, stride, padding, count_include_pad, divisor_override):
    k = _pair(kernel_size)
    return k + _pair(stride, k) + _pair(padding) + [1, 1, int(bool(count_include_pad)),
                                                     int(divisor_override or 0)]


@native("aten::avg_pool2d")
def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    m = meta_of(aten.avg_pool2d, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override)
    _floats(self)
    out = _empty(m, self.device)
    if out.numel():
        _native.run("avg_pool2d", [_as4(out), _as4(self)],
                    _avg_ints(kernel_size, stride, padding, count_include_pad, divisor_override))
    return out


@native("aten::avg_pool2d_backward")
def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    m = meta_of(aten.avg_pool2d_backward, grad_output, self, kernel_size, stride, padding,
                ceil_mode, count_include_pad, divisor_override)
    _floats(grad_output, self)
    gi = _empty(m, self.device)
    if gi.numel():
        _native.run("avg_pool2d_bwd", [_as4(gi), _as4(grad_output)],
                    _avg_ints(kernel_size, stride, padding, count_include_pad, divisor_override))
    return gi


@native("aten::_adaptive_avg_pool2d")
def adaptive_avg_pool2d(self, output_size):
    m = meta_of(aten._adaptive_avg_pool2d, self, output_size)
    _floats(self)
    out = _empty(m, self.device)
    if out.numel():
        _native.run("adaptive_avg_pool2d", [_as4(out), _as4(self)])
    return out


@native("aten::_adaptive_avg_pool2d_backward")
def adaptive_avg_pool2d_backward(grad_output, self):
    m = meta_of(aten._adaptive_avg_pool2d_backward, grad_output, self)
    _floats(grad_output, self)
    gi = _empty(m, self.device)
    if gi.numel():
        _native.run("adaptive_avg_pool2d_bwd", [_as4(gi), _as4(grad_output)])
    return gi


# -------------------------------------------------------------------------- normalization

def _ncs(t):
    return t.reshape(t.shape[0], t.shape[1], -1)


def _per_channel_ok(C, *ts) -> bool:
    return all(t is None or (t.dim() == 1 and t.shape[0] == C) for t in ts)


def _batch_norm_empty(input, weight, bias, running_mean, running_var, training):
    """A zero-size input, as CPU's kernel treats it: an error in training (no batch statistics),
    an empty output and empty saved statistics in evaluation."""
    if training:
        raise RuntimeError("input tensor must have at least one element, but got input_sizes = "
                           f"{list(input.shape)}")
    sdt = input.dtype
    if input.dtype in (torch.bfloat16, torch.float16) and any(
            t is not None and t.dtype == torch.float32 for t in (weight, bias, running_mean, running_var)):
        sdt = torch.float32
    out = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    return (out, torch.empty(0, dtype=sdt, device=input.device),
            torch.empty(0, dtype=sdt, device=input.device))


@native("aten::native_batch_norm")
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    if input.dim() >= 2 and _per_channel_ok(input.shape[1], weight, bias, running_mean, running_var) and (
            training or (running_mean is not None and running_var is not None)):
        # well-formed arguments: the output is the input's shape and dtype (the meta
        # kernel, a Python decomposition, costs more than the kernel itself)
        out = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    elif input.dim() >= 2 and input.numel() == 0 and _per_channel_ok(input.shape[1], weight, bias):
        _floats(input, weight, bias, running_mean, running_var)
        return _batch_norm_empty(input, weight, bias, running_mean, running_var, training)
    else:
        ms = meta_of(aten.native_batch_norm, input, weight, bias, running_mean,
                     running_var, training, momentum, eps)
        out = _empty(ms[0], input.device)
    _floats(input, weight, bias, running_mean, running_var)
    if input.dim() < 2:
        raise NotNative
    if input.numel() == 0:
        return _batch_norm_empty(input, weight, bias, running_mean, running_var, training)
    # CPU: statistics in float32 when a reduced-precision input meets float32 parameters;
    # none saved in evaluation mode.
    sdt = input.dtype
    if input.dtype in (torch.bfloat16, torch.float16) and any(
            t is not None and t.dtype == torch.float32 for t in (weight, bias, running_mean, running_var)):
        sdt = torch.float32
    C = input.shape[1]
    sm = torch.empty(C if training else 0, dtype=sdt, device=input.device)
    si = torch.empty(C if training else 0, dtype=sdt, device=input.device)
    present, mask = _mask(sm if sm.numel() else None, si if si.numel() else None,
                          weight, bias, running_mean, running_var)
    o3 = out.view(out.shape[0], out.shape[1], -1)
    _native.run("batch_norm_fwd", [o3, _ncs(input)] + present, (int(bool(training)), mask),
                (float(momentum), float(eps)))
    return out, sm, si


@native("aten::native_batch_norm_backward")
def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                               save_invstd, train, eps, output_mask):
    _floats(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd)
    if input.dim() < 2 or input.numel() == 0:
        raise NotNative
    C = input.shape[1]
    gi = torch.empty(input.shape, dtype=input.dtype, device=input.device) if output_mask[0] else None
    pdt = weight.dtype if weight is not None else input.dtype
    gw = torch.empty(C, dtype=pdt, device=input.device) if output_mask[1] else None
    gb = torch.empty(C, dtype=pdt, device=input.device) if output_mask[2] else None
    present, mask = _mask(gi.view(gi.shape[0], C, -1) if gi is not None else None, gw, gb, weight,
                          running_mean, running_var, save_mean, save_invstd)
    _native.run("batch_norm_bwd", [_ncs(grad_out), _ncs(input)] + present,
                (int(bool(train)), mask), (float(eps),))
    return gi, gw, gb


# The batch-norm entry points newer autograd / export paths use; torch's CPU kernels are
# the native_batch_norm ones with the running statistics updated (or not) and an empty
# reserve buffer.
@native("aten::_native_batch_norm_legit")
def native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps):
    return native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


@native("aten::_native_batch_norm_legit.no_stats")
def native_batch_norm_legit_no_stats(input, weight, bias, training, momentum, eps):
    return native_batch_norm(input, weight, bias, None, None, training, momentum, eps)


@native("aten::_native_batch_norm_legit_no_training")
def native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps):
    return native_batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps)


def _bn_out(fn):
    """The out= forms: the functional lowering's three results copied into the given tensors."""
    def kernel(*args, **kw):
        outs = [kw.pop(n) for n in ("out", "save_mean", "save_invstd", "out0", "out1", "out2") if n in kw]
        res = fn(*args, **kw)
        for o, r in zip(outs, res):
            if o.dtype != r.dtype:
                raise NotNative
            if o.shape != r.shape:
                o.resize_(r.shape)
            o.copy_(r)
        return tuple(outs)
    return kernel


native("aten::native_batch_norm.out")(_bn_out(native_batch_norm))
native("aten::_native_batch_norm_legit.out")(_bn_out(native_batch_norm_legit))
native("aten::_native_batch_norm_legit.no_stats_out")(_bn_out(native_batch_norm_legit_no_stats))
native("aten::_native_batch_norm_legit_no_training.out")(_bn_out(native_batch_norm_legit_no_training))


def _reserve(input):
    return torch.empty(0, dtype=torch.uint8, device=input.device)


@native("aten::_batch_norm_with_update")
def batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps):
    out, sm, si = native_batch_norm(input, weight, bias, running_mean, running_var, True, momentum, eps)
    return out, sm, si, _reserve(input)


@native("aten::_batch_norm_no_update")
def batch_norm_no_update(input, weight, bias, running_mean, running_var, momentum, eps):
    train = running_mean is None and running_var is None
    out, sm, si = native_batch_norm(input, weight, bias, running_mean, running_var, train, momentum, eps)
    return out, sm, si, _reserve(input)


@native("aten::batch_norm_backward")
def batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var,
                        update, eps, output_mask, reserve):
    return native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                                      save_var, update, eps, output_mask)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


@native("aten::native_layer_norm")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    n = len(normalized_shape)
    axis = input.dim() - n
    shp = tuple(normalized_shape)
    if n and axis >= 0 and tuple(input.shape[axis:]) == shp and all(
            t is None or tuple(t.shape) == shp for t in (weight, bias)):
        # well-formed arguments: output as the input, statistics [*leading, 1, ...] (the
        # meta kernel, a Python decomposition, costs more than the kernel itself)
        stat_shape = tuple(input.shape[:axis]) + (1,) * n
        ms = (torch.empty(input.shape, dtype=input.dtype, device="meta"),
              torch.empty(stat_shape, device="meta"), torch.empty(stat_shape, device="meta"))
    else:
        if n and (axis < 0 or tuple(input.shape[max(axis, 0):]) != shp):
            # CPU's message (the meta kernel words it differently)
            dims = "".join(f", {s}" for s in shp)
            raise RuntimeError(f"Given normalized_shape={list(shp)}, expected input with shape [*{dims}], "
                               f"but got input of size{list(input.shape)}")
        ms = meta_of(aten.native_layer_norm, input, normalized_shape, weight, bias, eps)
    _floats(input, weight, bias)
    D = _numel(normalized_shape)
    # CPU keeps the statistics in the input dtype unless a reduced input meets float32
    # parameters (the meta kernel always says float32 for reduced inputs).
    mixed = input.dtype in (torch.bfloat16, torch.float16) and any(
        t is not None and t.dtype == torch.float32 for t in (weight, bias))
    sdt = torch.float32 if mixed else input.dtype
    out = _empty(ms[0], input.device)
    mean, rstd = (torch.empty(m.shape, dtype=sdt, device=input.device) for m in ms[1:])
    if input.numel() == 0 and D != 0:
        return out, mean, rstd  # no rows
    if D == 0:
        raise NotNative
    M = input.numel() // D
    present, mask = _mask(mean.view(M), rstd.view(M),
                          weight.reshape(D) if weight is not None else None,
                          bias.reshape(D) if bias is not None else None)
    _native.run("layer_norm_fwd", [out.view(M, D), input.reshape(M, D)] + present, (mask,),
                (float(eps),))
    return out, mean, rstd


@native("aten::native_group_norm")
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    ms = meta_of(aten.native_group_norm, input, weight, bias, N, C, HxW, group, eps)
    _floats(input, weight, bias)
    out, mean, rstd = (_empty(m, input.device) for m in ms)
    if input.numel() == 0:
        raise NotNative
    present, mask = _mask(weight, bias)
    _native.run("group_norm_fwd", [out.view(N, C, HxW), input.reshape(N, C, HxW),
                                   mean.view(-1), rstd.view(-1)] + present,
                (int(group), mask), (float(eps),))
    return out, mean, rstd


@native("aten::native_group_norm_backward")
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
                               output_mask):
    _floats(grad_out, input, mean, rstd, weight)
    if input.numel() == 0:
        raise NotNative
    gi = torch.empty(input.shape, dtype=input.dtype, device=input.device) if output_mask[0] else None
    pdt = weight.dtype if weight is not None else input.dtype
    gw = torch.empty(C, dtype=pdt, device=input.device) if output_mask[1] else None
    gb = torch.empty(C, dtype=pdt, device=input.device) if output_mask[2] else None
    present, mask = _mask(gi.view(N, C, HxW) if gi is not None else None, gw, gb, weight)
    _native.run("group_norm_bwd", [grad_out.reshape(N, C, HxW), input.reshape(N, C, HxW),
                                   mean.reshape(-1), rstd.reshape(-1)] + present,
                (int(group), mask))
    return gi, gw, gb


@native("aten::native_layer_norm_backward")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                               output_mask):
    _floats(grad_out, input, mean, rstd, weight, bias)
    n = len(normalized_shape)
    D = 1
    for s in normalized_shape:
        D *= s
    if D == 0 or tuple(input.shape[input.dim() - n:]) != tuple(normalized_shape):
        raise NotNative
    M = input.numel() // D
    gi = torch.empty(input.shape, dtype=input.dtype, device=input.device) if output_mask[0] else None
    gw = torch.empty(normalized_shape, dtype=weight.dtype, device=input.device) \
        if output_mask[1] and weight is not None else None
    gb = torch.empty(normalized_shape, dtype=bias.dtype, device=input.device) \
        if output_mask[2] and bias is not None else None
    if M == 0:  # no rows: parameter grads are zero sums
        return gi, gw.zero_() if gw is not None else None, gb.zero_() if gb is not None else None
    present, mask = _mask(gi.view(M, D) if gi is not None else None,
                          gw.view(D) if gw is not None else None,
                          gb.view(D) if gb is not None else None,
                          weight.reshape(D) if weight is not None else None)
    _native.run("layer_norm_bwd", [grad_out.reshape(M, D), input.reshape(M, D), mean.reshape(M),
                                   rstd.reshape(M)] + present, (mask,))
    return gi, gw, gb


# ------------------------------------------------------------------------------ embedding

@native("aten::index_select")
def index_select(self, dim, index):
    nd = self.dim()
    if (nd >= 1 and -nd <= dim < nd and index.dim() <= 1 and index.device.type == "hpu"
            and index.dtype in (torch.int64, torch.int32)):
        # The plain case (an embedding lookup): the result shape without the meta op.
        shape = list(self.shape)
        shape[dim % nd] = index.numel()
        out = torch.empty(shape, dtype=self.dtype, device=self.device)
    else:
        m = meta_of(aten.index_select, self, dim, index)
        if index.device.type != "hpu":
            raise NotNative
        out = _empty(m, self.device)
    if out.numel() == 0:
        return out
    d = dim % max(self.dim(), 1)
    s, o = (self.reshape(-1), out.reshape(-1)) if self.dim() == 0 else (self, out)
    try:
        _native.run("index_select", [o, s, index.reshape(-1)], (d,), label="IndexError:index_select")
    except _native.NativeError as e:
        if "index out of range" in str(e):
            raise IndexError("index out of range in self") from None
        raise
    return out


@native("aten::embedding_dense_backward")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    _floats(grad_output)
    if indices.device.type != "hpu" or indices.dtype not in (torch.int64, torch.int32):
        raise NotNative
    D = grad_output.shape[-1]
    gw = torch.empty(num_weights, D, dtype=grad_output.dtype, device=grad_output.device)
    if gw.numel() == 0:
        return gw
    _native.run("embedding_bwd", [gw, grad_output.reshape(-1, D), indices.reshape(-1)],
                (int(padding_idx), int(bool(scale_grad_by_freq))))
    return gw


# ---------------------------------------------------------------- elementwise helpers of losses
# (sgn, log_sigmoid, logit) and integer-aware remainder / fmod / floor_divide; all run the
# Go "ew.<name>" ops through elementwise.ew.

def _ew(*args, **kw):
    from .elementwise import ew
    return ew(*args, **kw)


def _real(*xs) -> None:
    for x in xs:
        if isinstance(x, complex) or (isinstance(x, torch.Tensor) and (x.is_complex() or x.dtype not in _native.DTYPE_CODE)):
            raise NotNative


def _sgn(self, out=None, inplace=False):
    _real(self)
    if self.dtype == torch.bool:
        raise NotNative
    return _ew("sgn", [self], self.dtype, out=out, inplace=inplace)


@native("aten::sgn")
def sgn(self):
    return _sgn(self)


@native("aten::sgn.out")
def sgn_out(self, *, out):
    return _sgn(self, out=out)


@native("aten::sgn_")
def sgn_(self):
    return _sgn(self, out=self, inplace=True)


@native("aten::log_sigmoid_forward")
def log_sigmoid_forward(self):
    _floats(self)
    return (_ew("log_sigmoid", [self], self.dtype, ref=self),
            _ew("log_sigmoid_buffer", [self], self.dtype, ref=self))


@native("aten::log_sigmoid_backward")
def log_sigmoid_backward(grad_output, self, buffer):
    _floats(grad_output, self, buffer)
    if not (grad_output.dtype == self.dtype == buffer.dtype):
        raise NotNative
    return _ew("log_sigmoid_backward", [self, buffer, grad_output], self.dtype, ref=self)


def _logit_params(eps):
    return (0.0, 0.0) if eps is None or eps < 0 else (float(eps), 1.0)


def _logit(self, eps=None, out=None, inplace=False):
    _real(self)
    dt = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    if inplace and dt != self.dtype:
        raise NotNative
    # CPU computes bfloat16 logit in bfloat16 arithmetic (each step rounds)
    rb = float(dt == torch.bfloat16)
    return _ew("logit", [self], dt, params=_logit_params(eps) + (rb,), out=out, inplace=inplace)


@native("aten::logit")
def logit(self, eps=None):
    return _logit(self, eps)


@native("aten::logit.out")
def logit_out(self, eps=None, *, out):
    return _logit(self, eps, out=out)


@native("aten::logit_")
def logit_(self, eps=None):
    return _logit(self, eps, out=self, inplace=True)


@native("aten::logit_backward")
def logit_backward(grad_output, self, eps=None):
    _floats(grad_output, self)
    rt = torch.result_type(grad_output, self)
    return _ew("logit_backward", [grad_output, self], rt, params=_logit_params(eps), ref=self)


@native("aten::logit_backward.grad_input")
def logit_backward_out(grad_output, self, eps=None, *, grad_input):
    # structured op: the functional form reaches the backend through this overload
    _floats(grad_output, self)
    rt = torch.result_type(grad_output, self)
    return _ew("logit_backward", [grad_output, self], rt, params=_logit_params(eps), out=grad_input)


def _int_divisor_check(other) -> None:
    """torch raises ZeroDivisionError for integer division by zero."""
    if isinstance(other, torch.Tensor):
        if other.numel() and bool((other == 0).any().item()):
            raise RuntimeError("ZeroDivisionError")
    elif other == 0:
        raise RuntimeError("ZeroDivisionError")


def _intdiv(goop_f, goop_i):
    def fn(self, other, out=None, inplace=False):
        _real(self, other)
        from .elementwise import _rt
        rt = _rt(self, other)
        if rt == torch.bool:
            raise NotNative
        if rt.is_floating_point:
            if goop_f is None or rt in (torch.bfloat16, torch.float16) and goop_f == "div_floor":
                raise NotNative  # bf16/fp16 floor division rounds the quotient first
            return _ew(goop_f, [self, other], rt, out=out, inplace=inplace)
        _int_divisor_check(other)
        return _ew(goop_i, [self, other], rt, out=out, inplace=inplace)
    return fn


def _reg_binary(base: str, fn) -> None:
    from .elementwise import _exists
    for ov in ("Tensor", "Scalar", "default"):
        name = f"aten::{base}.{ov}" if ov != "default" else f"aten::{base}"
        if _exists(name):
            native(name)(lambda self, other, _f=fn: _f(self, other))
    for name in (f"aten::{base}.Tensor_out", f"aten::{base}.Scalar_out", f"aten::{base}.out"):
        if _exists(name):
            native(name)(lambda self, other, *, out, _f=fn: _f(self, other, out=out))
    for name in (f"aten::{base}_.Tensor", f"aten::{base}_.Scalar"):
        if _exists(name):
            native(name)(lambda self, other, _f=fn: _f(self, other, out=self, inplace=True))


_reg_binary("remainder", _intdiv("remainder", "remainder"))
_reg_binary("fmod", _intdiv("fmod", "fmod"))
_reg_binary("floor_divide", _intdiv("div_floor", "idiv_floor"))
