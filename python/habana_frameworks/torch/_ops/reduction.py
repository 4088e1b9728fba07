"""Reductions (sum, mean, max/min, var/std, norm, ...), softmax and losses lowered to Go.

Every reduction is brought to a 2-D [M, N] view (kept dims first, reduced dims last; a copy
only when no view exists) and reduced along N by the Go core.
"""
from __future__ import annotations

import math

import torch

from .. import _native
from .out_resize import resize_out
from .registry import native, NotNative

_CODE = _native.DTYPE_CODE
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
SUM, MEAN, PROD, AMAX, AMIN, VAR, NORM, LSE, ALL, ANY = range(10)


def _dims(x: torch.Tensor, dim) -> list[int]:
    nd = max(x.dim(), 1)
    if dim is None:
        return list(range(x.dim()))
    if isinstance(dim, int):
        dim = [dim]
    if len(dim) == 0:
        return list(range(x.dim()))
    out = []
    for d in dim:
        if d < -nd or d >= nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})")
        d = d % nd
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    return [d for d in out if d < x.dim()] if x.dim() else []


def _to2d(x: torch.Tensor, red: list[int]):
    """[M, N] view of x with the dims in red last; also the kept (keepdim) output shape."""
    kept = [d for d in range(x.dim()) if d not in red]
    M = math.prod(x.shape[d] for d in kept)
    N = math.prod(x.shape[d] for d in red)
    xp = x.permute(kept + red) if x.dim() else x
    try:
        x2 = xp.view(M, N)
    except RuntimeError:
        x2 = xp.reshape(M, N)
    keep_shape = [1 if d in red else x.shape[d] for d in range(x.dim())]
    return x2, M, N, keep_shape


def _out_view(out, x, dtype, keep_shape, keepdim, red, alloc_shape):
    """out itself (resized to the result's shape) viewed as alloc_shape, for the kernel to
    write into directly; None when a temporary and a copy are needed (no out=, another
    dtype, not contiguous, or sharing x's storage)."""
    if out is None or out.dtype != dtype:
        return None
    shape = keep_shape if keepdim else [s for d, s in enumerate(keep_shape) if d not in red]
    if list(out.shape) != list(shape):
        resize_out(out, shape)
    if not out.is_contiguous() or (out.numel() and x.numel() and
                                   out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()):
        return None
    return out.view(alloc_shape)


def _finish(res: torch.Tensor, keep_shape, keepdim, red, x, out):
    shape = keep_shape if keepdim else [s for d, s in enumerate(keep_shape) if d not in red]
    res = res.view(shape)
    if out is not None:
        if out.dtype != res.dtype:
            raise NotNative
        if list(out.shape) != list(shape):
            resize_out(out, shape)
        out.copy_(res)
        return out
    return res


def _reduce(kind, x, dim, keepdim, dtype=None, params=(), out=None, out_dtype=None):
    if x.dtype not in _CODE or (dtype is not None and dtype not in _CODE):
        raise NotNative
    red = _dims(x, dim)
    rdt = out_dtype or dtype or x.dtype
    if kind in (SUM, MEAN) and x.dtype in _FLOATS and rdt in _FLOATS:
        # torch's CPU summation order, on the input as it is (no permuted copy)
        keep_shape = [1 if d in red else x.shape[d] for d in range(x.dim())]
        direct = _out_view(out, x, rdt, keep_shape, keepdim, red, keep_shape)
        res = torch.empty(keep_shape, dtype=rdt, device=x.device) if direct is None else direct
        if res.numel():
            flags = [int(d in red) for d in range(x.dim())]
            _native.run("red.sum", [res, x], [int(kind == MEAN), torch.get_num_threads()] + flags)
        if direct is not None:
            return out
        return _finish(res, keep_shape, keepdim, red, x, out)
    x2, M, N, keep_shape = _to2d(x, red)
    res = torch.empty(M, dtype=rdt, device=x.device)
    if M:
        _native.run("red.reduce", [res, x2], (kind,), params)
    return _finish(res, keep_shape, keepdim, red, x, out)


def _float_only(x, dtype=None):
    dt = dtype or x.dtype
    if dt not in _FLOATS or x.dtype not in _FLOATS:
        raise NotNative


