"""More elementwise ops lowered to Go (kernels/elementwise_more.go): the activations of
MobileNet-style models (hardswish, hardsigmoid, mish and their gradients), shrinkage,
threshold, the infinity tests attention masks use (isneginf), trigonometric and hyperbolic
functions and two-operand float functions. Dtypes a kernel does not serve raise NotNative
(the CPU fallback then runs torch's kernel, which also raises torch's own errors)."""
from __future__ import annotations

import torch

from .elementwise import ew, _reg3, _reg_bwd, _bwd, _rt, _complexy, _unary_float, _rounding
from .registry import native, NotNative
from .. import _native

_CODE = _native.DTYPE_CODE

_INT_CLASS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)


def _bool_test(goop):
    """A float predicate with a bool result; integer inputs have no inf/negative zero
    to find, so Go's int64 form is the constant answer (signbit: the sign)."""
    def fn(self, out=None, inplace=False):
        _complexy(self)
        cdt = self.dtype if self.dtype.is_floating_point else torch.int64
        if out is not None and out.dtype != torch.bool:
            raise NotNative  # torch's own error
        return ew(goop, [self], torch.bool, compute_dtype=cdt, out=out)
    return fn


for _n in ("isposinf", "isneginf", "signbit"):
    _reg3(_n, "", _bool_test(_n))
native("aten::isinf")(_bool_test("isinf"))


def _float_act(goop, params=lambda *a: ()):
    def fn(self, *args, out=None, inplace=False):
        _complexy(self)
        if not self.dtype.is_floating_point:
            raise NotNative
        return ew(goop, [self], self.dtype, params=params(*args), out=out, inplace=inplace)
    return fn


_reg3("hardswish", "", _float_act("hardswish"))
_reg3("hardsigmoid", "", _float_act("hardsigmoid"))
_reg3("mish", "", _float_act("mish"))
_reg3("hardshrink", "", _float_act("hardshrink", lambda lambd=0.5: (float(lambd),)))


def _softshrink_params(lambd=0.5):
    if float(lambd) < 0:
        raise NotNative  # torch raises its own error
    return (float(lambd),)


_reg3("softshrink", "", _float_act("softshrink", _softshrink_params))

_reg_bwd("hardsigmoid_backward", _bwd("hardsigmoid_backward"))
_reg_bwd("hardshrink_backward", _bwd("shrink_backward", lambda lambd: (float(lambd),)))
_reg_bwd("softshrink_backward", _bwd("shrink_backward", lambda lambd: (float(lambd),)))
_hardswish_bwd = _bwd("hardswish_backward")
native("aten::hardswish_backward")(lambda g, x: _hardswish_bwd(g, x))
native("aten::hardswish_backward.out")(lambda g, x, *, out: _hardswish_bwd(g, x, grad_input=out))
_mish_bwd = _bwd("mish_backward")
native("aten::mish_backward")(lambda g, x: _mish_bwd(g, x))


def _threshold(self, threshold, value, out=None, inplace=False):
    _complexy(self, threshold, value)
    if self.dtype == torch.bool or not isinstance(threshold, (int, float)) or not isinstance(value, (int, float)):
        raise NotNative
    if not self.dtype.is_floating_point and (isinstance(threshold, float) or isinstance(value, float)):
        raise NotNative  # torch's scalar-to-int conversion rules
    return ew("threshold", [self], self.dtype, params=(float(threshold), float(value)), out=out, inplace=inplace)


_reg3("threshold", "", _threshold)

for _n in ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp2", "log10", "erfc",
           "erfinv", "lgamma", "sinc", "deg2rad", "rad2deg"):
    _reg3(_n, "", _unary_float(_n))
_reg3("frac", "", _rounding("frac"))


