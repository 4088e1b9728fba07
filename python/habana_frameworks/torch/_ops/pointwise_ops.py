"""Pointwise ops and dtype overloads lowered to Go (kernels/pointwise_more.go and the
elementwise table): nextafter, frexp, gcd/lcm, the bit shifts, round to decimals, angle
and conj_physical of real tensors, and the integer/bool forms of rounding, sign and
hardtanh that torch defines as copies or integer clamps.

The integer forms of ops whose result is floating cannot be written in place: torch raises
"result type Float can't be cast to the desired output type Long", and so do these.
"""
from __future__ import annotations

import torch

from .elementwise import ew, _complexy, _rt, _reg3, _clamp, _rounding, _unary_float
from .fallback import type_name as _tname
from .registry import native, NotNative
from .. import _native

_CODE = _native.DTYPE_CODE


def cast_error(result: torch.dtype, out: torch.dtype) -> RuntimeError:
    return RuntimeError(f"result type {_tname(result)} can't be cast to the desired output type {_tname(out)}")


def _copy(self, out=None, inplace=False):
    """torch's result for ops that are the identity on a dtype: a copy (in place: self)."""
    if inplace:
        return self
    if out is not None:
        if out.dtype != self.dtype and not torch.can_cast(self.dtype, out.dtype):
            raise cast_error(self.dtype, out.dtype)
        return out.resize_(self.shape).copy_(self)
    return self.clone()


# ---------------------------------------------------------------- rounding of integers

def _round_like(goop):
    float_fn = _rounding(goop)

    def fn(self, out=None, inplace=False):
        _complexy(self)
        if self.dtype.is_floating_point:
            return float_fn(self, out=out, inplace=inplace)
        if self.dtype == torch.bool and goop != "round":
            raise NotNative  # torch: not implemented for 'Bool'
        return _copy(self, out, inplace)
    return fn


for _n in ("floor", "ceil", "trunc", "round"):
    _reg3(_n, "", _round_like(_n))


def _round_decimals(self, decimals=0, out=None, inplace=False):
    _complexy(self)
    if not self.dtype.is_floating_point:
        raise NotNative  # torch's own rules for integers
    if decimals == 0:
        return ew("round", [self], self.dtype, out=out, inplace=inplace)
    return ew("round_decimals", [self], self.dtype, params=(float(decimals),), out=out, inplace=inplace)


native("aten::round.decimals")(lambda self, *, decimals: _round_decimals(self, decimals))
native("aten::round.decimals_out")(lambda self, *, decimals, out: _round_decimals(self, decimals, out=out))
native("aten::round_.decimals")(lambda self, *, decimals: _round_decimals(self, decimals, out=self, inplace=True))


# ---------------------------------------------------------------- sign, sgn, angle, conj_physical

_sign_num = _unary_float("sign", int_ok=True)


def _sign(self, out=None, inplace=False):
    if self.dtype == torch.bool:
        return _copy(self, out, inplace)
    return _sign_num(self, out=out, inplace=inplace)


_reg3("sign", "", _sign)


def _sgn_bool(self, out=None, inplace=False):
    if self.dtype != torch.bool:
        raise NotNative
    return _copy(self, out, inplace)


def _reg_sgn():
    from .nn_ops import sgn, sgn_out, sgn_

    def fwd(self):
        return _sgn_bool(self) if self.dtype == torch.bool else sgn(self)

    def fwd_out(self, *, out):
        return _sgn_bool(self, out=out) if self.dtype == torch.bool else sgn_out(self, out=out)

    def fwd_(self):
        return _sgn_bool(self, inplace=True) if self.dtype == torch.bool else sgn_(self)
    native("aten::sgn")(fwd)
    native("aten::sgn.out")(fwd_out)
    native("aten::sgn_")(fwd_)


_reg_sgn()


def _angle(self, out=None):
    _complexy(self)
    dt = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    return ew("angle", [self], dt, out=out)


native("aten::angle")(lambda self: _angle(self))
native("aten::angle.out")(lambda self, *, out: _angle(self, out=out))


def _conj_physical(self, out=None, inplace=False):
    _complexy(self)
    return _copy(self, out, inplace)


_reg3("conj_physical", "", _conj_physical)


# ---------------------------------------------------------------- nextafter, frexp

def _nextafter(self, other, out=None, inplace=False):
    _complexy(self, other)
    rt = _rt(self, other)
    if not rt.is_floating_point or rt == torch.float16:
        raise NotNative  # integers: torch's own error; float16 steps are not modelled
    if inplace and rt != self.dtype:
        raise cast_error(rt, self.dtype)
    return ew("nextafter", [self, other], rt, params=(float(_CODE[rt]),), out=out, inplace=inplace)