def _sum_int(x, dim, keepdim, dtype, out=None):
    """Sum of an integer or bool tensor (int64 unless dtype says otherwise), exact in Go."""
    rdt = dtype or torch.int64
    if rdt.is_floating_point or rdt not in _CODE or rdt == torch.bool:
        raise NotNative
    red = _dims(x, dim)
    x2, M, N, keep_shape = _to2d(x, red)
    direct = _out_view(out, x, rdt, keep_shape, keepdim, red, (M,))
    res = torch.empty(M, dtype=rdt, device=x.device) if direct is None else direct
    if M:
        _native.run("red.isum", [res, x2])
    if direct is not None:
        return out
    return _finish(res, keep_shape, keepdim, red, x, out)


def _is_int(x, dtype=None) -> bool:
    return x.dtype in _CODE and x.dtype not in _FLOATS and (dtype is None or dtype not in _FLOATS)


def _int_as(x, dtype):
    """An integer/bool input summed into a floating dtype: CPU converts the input to it first."""
    if dtype in _FLOATS and x.dtype in _CODE and x.dtype not in _FLOATS:
        return x.to(dtype)
    return x


@native("aten::sum.dim_IntList")
def sum_dim(self, dim, keepdim=False, *, dtype=None):
    self = _int_as(self, dtype)
    if _is_int(self, dtype):
        return _sum_int(self, dim, keepdim, dtype)
    _float_only(self, dtype)
    return _reduce(SUM, self, dim, keepdim, dtype)


@native("aten::sum.IntList_out")
def sum_out(self, dim, keepdim=False, *, dtype=None, out):
    self = _int_as(self, dtype)
    if _is_int(self, dtype):
        return _sum_int(self, dim, keepdim, dtype, out=out)
    _float_only(self, dtype)
    return _reduce(SUM, self, dim, keepdim, dtype, out=out)


@native("aten::sum.default")
def sum_all(self, *, dtype=None):
    self = _int_as(self, dtype)
    if _is_int(self, dtype):
        return _sum_int(self, None, False, dtype)
    _float_only(self, dtype)
    return _reduce(SUM, self, None, False, dtype)


@native("aten::mean.dim")
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    _float_only(self, dtype)
    return _reduce(MEAN, self, dim, keepdim, dtype)


@native("aten::mean.out")
def mean_out(self, dim, keepdim=False, *, dtype=None, out):
    _float_only(self, dtype)
    return _reduce(MEAN, self, dim, keepdim, dtype, out=out)


@native("aten::mean.default")
def mean_all(self, *, dtype=None):
    _float_only(self, dtype)
    return _reduce(MEAN, self, None, False, dtype)


def _prod_ok(self, dtype):
    _float_only(self, dtype)
    if (dtype or self.dtype) in (torch.bfloat16, torch.float16):
        raise NotNative  # torch rounds every partial product to the reduced dtype


@native("aten::prod.default")
def prod_all(self, *, dtype=None):
    _prod_ok(self, dtype)
    return _reduce(PROD, self, None, False, dtype)


@native("aten::prod.dim_int")
def prod_dim(self, dim, keepdim=False, *, dtype=None):
    _prod_ok(self, dtype)
    return _reduce(PROD, self, [dim], keepdim, dtype)


def _nonempty(x, red, name):
    for d in red:
        if x.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    if not red and x.numel() == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")


def _extreme_int(x, dim, keepdim, is_min):
    """amax/amin of an integer or bool tensor: exact int comparisons in Go (red.argreduce
    on the [M, N] view; the indices are dropped)."""
    red = _dims(x, dim)
    x2, M, N, keep_shape = _to2d(x, red)
    vals = torch.empty(M, dtype=x.dtype, device=x.device)
    if M:
        idx = torch.empty(M, dtype=torch.int64, device=x.device)
        _native.run("red.argreduce", [vals, idx, x2], (int(is_min), 1))
    return _finish(vals, keep_shape, keepdim, red, x, None)


def _float_or_int(x):
    if x.dtype not in _CODE:
        raise NotNative


@native("aten::amax")
def amax(self, dim=(), keepdim=False):
    _float_or_int(self)
    _nonempty(self, _dims(self, dim), "amax")
    if self.dtype not in _FLOATS:
        return _extreme_int(self, dim, keepdim, False)
    return _reduce(AMAX, self, dim, keepdim)