def _nan_to_num(self, nan=None, posinf=None, neginf=None, out=None, inplace=False):
    if not self.dtype.is_floating_point:
        # integers have no NaN or inf: a copy, as torch makes
        if inplace:
            return self
        if out is not None:
            return out.resize_(self.shape).copy_(self)
        return self.clone()
    fi = torch.finfo(self.dtype)
    p = (0.0 if nan is None else float(nan), fi.max if posinf is None else float(posinf),
         fi.min if neginf is None else float(neginf))
    return ew("nan_to_num", [self], self.dtype, params=p, out=out, inplace=inplace)


_reg3("nan_to_num", "", _nan_to_num)


def _binary_float(goop, int_promotes: bool):
    """Two-operand float op; with int_promotes, integer operands compute in the default
    float dtype as torch's float ops do, else they go to torch (which rejects them)."""
    def fn(self, other, out=None, inplace=False):
        _complexy(self, other)
        rt = _rt(self, other)
        if not rt.is_floating_point:
            if not int_promotes or inplace:
                raise NotNative
            rt = torch.get_default_dtype()
        return ew(goop, [self, other], rt, out=out, inplace=inplace)
    return fn


_reg3("atan2", "", _binary_float("atan2", True))
_reg3("arctan2", "", _binary_float("atan2", True))
_reg3("hypot", "", _binary_float("hypot", False))
_reg3("logaddexp", "", _binary_float("logaddexp", False))
_reg3("logaddexp2", "", _binary_float("logaddexp2", False))
_copysign = _binary_float("copysign", True)
_reg3("copysign", "Tensor", _copysign)
_reg3("copysign", "Scalar", _copysign)
def _xlogy(self, other, out=None, inplace=False):
    _complexy(self, other)
    rt = _rt(self, other)
    if not rt.is_floating_point:
        if inplace:
            raise NotNative
        rt = torch.get_default_dtype()
    if rt not in _CODE:
        raise NotNative
    return ew("xlogy", [self, other], rt, params=(float(_CODE[rt]),), out=out, inplace=inplace)


native("aten::xlogy.Tensor", "aten::xlogy.Scalar_Self", "aten::xlogy.Scalar_Other")(lambda a, b: _xlogy(a, b))
native("aten::xlogy.OutTensor", "aten::xlogy.OutScalar_Self", "aten::xlogy.OutScalar_Other")(
    lambda a, b, *, out: _xlogy(a, b, out=out))
native("aten::xlogy_.Tensor", "aten::xlogy_.Scalar_Other")(lambda a, b: _xlogy(a, b, out=a, inplace=True))


def _fminmax(goop):
    def fn(self, other, out=None, inplace=False):
        _complexy(self, other)
        rt = _rt(self, other)
        cdt = torch.int64 if rt == torch.bool else None  # bool: or / and of the int values
        return ew(goop, [self, other], rt, compute_dtype=cdt, out=out, inplace=inplace)
    return fn


_reg3("fmax", "", _fminmax("fmax"))
_reg3("fmin", "", _fminmax("fmin"))


def _heaviside(self, values, out=None, inplace=False):
    _complexy(self, values)
    if not isinstance(values, torch.Tensor) or self.dtype != values.dtype:
        raise NotNative  # torch's error for mixed dtypes
    cdt = self.dtype if self.dtype.is_floating_point else torch.int64
    return ew("heaviside", [self, values], self.dtype, compute_dtype=cdt, out=out, inplace=inplace)


_reg3("heaviside", "", _heaviside)


def _rsub(self, other, alpha=1, out=None):
    """other - alpha * self: the native add with the operands swapped and alpha negated."""
    from .elementwise import _add
    return _add(other, self, alpha, out=out, sub=True)


native("aten::rsub.Tensor", "aten::rsub.Scalar")(lambda self, other, alpha=1: _rsub(self, other, alpha))
native("aten::rsub.Tensor_out", "aten::rsub.Scalar_out")(
    lambda self, other, alpha=1, *, out: _rsub(self, other, alpha, out=out))