_reg3("nextafter", "", _nextafter)


def _frexp(self, mantissa=None, exponent=None):
    _complexy(self)
    if not self.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    if mantissa is not None and (mantissa.dtype != self.dtype or exponent.dtype != torch.int32):
        raise NotNative  # torch's own dtype errors
    m = ew("frexp_mantissa", [self], self.dtype, out=mantissa)
    e = ew("frexp_exponent", [self], torch.int32, compute_dtype=self.dtype, out=exponent)
    return m, e


native("aten::frexp.Tensor")(lambda self: _frexp(self))
native("aten::frexp.Tensor_out")(lambda self, *, mantissa, exponent: _frexp(self, mantissa, exponent))


# ---------------------------------------------------------------- gcd, lcm, shifts

def _int_binary(goop, with_width=False, bool_ok=False):
    def fn(self, other, out=None, inplace=False):
        _complexy(self, other)
        rt = _rt(self, other)
        if rt.is_floating_point or (rt == torch.bool and not bool_ok):
            raise NotNative  # torch's own "not implemented for" error
        if inplace and rt != self.dtype:
            raise cast_error(rt, self.dtype)
        params = (float(torch.iinfo(rt).bits),) if with_width else ()
        return ew(goop, [self, other], rt, compute_dtype=torch.int64, params=params, out=out, inplace=inplace)
    return fn


_reg3("gcd", "", _int_binary("gcd"))
_reg3("lcm", "", _int_binary("lcm"))


def _reg_shift(base: str, dunder: str):
    fn = _int_binary(base, with_width=True)
    for ov in ("Tensor", "Tensor_Scalar", "Scalar_Tensor"):
        native(f"aten::{base}.{ov}")(lambda a, b, _f=fn: _f(a, b))
        native(f"aten::{base}.{ov}_out")(lambda a, b, *, out, _f=fn: _f(a, b, out=out))
    for ov in ("Tensor", "Tensor_Scalar"):
        native(f"aten::{base}_.{ov}")(lambda a, b, _f=fn: _f(a, b, out=a, inplace=True))
    for ov in ("Tensor", "Scalar"):
        native(f"aten::__{dunder}__.{ov}")(lambda a, b, _f=fn: _f(a, b))
        native(f"aten::__i{dunder}__.{ov}")(lambda a, b, _f=fn: _f(a, b, out=a, inplace=True))


_reg_shift("bitwise_left_shift", "lshift")
_reg_shift("bitwise_right_shift", "rshift")


# ---------------------------------------------------------------- hardtanh of integers

def _hardtanh(self, min_val=-1, max_val=1, out=None, inplace=False):
    _complexy(self)
    if self.dtype == torch.bool:
        raise NotNative
    if not self.dtype.is_floating_point:
        # torch converts the bounds to the tensor's integer type (truncating) first
        min_val, max_val = int(min_val), int(max_val)
    return _clamp(self, min_val, max_val, out, inplace)


_reg3("hardtanh", "", _hardtanh)


# ---------------------------------------------------------------- division with rounding

def _div_rounding(self, other, rounding_mode, out=None, inplace=False):
    """div with rounding_mode for the dtypes elementwise._div leaves out: integers (exact
    integer division) and bfloat16/float16 (torch rounds every step to the dtype)."""
    from .elementwise import _div
    from .nn_ops import _int_divisor_check
    _complexy(self, other)
    rt = _rt(self, other)
    if rounding_mode not in ("trunc", "floor") or rt == torch.bool:
        raise NotNative  # torch's own errors
    if rt.is_floating_point and rt not in (torch.bfloat16, torch.float16):
        return _div(self, other, rounding_mode, out=out, inplace=inplace)
    if inplace and rt != self.dtype:
        raise cast_error(rt, self.dtype)
    if rt.is_floating_point:
        return ew(f"div_{rounding_mode}_reduced", [self, other], rt, params=(float(_CODE[rt]),),
                  out=out, inplace=inplace)
    _int_divisor_check(other)
    return ew(f"idiv_{rounding_mode}", [self, other], rt, compute_dtype=torch.int64, out=out, inplace=inplace)


native("aten::div.Tensor_mode", "aten::div.Scalar_mode")(
    lambda self, other, *, rounding_mode: _div_rounding(self, other, rounding_mode))
native("aten::div.out_mode", "aten::div.Scalar_mode_out")(
    lambda self, other, *, rounding_mode, out: _div_rounding(self, other, rounding_mode, out=out))