@native("aten::amin")
def amin(self, dim=(), keepdim=False):
    _float_or_int(self)
    _nonempty(self, _dims(self, dim), "amin")
    if self.dtype not in _FLOATS:
        return _extreme_int(self, dim, keepdim, True)
    return _reduce(AMIN, self, dim, keepdim)


@native("aten::max.default")
def max_all(self):
    _float_or_int(self)
    if self.numel() == 0:
        raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    if self.dtype not in _FLOATS:
        return _extreme_int(self, None, False, False)
    return _reduce(AMAX, self, None, False)


@native("aten::min.default")
def min_all(self):
    _float_or_int(self)
    if self.numel() == 0:
        raise RuntimeError("min(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    if self.dtype not in _FLOATS:
        return _extreme_int(self, None, False, True)
    return _reduce(AMIN, self, None, False)


def _argreduce(x, dim, keepdim, is_min, want_values):
    _float_or_int(x)
    if dim is None:
        red = list(range(x.dim()))
        x2 = x.reshape(1, -1)
        M, keep_shape, keepdim = 1, [1] * x.dim(), keepdim
        if x.numel() == 0:
            raise RuntimeError("argmax(): Expected reduction dim to be specified for input.numel() == 0.")
    else:
        red = _dims(x, [dim])
        _nonempty(x, red, "max" if not is_min else "min")
        x2, M, N, keep_shape = _to2d(x, red)
    idx = torch.empty(M, dtype=torch.int64, device=x.device)
    vals = torch.empty(M if want_values else 0, dtype=x.dtype, device=x.device)
    if M:
        _native.run("red.argreduce", [vals, idx, x2], (int(is_min), int(want_values)))
    idx = _finish(idx, keep_shape, keepdim, red, x, None)
    if dim is None and not keepdim:
        idx = idx.view(())
    if want_values:
        return _finish(vals, keep_shape, keepdim, red, x, None), idx
    return idx


@native("aten::max.dim")
def max_dim(self, dim, keepdim=False):
    return _argreduce(self, dim, keepdim, False, True)


@native("aten::min.dim")
def min_dim(self, dim, keepdim=False):
    return _argreduce(self, dim, keepdim, True, True)


@native("aten::argmax")
def argmax(self, dim=None, keepdim=False):
    return _argreduce(self, dim, keepdim, False, False)


@native("aten::argmin")
def argmin(self, dim=None, keepdim=False):
    return _argreduce(self, dim, keepdim, True, False)


def _correction(correction, unbiased=None):
    if correction is None:
        return 1.0
    return float(correction)


@native("aten::var.correction")
def var_correction(self, dim=None, *, correction=None, keepdim=False):
    _float_only(self)
    return _reduce(VAR, self, dim, keepdim, params=(_correction(correction), 0.0))


@native("aten::std.correction")
def std_correction(self, dim=None, *, correction=None, keepdim=False):
    _float_only(self)
    return _reduce(VAR, self, dim, keepdim, params=(_correction(correction), 1.0))


@native("aten::var_mean.correction")
def var_mean_correction(self, dim=None, *, correction=None, keepdim=False):
    return var_correction(self, dim, correction=correction, keepdim=keepdim), mean_dim(self, dim, keepdim)


@native("aten::std_mean.correction")
def std_mean_correction(self, dim=None, *, correction=None, keepdim=False):
    return std_correction(self, dim, correction=correction, keepdim=keepdim), mean_dim(self, dim, keepdim)


@native("aten::linalg_vector_norm")
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    _float_only(self, dtype)
    if isinstance(ord, complex):
        raise NotNative
    o = float(ord)
    if o < 0 and self.numel() == 0:
        raise NotNative
    x = self if dtype is None else self.to(dtype)
    return _reduce(NORM, x, dim, keepdim, params=(o,))


@native("aten::logsumexp")
def logsumexp(self, dim, keepdim=False):
    _float_only(self)
    return _reduce(LSE, self, dim, keepdim)


@native("aten::all.default")
def all_default(self):
    if self.dtype not in _CODE:
        raise NotNative
    return _reduce(ALL, self, None, False, out_dtype=torch.bool if self.dtype != torch.uint8 else torch.uint8)


@native("aten::any.default")
def any_default(self):
    if self.dtype not in _CODE:
        raise NotNative
    return _reduce(ANY, self, None, False, out_dtype=torch.bool if self.dtype != torch.uint8 else torch.uint8)


@native("aten::all.dim", "aten::all.dims")
def all_dim(self, dim=None, keepdim=False):
    if self.dtype not in _CODE:
        raise NotNative
    return _reduce(ALL, self, dim, keepdim, out_dtype=torch.bool if self.dtype != torch.uint8 else torch.uint8)


@native("aten::any.dim", "aten::any.dims")
def any_dim(self, dim=None, keepdim=False):
    if self.dtype not in _CODE:
        raise NotNative
    return _reduce(ANY, self, dim, keepdim, out_dtype=torch.bool if self.dtype != torch.uint8 else torch.uint8)


@native("aten::cumsum")
def cumsum(self, dim, *, dtype=None):
    # a float dtype over integer or bool input (DETR's mask.cumsum(1, dtype=torch.float32))
    # sums the converted values, as torch's CPU kernel does
    if (dtype or self.dtype) not in _FLOATS or self.is_complex() or (dtype is None and self.dtype not in _FLOATS):
        raise NotNative
    x = self if dtype is None else self.to(dtype)
    if x.dim() == 0:
        return x.clone()
    d = _dims(x, [dim])[0]
    xt = x.movedim(d, -1)
    res = torch.empty(xt.shape, dtype=x.dtype, device=x.device)
    if res.numel():
        N = xt.shape[-1]
        try:
            x2 = xt.view(-1, N)
        except RuntimeError:
            x2 = xt.reshape(-1, N)
        _native.run("red.cumsum", [res.view(-1, N), x2])
    return res.movedim(-1, d)


# ---------------------------------------------------------------- softmax

def _writable(out, shape, dtype, srcs):
    """out= itself (resized to shape) when the kernel may write the result there: the
    same dtype, contiguous, not sharing a source's storage. Saves the copy torch's
    structured out= path would otherwise make."""
    if out is None or out.dtype != dtype:
        return None
    if tuple(out.shape) != tuple(shape):
        resize_out(out, shape)
    if not out.is_contiguous():
        return None
    if out.numel() and any(t.numel() and t.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()
                           for t in srcs):
        return None
    return out


def _softmax_impl(x, dim, half_to_float, log, _out=None):
    if x.dtype not in _FLOATS or half_to_float:
        raise NotNative
    if x.dim() == 0:
        x1 = x.view(1, 1)
        res = torch.empty_like(x)
        _native.run("red.softmax", [res.view(1, 1), x1], (int(log), 0, 1))
        return res
    d = dim % x.dim()
    last = d == x.dim() - 1
    xt = x.movedim(d, -1)
    N = xt.shape[-1]
    res = _writable(_out, x.shape, x.dtype, (x,)) if last else None
    if res is None:
        res = torch.empty(xt.shape, dtype=x.dtype, device=x.device)
    if res.numel():
        try:
            x2 = xt.view(-1, N)
        except RuntimeError:
            x2 = xt.reshape(-1, N)
        inner = math.prod(x.shape[d + 1:])
        _native.run("red.softmax", [res.view(-1, N), x2], (int(log), int(last), inner))
    return res if last else res.movedim(-1, d)


@native("aten::_softmax")
def _softmax(self, dim, half_to_float, _out=None):
    return _softmax_impl(self, dim, half_to_float, False, _out)


@native("aten::_log_softmax")
def _log_softmax(self, dim, half_to_float, _out=None):
    return _softmax_impl(self, dim, half_to_float, True, _out)


def _softmax_bwd_impl(grad_output, output, dim, input_dtype, log, _out=None):
    if output.dtype not in _FLOATS or grad_output.dtype != output.dtype or input_dtype != output.dtype:
        raise NotNative
    if output.dim() == 0:
        grad_output, output = grad_output.view(1), output.view(1)
        dim = 0
    d = dim % output.dim()
    shape = torch.broadcast_shapes(grad_output.shape, output.shape)
    gt = grad_output.expand(shape).movedim(d, -1)
    yt = output.expand(shape).movedim(d, -1)
    N = yt.shape[-1]
    last = d == output.dim() - 1 and tuple(shape) == tuple(output.shape)
    res = _writable(_out, shape, output.dtype, (grad_output, output)) if last else None
    if res is None:
        res = torch.empty(yt.shape, dtype=output.dtype, device=output.device)
    if res.numel():
        def flat(t):
            try:
                return t.view(-1, N)
            except RuntimeError:
                return t.reshape(-1, N)
        _native.run("red.softmax_backward", [res.view(-1, N), flat(gt), flat(yt)],
                    (int(log), int(d == output.dim() - 1)))
    if not output.dim():
        return res.view(())
    return res if last else res.movedim(-1, d).reshape(output.shape)


@native("aten::_softmax_backward_data")
def _softmax_backward_data(grad_output, output, dim, input_dtype, _out=None):
    return _softmax_bwd_impl(grad_output, output, dim, input_dtype, False, _out)


@native("aten::_log_softmax_backward_data")
def _log_softmax_backward_data(grad_output, output, dim, input_dtype, _out=None):
    return _softmax_bwd_impl(grad_output, output, dim, input_dtype, True, _out)


# ---------------------------------------------------------------- losses

@native("aten::nll_loss_forward")
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    if self.dtype not in _FLOATS or target.dtype not in (torch.int64, torch.uint8, torch.int32):
        raise NotNative
    if self.dim() not in (1, 2) or target.dim() > 1:
        raise NotNative
    x = self if self.dim() == 2 else self.view(1, -1)
    t = target.view(-1) if target.dim() == 1 else target.view(1)
    if t.shape[0] != x.shape[0]:
        raise RuntimeError(f"Expected input batch_size ({x.shape[0]}) to match target batch_size ({t.shape[0]}).")
    has_w = weight is not None
    if has_w and (weight.dim() != 1 or weight.numel() != x.shape[1]):
        raise NotNative
    if reduction == 0 and self.dim() == 2:
        out = torch.empty(x.shape[0], dtype=self.dtype, device=self.device)
    else:
        out = torch.empty((), dtype=self.dtype, device=self.device)
    tw = torch.empty((), dtype=self.dtype, device=self.device)
    w = weight if has_w else tw
    try:
        _native.run("loss.nll_forward", [out.view(-1) if out.dim() else out.view(1), tw.view(1), x, t, w.view(-1)],
                    (reduction, ignore_index, int(has_w)), label="IndexError:nll_loss")
    except _native.NativeError as e:  # CPU: IndexError("Target 9 is out of bounds.")
        raise IndexError(str(e).removeprefix("loss.nll_forward: ")) from None
    return out, tw


@native("aten::nll_loss_backward")
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    if self.dtype not in _FLOATS or target.dtype not in (torch.int64, torch.uint8, torch.int32):
        raise NotNative
    if self.dim() not in (1, 2) or target.dim() > 1:
        raise NotNative
    gi = torch.empty_like(self, memory_format=torch.contiguous_format)
    g2 = gi if self.dim() == 2 else gi.view(1, -1)
    t = target.view(-1) if target.dim() == 1 else target.view(1)
    has_w = weight is not None
    w = weight if has_w else total_weight
    go = grad_output.reshape(-1) if grad_output.dim() else grad_output.view(1)
    try:
        _native.run("loss.nll_backward", [g2, go, t, w.view(-1), total_weight.reshape(1)],
                    (reduction, ignore_index, int(has_w)), label="IndexError:nll_loss_backward")
    except _native.NativeError as e:
        raise IndexError(str(e).removeprefix("loss.nll_backward: ")) from None
    return gi


@native("aten::mse_loss")
def mse_loss(self, target, reduction=1):
    from .elementwise import ew
    if self.dtype not in _FLOATS:
        raise NotNative
    rt = torch.result_type(self, target)
    sq = ew("sqdiff", [self, target], rt)
    if reduction == 0:
        return sq
    return _reduce(MEAN if reduction == 1 else SUM, sq, None, False)


@native("aten::mse_loss_backward")
def mse_loss_backward(grad_output, self, target, reduction):
    from .elementwise import ew
    if self.dtype not in _FLOATS:
        raise NotNative
    shape = torch.broadcast_shapes(self.shape, target.shape)
    # An empty input has an empty gradient: any scale will do, but not a division by zero.
    scale = 2.0 / max(math.prod(shape), 1) if reduction == 1 else 2.0
    rt = torch.result_type(self, target)
    return ew("mse_backward", [grad_output, self, target], rt, params=(scale,), ref=self)


def _loss_inputs(self, target):
    """Result dtype of an elementwise loss over (self, target); floats only."""
    if self.dtype not in _FLOATS or target.dtype not in _FLOATS:
        raise NotNative
    return torch.result_type(self, target)


def _loss_reduce(loss, reduction):
    if reduction == 0:
        return loss
    return _reduce(MEAN if reduction == 1 else SUM, loss, None, False)


def _loss_norm(self, target, reduction) -> float:
    return 1.0 / math.prod(torch.broadcast_shapes(self.shape, target.shape)) if reduction == 1 else 1.0


@native("aten::smooth_l1_loss")
def smooth_l1_loss(self, target, reduction=1, beta=1.0):
    from .elementwise import ew
    if beta < 0:
        raise NotNative  # torch's own error
    rt = _loss_inputs(self, target)
    return _loss_reduce(ew("smooth_l1", [self, target], rt, params=(float(beta),)), reduction)


@native("aten::smooth_l1_loss_backward")
def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    from .elementwise import ew
    rt = _loss_inputs(self, target)
    if grad_output.dtype not in _FLOATS:
        raise NotNative
    return ew("smooth_l1_backward", [self, target, grad_output], rt,
              params=(_loss_norm(self, target, reduction), float(beta)), ref=self)


@native("aten::huber_loss")
def huber_loss(self, target, reduction=1, delta=1.0):
    from .elementwise import ew
    if not delta > 0:
        raise NotNative  # torch's own error
    rt = _loss_inputs(self, target)
    rb = float(rt == torch.bfloat16)  # CPU computes in bfloat16 vectors: every step rounds
    return _loss_reduce(ew("huber", [self, target], rt, params=(float(delta), rb)), reduction)


@native("aten::huber_loss_backward")
def huber_loss_backward(grad_output, self, target, reduction, delta):
    from .elementwise import ew
    rt = _loss_inputs(self, target)
    if grad_output.dtype not in _FLOATS:
        raise NotNative
    rb = float(rt == torch.bfloat16)
    return ew("huber_backward", [self, target, grad_output], rt,
              params=(_loss_norm(self, target, reduction), float(delta), rb), ref=self)


def _bce_check(t: torch.Tensor, what: str) -> None:
    if t.numel() == 0:
        return
    lo, hi = float(_reduce(AMIN, t, None, False).item()), float(_reduce(AMAX, t, None, False).item())
    if not (lo >= 0 and hi <= 1):
        raise RuntimeError(f"all elements of {what} should be between 0 and 1")


@native("aten::binary_cross_entropy")
def binary_cross_entropy(self, target, weight=None, reduction=1):
    from .elementwise import ew
    if self.dtype not in _FLOATS or target.dtype != self.dtype or self.shape != target.shape:
        raise NotNative
    if weight is not None and weight.dtype not in _FLOATS:
        raise NotNative
    _bce_check(self, "input")
    _bce_check(target, "target")
    rb = float(self.dtype == torch.bfloat16)  # c10::BFloat16 arithmetic rounds each step
    loss = ew("bce", [self, target], self.dtype, params=(rb,), ref=self)
    if weight is not None:
        loss = ew("mul", [loss, weight], self.dtype, ref=self)
    return _loss_reduce(loss, reduction)


@native("aten::binary_cross_entropy_backward")
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=1):
    from .elementwise import ew
    if self.dtype not in _FLOATS or target.dtype != self.dtype or grad_output.dtype != self.dtype:
        raise NotNative
    if weight is not None and weight.dtype not in _FLOATS:
        raise NotNative
    rb = float(self.dtype == torch.bfloat16)  # c10::BFloat16 arithmetic rounds each step
    gi = ew("bce_backward", [grad_output, self, target], self.dtype, params=(rb,), ref=self)
    if weight is not None:
        gi = ew("mul", [gi, weight], self.dtype, ref=self)
    if reduction == 1:
        gi = ew("div", [gi, torch.tensor(float(self.numel()), dtype=torch.float64)], self.dtype,
                ref=self, keep_scalars=True)
    return gi


