"""Special functions lowered to Go (kernels/special.go, kernels/special_poly.go): the gamma
family (digamma, polygamma, mvlgamma, zeta, igamma/igammac), Bessel and modified Bessel
functions, Airy Ai, the error-function family (erfcx, ndtri, log_ndtr), entr, xlog1py and
the orthogonal polynomials of torch.special.

All are floating ops: integer and bool inputs compute in the default float dtype, as torch
does; in-place forms on integer tensors go to torch, which raises its own error. The
backward formulas (derivatives.yaml) compose these same ops, so gradients stay native.
"""
from __future__ import annotations

import torch

from .elementwise import ew, _complexy, _float_rt, _exists, _reg3, _unary_float
from .registry import native, NotNative
from .. import _native

_CODE = _native.DTYPE_CODE

# aten unary op -> Go "ew.<name>"
_UNARY = {
    "digamma": "digamma", "special_digamma": "digamma", "special_psi": "digamma",
    "i0": "i0", "special_i0": "i0", "special_i0e": "i0e", "special_i1": "i1", "special_i1e": "i1e",
    "special_bessel_j0": "bessel_j0", "special_bessel_j1": "bessel_j1",
    "special_bessel_y0": "bessel_y0", "special_bessel_y1": "bessel_y1",
    "special_modified_bessel_i0": "i0", "special_modified_bessel_i1": "i1",
    "special_modified_bessel_k0": "modified_bessel_k0", "special_modified_bessel_k1": "modified_bessel_k1",
    "special_scaled_modified_bessel_k0": "scaled_modified_bessel_k0",
    "special_scaled_modified_bessel_k1": "scaled_modified_bessel_k1",
    "special_spherical_bessel_j0": "spherical_bessel_j0", "special_airy_ai": "airy_ai",
    "special_erfcx": "erfcx", "special_ndtri": "ndtri", "special_log_ndtr": "log_ndtr",
    "special_entr": "entr",
}
for _aten, _go in _UNARY.items():
    _reg3(_aten, "", _unary_float(_go))


# ---------------------------------------------------------------- binary float functions

def _binary(goop: str, dtype_param: bool = False):
    """(self, other) -> float result; either operand may be a Python number. With
    dtype_param the Go op is told the result's dtype code (its reduced-precision rounding)."""
    def fn(self, other, out=None, inplace=False):
        _complexy(self, other)
        rt = _float_rt(self, other)
        if inplace and rt != self.dtype:
            raise NotNative  # torch's "result type can't be cast" error
        params = (float(_CODE[rt]),) if dtype_param and rt in _CODE else ()
        return ew(goop, [self, other], rt, params=params, out=out, inplace=inplace)
    return fn


def _reg_binary(base: str, goop: str, first: str, second: str, dtype_param: bool = False) -> None:
    """Register an aten binary float op with its Scalar overloads (named first/second)."""
    fn = _binary(goop, dtype_param)
    for ov in ("default", f"{first}_scalar", f"{second}_scalar"):
        name = f"aten::{base}" + ("" if ov == "default" else f".{ov}")
        if _exists(name):
            native(name)(lambda a, b, _f=fn: _f(a, b))
    for ov in ("out", f"{first}_scalar_out", f"{second}_scalar_out"):
        name = f"aten::{base}.{ov}"
        if _exists(name):
            native(name)(lambda a, b, *, out, _f=fn: _f(a, b, out=out))
    if _exists(f"aten::{base}_"):
        native(f"aten::{base}_")(lambda a, b, _f=fn: _f(a, b, out=a, inplace=True))


_reg_binary("special_zeta", "zeta", "self", "other")
_reg_binary("special_xlog1py", "xlog1py", "self", "other", dtype_param=True)
_reg_binary("igamma", "igamma", "self", "other")
_reg_binary("igammac", "igammac", "self", "other")
for _p in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
           "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"):
    _reg_binary(f"special_{_p}", _p, "x", "n")


# ---------------------------------------------------------------- polygamma, mvlgamma

def _polygamma(n, self, out=None, inplace=False):
    _complexy(self)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    dt = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    if inplace and dt != self.dtype:
        raise NotNative
    return ew("polygamma", [self], dt, params=(float(n),), out=out, inplace=inplace)


native("aten::polygamma")(lambda n, self: _polygamma(n, self))
native("aten::polygamma.out")(lambda n, self, *, out: _polygamma(n, self, out=out))
native("aten::polygamma_")(lambda self, n: _polygamma(n, self, out=self, inplace=True))
native("aten::special_polygamma")(lambda n, self: _polygamma(n, self))
native("aten::special_polygamma.out")(lambda n, self, *, out: _polygamma(n, self, out=out))


def _mvlgamma(self, p, out=None, inplace=False):
    _complexy(self)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    dt = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    if inplace and dt != self.dtype:
        raise NotNative
    return ew("mvlgamma", [self], dt, params=(float(p),), out=out, inplace=inplace)


native("aten::mvlgamma")(lambda self, p: _mvlgamma(self, p))
native("aten::mvlgamma.out")(lambda self, p, *, out: _mvlgamma(self, p, out=out))
native("aten::mvlgamma_")(lambda self, p: _mvlgamma(self, p, out=self, inplace=True))
if _exists("aten::special_multigammaln"):
    native("aten::special_multigammaln")(lambda self, p: _mvlgamma(self, p))