native("aten::div_.Tensor_mode", "aten::div_.Scalar_mode")(
    lambda self, other, *, rounding_mode: _div_rounding(self, other, rounding_mode, out=self, inplace=True))


def _floor_divide(self, other, out=None, inplace=False):
    return _div_rounding(self, other, "floor", out=out, inplace=inplace)


native("aten::floor_divide", "aten::floor_divide.Scalar")(lambda self, other: _floor_divide(self, other))
native("aten::floor_divide.out", "aten::floor_divide.Scalar_out")(
    lambda self, other, *, out: _floor_divide(self, other, out=out))
native("aten::floor_divide_.Tensor", "aten::floor_divide_.Scalar")(
    lambda self, other: _floor_divide(self, other, out=self, inplace=True))


# ---------------------------------------------------------------- integer pow, pow.Scalar

def _pow(self, exponent, out=None, inplace=False):
    """pow of any real operands: floats through Go's pow, integers by exact integer power."""
    from .elementwise import _pow_tt, _pow_ts, _pow_st
    _complexy(self, exponent)
    rt = _rt(self, exponent)
    if inplace and rt != self.dtype:
        raise cast_error(rt, self.dtype)
    if rt.is_floating_point:
        if isinstance(self, torch.Tensor):
            if isinstance(exponent, torch.Tensor):
                return _pow_tt(self, exponent, out=out, inplace=inplace)
            return _pow_ts(self, exponent, out=out, inplace=inplace)
        return _pow_st(self, exponent, out=out)  # a Python number base
    if rt == torch.bool:
        raise NotNative
    if not isinstance(exponent, torch.Tensor) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return ew("ipow", [self, exponent], rt, compute_dtype=torch.int64, out=out, inplace=inplace)


native("aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar", "aten::pow.Scalar")(lambda a, b: _pow(a, b))
native("aten::pow.Tensor_Tensor_out", "aten::pow.Tensor_Scalar_out", "aten::pow.Scalar_out")(
    lambda a, b, *, out: _pow(a, b, out=out))
native("aten::pow_.Tensor", "aten::pow_.Scalar")(lambda a, b: _pow(a, b, out=a, inplace=True))


# ---------------------------------------------------------------- prelu

@native("aten::_prelu_kernel")
def _prelu_kernel(self, weight):
    _complexy(self, weight)
    rt = _rt(self, weight)
    if not rt.is_floating_point:
        raise NotNative
    return ew("prelu", [self, weight], rt)


@native("aten::_prelu_kernel_backward")
def _prelu_kernel_backward(grad_output, self, weight):
    """(grad_input, grad_weight), both of the broadcast shape: autograd sums grad_weight
    down to weight's shape, as for CPU's kernel."""
    _complexy(grad_output, self, weight)
    rt = _rt(self, weight)
    if not rt.is_floating_point or grad_output.dtype != rt:
        raise NotNative
    gi = ew("prelu_bwd_input", [grad_output, self, weight], rt)
    gw = ew("prelu_bwd_weight", [grad_output, self], rt)
    return gi, gw


# ---------------------------------------------------------------- odds and ends

@native("aten::_efficientzerotensor")
def _efficientzerotensor(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """The zero gradient of ops like sgn: materialized as zeros on the device (the ZeroTensor
    dispatch key is a CPU/CUDA memory optimisation; autograd only needs the values)."""
    if layout not in (None, torch.strided) or pin_memory:
        raise NotNative
    return torch.zeros(size, dtype=dtype or torch.get_default_dtype(), device=device or "hpu")


@native("aten::logit_")
def logit_(self, eps=None):
    from .nn_ops import logit_ as _logit_float
    if not self.dtype.is_floating_point and not self.is_complex():
        raise cast_error(torch.get_default_dtype(), self.dtype)
    return _logit_float(self, eps)


def _reg_huber_delta_check():
    from .reduction import huber_loss

    @native("aten::huber_loss")
    def huber_loss_checked(self, target, reduction=1, delta=1.0):
        if not delta > 0:
            raise RuntimeError("huber_loss does not support non-positive values for delta.")
        return huber_loss(self, target, reduction, delta)


_reg_huber_delta_check()


@native("aten::log_sigmoid_forward.output")
def log_sigmoid_forward_output(self, *, output, buffer):
    """log_sigmoid(out=): the functional lowering's two results written to the outs."""
    from .nn_ops import log_sigmoid_forward
    res, buf = log_sigmoid_forward(self)
    output.resize_(res.shape).copy_(res)
    buffer.resize_(buf.shape).copy_(buf)
    return output, buffer