# ---------------------------------------------------------------- out= variants
# Structured ops reach the backend through their out= overload (torch allocates the outputs
# and calls it), so every functional lowering above also serves its out= form.

def _copy_into(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    if dst.dtype != src.dtype:
        raise NotNative
    if dst.shape != src.shape:
        dst.resize_(src.shape)
    if dst.numel():
        _native.run("copy", (dst, src))
    return dst


def _register_out(fn, name: str, direct: bool = False):
    """direct: fn takes _out= (its single output) and may return that very tensor."""
    from .elementwise import _exists
    if not _exists(name):
        return
    from .registry import _resolve
    schema = _resolve(name)._schema
    out_names = [a.name for a in schema.arguments if a.is_out]

    def kernel(*args, **kw):
        outs = [kw.pop(n) for n in out_names]
        if direct:
            kw["_out"] = outs[0]
        res = fn(*args, **kw)
        res = res if isinstance(res, tuple) else (res,)
        done = tuple(o if r is o else _copy_into(o, r) for o, r in zip(outs, res))
        return done if len(done) > 1 else done[0]
    native(name)(kernel)


for _fn, _name in [
    (_softmax, "aten::_softmax.out"), (_log_softmax, "aten::_log_softmax.out"),
    (_softmax_backward_data, "aten::_softmax_backward_data.out"),
    (_log_softmax_backward_data, "aten::_log_softmax_backward_data.out"),
]:
    _register_out(_fn, _name, direct=True)


for _fn, _name in [
    (nll_loss_forward, "aten::nll_loss_forward.output"),
    (nll_loss_backward, "aten::nll_loss_backward.grad_input"),
    (mse_loss, "aten::mse_loss.out"), (mse_loss_backward, "aten::mse_loss_backward.grad_input"),
    (smooth_l1_loss, "aten::smooth_l1_loss.out"),
    (smooth_l1_loss_backward, "aten::smooth_l1_loss_backward.grad_input"),
    (huber_loss, "aten::huber_loss.out"), (huber_loss_backward, "aten::huber_loss_backward.out"),
    (binary_cross_entropy, "aten::binary_cross_entropy.out"),
    (binary_cross_entropy_backward, "aten::binary_cross_entropy_backward.grad_input"),
    (amax, "aten::amax.out"), (amin, "aten::amin.out"), (argmax, "aten::argmax.out"),
    (argmin, "aten::argmin.out"), (max_dim, "aten::max.dim_max"), (min_dim, "aten::min.dim_min"),
    (cumsum, "aten::cumsum.out"), (all_default, "aten::all.all_out"), (any_default, "aten::any.all_out"),
    (all_dim, "aten::all.out"), (any_dim, "aten::any.out"), (all_dim, "aten::all.dims_out"),
    (any_dim, "aten::any.dims_out"), (var_correction, "aten::var.correction_out"),
    (std_correction, "aten::std.correction_out"), (linalg_vector_norm, "aten::linalg_vector_norm.out"),
    (logsumexp, "aten::logsumexp.out"), (prod_dim, "aten::prod.int_out"), (max_all, "aten::max.unary_out"),
    (min_all, "aten::min.unary_out"),
]:
    _register_out(_fn, _name)

_SCALAR_TYPE = {torch.float32: "Float", torch.float64: "Double", torch.bfloat16: "BFloat16",
                torch.float16: "Half", torch.int64: "Long", torch.int32: "Int", torch.int16: "Short",
                torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool"}


def _same_dtype_out(name: str) -> None:
    """amax/amin.out: CPU requires out's dtype to be the input's (other reductions cast)."""
    from .registry import _NATIVE, _resolve
    op = _resolve(name)
    inner = _NATIVE[op]

    def kernel(self, *args, out, **kw):
        if out.dtype != self.dtype:
            raise RuntimeError("Expected the dtype for input and out to match, but got "
                               f"{_SCALAR_TYPE.get(self.dtype, self.dtype)} for input's dtype and "
                               f"{_SCALAR_TYPE.get(out.dtype, out.dtype)} for out's dtype.")
        return inner(self, *args, out=out, **kw)
    native(name)(kernel)


_same_dtype_out("aten::amax.out")
_same_dtype_out("aten::amin.out")
