"""Elementwise ops (unary, binary, ternary, comparisons, activations and their backward) lowered to Go.

Every op goes through `ew`: torch's broadcasting and type promotion are computed here, the
operands are passed to the Go op "ew.<name>" as same-shape (stride-0 expanded) views, and Go
computes in float32 (float32/bfloat16/float16), float64 or int64 and stores to the output
dtype. Python scalars become 0-dim host tensors: Go reads host memory directly.
"""
from __future__ import annotations

import math

import torch

from .. import _native
from .fallback import _hpu_index, type_name as _tname
from .out_resize import resize_out
from .registry import native, NotNative

_CODE = _native.DTYPE_CODE
_REDUCED = (torch.bfloat16, torch.float16)
_FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_F32_CLASS = (torch.float32, torch.bfloat16, torch.float16)  # Go computes these in float32
Tensor = torch.Tensor

# Host scalars made or cast by the lowerings, by (value, dtypes): torch.tensor() costs
# ~2 us and Tensor.to() ~1.3 us, which for optimizer steps (a few fixed scalars used over
# and over) was a large share of each op. The tensors are only ever read (by Go, as 0-dim
# inputs), never written or returned. Zero and NaN are not cached: -0.0 == 0.0 would
# share an entry, and NaN never finds its own.
_SCALARS: dict[tuple, torch.Tensor] = {}
_PARAMS: dict[tuple, float] = {}
_CACHE_MAX = 512


def _cached(cache: dict, key: tuple, make):
    v = cache.get(key)
    if v is None:
        v = make()
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[key] = v
    return v


def _wrap(v, dtype=None) -> torch.Tensor:
    """A Python scalar as a 0-dim host tensor (a torch "wrapped number" for promotion)."""
    if isinstance(v, torch.Tensor):
        return v
    if isinstance(v, complex):
        raise NotNative
    if dtype is None:
        dtype = torch.bool if isinstance(v, bool) else torch.int64 if isinstance(v, int) else torch.float64
    if v == v:
        # zeros are keyed by their sign too (-0.0 == 0.0)
        key = (type(v), v, dtype) if v != 0 else (type(v), v, math.copysign(1.0, v), dtype)
        return _cached(_SCALARS, key, lambda: torch.tensor(v, dtype=dtype))
    return torch.tensor(v, dtype=dtype)


_BIG_INT = 1 << 53


def _scalar_operand(v, cdt: torch.dtype, keep_scalars: bool) -> torch.Tensor:
    """A Python number operand as the 0-dim host tensor ew passes to Go: what _wrap and the
    cast in ew's general path make of it, built (and cached) in one step."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, int) and not
                                                                    -_BIG_INT <= v <= _BIG_INT):
        t = _wrap(v)
        if t.dtype == cdt or (keep_scalars and not (t.dtype == torch.float64 and cdt in _F32_CLASS)):
            return t
        return _host_to(t, torch.float32 if keep_scalars else cdt)
    if keep_scalars:
        if isinstance(v, int):
            return _wrap(v)
        return _wrap_cast(v, torch.float32 if cdt in _F32_CLASS else torch.float64)
    # |v| <= 2**53: v -> double -> cdt rounds as int64 -> cdt does
    return _wrap_cast(v, cdt)


def _wrap_cast(v, dtype: torch.dtype) -> torch.Tensor:
    """_wrap(v, dtype), and for a value outside dtype's range the cast torch's CPU kernels
    apply to a wrapped-number operand (uint8 + 300 adds 44, float16 + 70000 is inf) where
    torch.tensor(v, dtype) would raise an overflow error CPU does not."""
    try:
        return _wrap(v, dtype)
    except RuntimeError:
        return _host_to(_wrap(v), dtype)


def _host_to(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """t.to(dtype) for a host tensor; 0-dim ones (scalars) from the cache."""
    if t.dim() == 0:
        v = t.item()
        if v != 0 and v == v:
            return _cached(_SCALARS, (t.dtype, v, dtype), lambda: t.to(dtype))
    return t.to(dtype)


def _scalar_param(v, cdt: torch.dtype) -> float:
    """A scalar parameter as torch's kernel sees it: cast to the compute dtype."""
    if isinstance(v, torch.Tensor):
        v = v.item()
    if isinstance(v, complex):
        raise NotNative
    if cdt in _REDUCED:
        f = float(v)
        if f != 0 and f == f:
            return _cached(_PARAMS, (f, cdt), lambda: float(torch.tensor(f, dtype=cdt)))
        return float(torch.tensor(f, dtype=cdt))
    return float(v)


def _check_out(out: torch.Tensor, result_dtype: torch.dtype, shape, inplace: bool, opname: str):
    odt = out.dtype
    if odt not in _CODE:
        raise NotNative
    if odt != result_dtype and not torch.can_cast(result_dtype, odt):
        raise RuntimeError(f"result type {_tname(result_dtype)} can't be cast to the desired output type "
                           f"{_tname(odt)}")
    if out.shape != shape:  # torch.Size and tuples compare as tuples
        if inplace:
            raise RuntimeError(f"output with shape {list(out.shape)} doesn't match the broadcast shape "
                               f"{list(shape)}")
        resize_out(out, shape)
    strides = out.stride()
    if 0 in strides:
        for sz, st in zip(out.shape, strides):
            if st == 0 and sz > 1:
                raise RuntimeError("unsupported operation: more than one element of the written-to tensor "
                                   "refers to a single memory location. Please clone() the tensor before "
                                   "performing the operation.")


def _overlaps_badly(out: torch.Tensor, t: torch.Tensor) -> bool:
    if t is out:
        return False  # the in-place case: exactly the same memory, element for element
    if t.is_cpu or _hpu_index(t.device) < 0 or t.numel() == 0:
        return False
    try:
        if t.untyped_storage().data_ptr() != out.untyped_storage().data_ptr():
            return False
    except Exception:
        return True
    if t.data_ptr() == out.data_ptr() and t.shape == out.shape and t.stride() == out.stride():
        return False
    # Views of one storage whose byte ranges are disjoint (a GRU's gate chunks) do not
    # overlap; anything else goes to the CPU fallback, which raises torch's error if any.
    return _span_overlaps(out, t)


def _span(t: torch.Tensor) -> tuple[int, int]:
    lo = t.data_ptr()
    ext = sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if n > 1)
    return lo, lo + (ext + 1) * t.element_size()


def _span_overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    a0, a1 = _span(a)
    b0, b1 = _span(b)
    if not (a0 < b1 and b0 < a1):
        return False
    if a.shape != b.shape or a.stride() != b.stride() or a.dtype != b.dtype:
        return True  # interleaved views of different shapes: not worth an exact answer
    d, es = b.data_ptr() - a.data_ptr(), a.element_size()
    if d % es:
        return True
    dims = sorted(((n, st) for n, st in zip(a.shape, a.stride()) if n > 1 and st > 0), key=lambda x: -x[1])
    return _offset_hits(d // es, dims)


def _offset_hits(d: int, dims: list, budget: list | None = None) -> bool:
    """Whether d = sum(i_k * s_k) with |i_k| < n_k for dims [(n_k, s_k)], strides descending:
    i.e. whether two same-shaped views d elements apart share an element (interleaved
    chunks of one buffer, such as an RNN's gates, do not)."""
    if budget is None:
        budget = [64]
    if not dims:
        return d == 0
    budget[0] -= 1
    if budget[0] < 0:
        return True  # conservative
    (n, st), rest = dims[0], dims[1:]
    inner = sum((m - 1) * t for m, t in rest)
    lo = max(-(n - 1), -((inner - d) // st))  # ceil((d - inner) / st)
    hi = min(n - 1, (d + inner) // st)
    return any(_offset_hits(d - i * st, rest, budget) for i in range(lo, hi + 1))


def _broadcast_shape(ins: list[torch.Tensor]) -> torch.Size:
    """torch.broadcast_shapes of the inputs, without its ~3.5 us in the common cases:
    equal shapes, and 0-dim operands (scalars), which broadcast to any shape."""
    shape = ins[0].shape
    for t in ins[1:]:
        s = t.shape
        if s == shape or not s:
            continue
        if not shape:
            shape = s
            continue
        return torch.broadcast_shapes(*(t.shape for t in ins))
    return shape


def ew(goop: str, inputs, result_dtype: torch.dtype, *, compute_dtype=None, params=(),
       out: torch.Tensor | None = None, inplace: bool = False, keep_scalars: bool = False,
       ref: torch.Tensor | None = None) -> torch.Tensor:
    """Run "ew.<goop>" over broadcast inputs; allocate (or check and resize) the output.

    This is the hot path of most ops (optimizer steps are nothing else), so the common
    case, same-shape hpu operands of the compute dtype, skips broadcasting, expand and
    casts; every other case takes the general steps."""
    if result_dtype not in _CODE:
        raise NotNative
    cdt = compute_dtype or result_dtype
    if cdt not in _CODE:
        raise NotNative
    ins = [t if isinstance(t, Tensor) else _scalar_operand(t, cdt, keep_scalars) for t in inputs]
    for t in ins:
        if t.dtype not in _CODE:
            raise NotNative
    shape = _broadcast_shape(ins)
    if out is not None:
        _check_out(out, result_dtype, shape, inplace, goop)
        for t in ins:
            if _overlaps_badly(out, t):
                raise NotNative
    else:
        if ref is None:
            ref = next((t for t in ins if not t.is_cpu and _hpu_index(t.device) >= 0), None)
        if ref is not None and ref.shape == shape:
            out = torch.empty_like(ref, dtype=result_dtype)
        else:
            dev = ref.device if ref is not None else torch.device("hpu")
            out = torch.empty(shape, dtype=result_dtype, device=dev)
    if out.numel() == 0:
        return out
    cast = [out]
    for t in ins:
        if t.dtype != cdt:
            if keep_scalars and t.dim() == 0:
                # Go computes float32/bf16/fp16 in float32 and converts a float64 operand to
                # float32 element by element on every chunk; the same conversion done once
                # here gives Go the same values on its fast stride-0 float32 path.
                if t.dtype == torch.float64 and cdt in _F32_CLASS and t.is_cpu:
                    t = _host_to(t, torch.float32)
            elif t.is_cpu:
                t = _host_to(t, cdt)
            elif _hpu_index(t.device) < 0 or cdt in _REDUCED:
                t = t.to(cdt)
        cast.append(t if t.shape == shape else t.expand(shape))
    _native.run("ew." + goop, cast, (_CODE[cdt],), params)
    return out


def _rt(*xs) -> torch.dtype:
    if len(xs) == 2:
        a, b = xs
        if isinstance(a, Tensor):
            # Same-dtype tensors promote to that dtype whatever their dims, and a Python int
            # or float leaves a floating tensor's dtype alone: skip result_type.
            if isinstance(b, Tensor):
                if a.dtype == b.dtype:
                    return a.dtype
            elif type(b) in (int, float) and a.dtype.is_floating_point:
                return a.dtype
    xs = [x for x in xs if x is not None]
    if len(xs) == 1:
        x = xs[0]
        return x.dtype if isinstance(x, torch.Tensor) else torch.result_type(torch.tensor(0), x)
    return torch.result_type(xs[0], xs[1])


def _float_rt(*xs) -> torch.dtype:
    dt = _rt(*xs)
    if not dt.is_floating_point:
        if dt == torch.complex64 or dt == torch.complex128:
            raise NotNative
        return torch.get_default_dtype()
    return dt


def _exists(name: str) -> bool:
    ns, _, rest = name.partition("::")
    base, _, overload = rest.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    return packet is not None and (overload or "default") in packet.overloads()


def _first(*names: str):
    for n in names:
        if _exists(n):
            return n
    return None


def _reg3(base: str, overload: str, fn):
    """Register functional, out= and in-place forms of an op family (those that exist).

    fn(args..., out=None, inplace=False) does the work."""
    ov = f".{overload}" if overload else ""
    f_name = f"aten::{base}{ov}"
    out_name = _first(f"aten::{base}.{overload}_out" if overload else f"aten::{base}.out", f"aten::{base}.out")
    in_name = _first(f"aten::{base}_{ov}", f"aten::{base}_.{overload.split('_')[-1]}" if overload else "")

    if _exists(f_name):
        native(f_name)(lambda *args, **kw: fn(*args, **kw))
    if out_name:
        native(out_name)(lambda *args, out, **kw: fn(*args, out=out, **kw))
    if in_name:
        native(in_name)(lambda self, *args, **kw: fn(self, *args, out=self, inplace=True, **kw))
    return fn


# ---------------------------------------------------------------- binary arithmetic

def _complexy(*xs):
    for x in xs:
        if isinstance(x, complex) or (isinstance(x, torch.Tensor) and x.is_complex()):
            raise NotNative


def _add(self, other, alpha=1, out=None, inplace=False, sub=False):
    _complexy(self, other, alpha)
    rt = _rt(self, other)
    if sub and rt == torch.bool:
        raise NotNative  # torch raises its own error for bool subtraction
    if rt == torch.bool and not isinstance(alpha, bool) and alpha != 1:
        raise NotNative
    if isinstance(alpha, float) and not rt.is_floating_point:
        raise NotNative
    a = _scalar_param(alpha, rt) if rt.is_floating_point else float(alpha)
    if sub:
        a = -a
    return ew("add", [self, other], rt, params=(a,), out=out, inplace=inplace)


def _sub(self, other, alpha=1, out=None, inplace=False):
    return _add(self, other, alpha, out, inplace, sub=True)


for _ov in ("Tensor", "Scalar"):
    _reg3("add", _ov, _add)
    _reg3("sub", _ov, _sub)


def _mul(self, other, out=None, inplace=False):
    _complexy(self, other)
    rt = _rt(self, other)
    return ew("mul", [self, other], rt, out=out, inplace=inplace, keep_scalars=True)


_reg3("mul", "Tensor", _mul)
_reg3("mul", "Scalar", _mul)


def _div(self, other, rounding_mode=None, out=None, inplace=False):
    _complexy(self, other)
    if rounding_mode is None:
        rt = _float_rt(self, other)
        return ew("div", [self, other], rt, out=out, inplace=inplace, keep_scalars=True)
    rt = _rt(self, other)
    if not rt.is_floating_point or rt in _REDUCED:
        # integer division (and its ZeroDivisionError) stays with torch; bf16/fp16 round the
        # quotient before truncating, which torch does in its own dtype
        raise NotNative
    if rounding_mode not in ("trunc", "floor"):
        raise NotNative
    return ew("div_" + rounding_mode, [self, other], rt, out=out, inplace=inplace)


_reg3("div", "Tensor", _div)
_reg3("div", "Scalar", _div)


@native("aten::div.Tensor_mode", "aten::div.Scalar_mode")
def div_mode(self, other, *, rounding_mode):
    return _div(self, other, rounding_mode)


@native("aten::div.out_mode", "aten::div.Scalar_mode_out")
def div_out_mode(self, other, *, rounding_mode, out):
    return _div(self, other, rounding_mode, out=out)


@native("aten::div_.Tensor_mode", "aten::div_.Scalar_mode")
def div__mode(self, other, *, rounding_mode):
    return _div(self, other, rounding_mode, out=self, inplace=True)


def _maxmin(goop):
    def fn(self, other, out=None, inplace=False):
        _complexy(self, other)
        return ew(goop, [self, other], _rt(self, other), out=out, inplace=inplace)
    return fn


for _n in ("maximum", "minimum"):
    _f = _maxmin(_n)
    native(f"aten::{_n}")(lambda self, other, _f=_f: _f(self, other))
    native(f"aten::{_n}.out")(lambda self, other, *, out, _f=_f: _f(self, other, out=out))


# ---------------------------------------------------------------- pow

def _pow_ts(self, exponent, out=None, inplace=False):
    _complexy(self, exponent)
    rt = _rt(self, exponent)
    if not rt.is_floating_point:
        raise NotNative
    if isinstance(exponent, torch.Tensor):
        raise NotNative
    return ew("pow_scalar", [self], rt, params=(float(exponent),), out=out, inplace=inplace)


_reg3("pow", "Tensor_Scalar", _pow_ts)


def _pow_tt(self, exponent, out=None, inplace=False):
    _complexy(self, exponent)
    rt = _rt(self, exponent)
    if not rt.is_floating_point:
        raise NotNative
    if exponent.dim() == 0 and exponent.device.type == "cpu":
        return ew("pow_scalar", [self], rt, params=(_scalar_param(exponent, rt),), out=out, inplace=inplace)
    return ew("pow", [self, exponent], rt, out=out, inplace=inplace)


@native("aten::pow.Tensor_Tensor")
def pow_tt(self, exponent):
    return _pow_tt(self, exponent)


@native("aten::pow.Tensor_Tensor_out")
def pow_tt_out(self, exponent, *, out):
    return _pow_tt(self, exponent, out=out)


@native("aten::pow_.Tensor")
def pow_tt_(self, exponent):
    return _pow_tt(self, exponent, out=self, inplace=True)


@native("aten::pow_.Scalar")
def pow_ts_(self, exponent):
    return _pow_ts(self, exponent, out=self, inplace=True)


def _pow_st(self, exponent, out=None):
    """pow(Scalar self, Tensor exponent): the base is a scalar operand of ew.pow (a
    capturable optimizer's bias corrections, beta ** step, run native in HPU graphs)."""
    _complexy(self, exponent)
    rt = _rt(self, exponent)
    if not rt.is_floating_point:
        raise NotNative
    return ew("pow", [self, exponent], rt, out=out)


@native("aten::pow.Scalar")
def pow_st(self, exponent):
    return _pow_st(self, exponent)


@native("aten::pow.Scalar_out")
def pow_st_out(self, exponent, *, out):
    return _pow_st(self, exponent, out=out)


# ---------------------------------------------------------------- comparisons and logical

def _cmp(goop):
    def fn(self, other, out=None, inplace=False):
        _complexy(self, other)
        cdt = _rt(self, other)
        rdt = self.dtype if inplace else torch.bool
        return ew(goop, [self, other], rdt, compute_dtype=cdt, out=out, inplace=inplace)
    return fn


for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    _reg3(_n, "Tensor", _cmp(_n))
    _reg3(_n, "Scalar", _cmp(_n))


def _logical(goop):
    def fn(self, other, out=None, inplace=False):
        _complexy(self, other)
        cdt = _rt(self, other)
        rdt = self.dtype if inplace else torch.bool
        return ew(goop, [self, other], rdt, compute_dtype=cdt, out=out, inplace=inplace)
    return fn


for _n in ("logical_and", "logical_or", "logical_xor"):
    _reg3(_n, "", _logical(_n))


def _logical_not(self, out=None, inplace=False):
    _complexy(self)
    rdt = self.dtype if inplace else (out.dtype if out is not None else torch.bool)
    return ew("logical_not", [self], rdt, compute_dtype=self.dtype, out=out, inplace=inplace)


_reg3("logical_not", "", _logical_not)


def _bitwise(goop):
    def fn(self, other, out=None, inplace=False):
        rt = _rt(self, other)
        if rt.is_floating_point or rt.is_complex:
            raise NotNative  # torch raises its own error
        return ew(goop, [self, other], rt, out=out, inplace=inplace)
    return fn


for _n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    _reg3(_n, "Tensor", _bitwise(_n))
    _reg3(_n, "Scalar", _bitwise(_n))


def _bitwise_not(self, out=None, inplace=False):
    if self.dtype.is_floating_point or self.dtype.is_complex:
        raise NotNative
    return ew("bitwise_not", [self], self.dtype, params=(1.0 if self.dtype == torch.bool else 0.0,),
              out=out, inplace=inplace)


_reg3("bitwise_not", "", _bitwise_not)


@native("aten::isnan")
def isnan(self):
    _complexy(self)
    return ew("isnan", [self], torch.bool, compute_dtype=self.dtype if self.dtype.is_floating_point else torch.int64)


@native("aten::isfinite")
def isfinite(self):
    _complexy(self)
    return ew("isfinite", [self], torch.bool, compute_dtype=self.dtype if self.dtype.is_floating_point else torch.int64)


# ---------------------------------------------------------------- where / masked_fill

def _where(condition, self, other, out=None):
    _complexy(self, other)
    if condition.dtype not in (torch.bool, torch.uint8):
        raise NotNative
    rt = _rt(self, other)
    return ew("where", [condition, self, other], rt, out=out,
              ref=self if isinstance(self, torch.Tensor) and self.device.type == "hpu" else None)


@native("aten::where.self")
def where_self(condition, self, other):
    return _where(condition, self, other)


@native("aten::where.self_out")
def where_self_out(condition, self, other, *, out):
    return _where(condition, self, other, out=out)


@native("aten::where.ScalarOther")
def where_so(condition, self, other):
    return _where(condition, self, other)


@native("aten::where.ScalarSelf")
def where_ss(condition, self, other):
    return _where(condition, self, other)


_C_TYPE = {torch.float32: "float", torch.float64: "double", torch.bfloat16: "at::BFloat16",
           torch.float16: "at::Half", torch.int64: "int64_t", torch.int32: "int", torch.int16: "int16_t",
           torch.int8: "int8_t", torch.uint8: "uint8_t"}


def _masked_fill(self, mask, value, out=None, inplace=False):
    if isinstance(value, complex) and not self.is_complex():
        if self.dtype != torch.bool and value.imag != 0:
            raise RuntimeError(f"value cannot be converted to type {_C_TYPE.get(self.dtype, self.dtype)} "
                               "without overflow")
        value = bool(value) if self.dtype == torch.bool else value.real
    _complexy(self, value)
    if mask.dtype != torch.bool:
        raise NotNative
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                               f"with {value.dim()} dimension(s).")
        value = value.item()
    v = _wrap(value).to(self.dtype)
    if inplace:
        torch.broadcast_shapes(self.shape, mask.shape)
        return ew("where", [mask, v, self], self.dtype, out=self, inplace=True)
    return ew("where", [mask, v, self], self.dtype, ref=self)


@native("aten::masked_fill.Scalar", "aten::masked_fill.Tensor")
def masked_fill(self, mask, value):
    return _masked_fill(self, mask, value)


@native("aten::masked_fill_.Scalar", "aten::masked_fill_.Tensor")
def masked_fill_(self, mask, value):
    return _masked_fill(self, mask, value, inplace=True)


# ---------------------------------------------------------------- ternary optimizer ops

def _addcx(goop):
    def fn(self, tensor1, tensor2, value=1, out=None, inplace=False):
        _complexy(self, tensor1, tensor2, value)
        rt = torch.promote_types(_rt(self, tensor1), _rt(tensor1, tensor2))
        if goop == "addcdiv" and not rt.is_floating_point:
            raise NotNative
        if not rt.is_floating_point and goop == "addcmul" and isinstance(value, float):
            raise NotNative
        v = float(value) if not isinstance(value, torch.Tensor) else value.item()
        return ew(goop, [self, tensor1, tensor2], rt, params=(v,), out=out, inplace=inplace)
    return fn


_reg3("addcmul", "", _addcx("addcmul"))
_reg3("addcdiv", "", _addcx("addcdiv"))


def _lerp(self, end, weight, out=None, inplace=False):
    _complexy(self, end, weight)
    rt = _rt(self, end)
    if not rt.is_floating_point:
        raise NotNative
    if not isinstance(weight, torch.Tensor):
        weight = float(weight)  # ew makes it a host scalar of the compute precision
    return ew("lerp", [self, end, weight], rt, out=out, inplace=inplace, keep_scalars=True)


_reg3("lerp", "Scalar", _lerp)
_reg3("lerp", "Tensor", _lerp)


# ---------------------------------------------------------------- clamp family

def _clamp(self, min=None, max=None, out=None, inplace=False):
    _complexy(self, min, max)
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, torch.Tensor) or isinstance(max, torch.Tensor):
        rt = self.dtype
        for b in (min, max):
            if b is not None:
                rt = torch.promote_types(rt, _rt(self, b))
        lo = min if min is not None else self
        hi = max if max is not None else self
        return ew("clamp_t", [self, lo, hi], rt, params=(float(min is not None), float(max is not None)),
                  out=out, inplace=inplace)
    rt = self.dtype
    for b in (min, max):
        if b is not None:
            rt = torch.result_type(self, b)
    if rt == torch.bool:
        raise NotNative
    lo = 0.0 if min is None else float(min)
    hi = 0.0 if max is None else float(max)
    return ew("clamp", [self], rt, params=(lo, hi, float(min is not None), float(max is not None)),
              out=out, inplace=inplace)


_reg3("clamp", "", _clamp)
_reg3("clamp", "Tensor", _clamp)


def _clamp_min(self, min, out=None, inplace=False):
    return _clamp(self, min, None, out, inplace)


def _clamp_max(self, max, out=None, inplace=False):
    return _clamp(self, None, max, out, inplace)


_reg3("clamp_min", "", _clamp_min)
_reg3("clamp_max", "", _clamp_max)
_reg3("clamp_min", "Tensor", _clamp_min)
_reg3("clamp_max", "Tensor", _clamp_max)


def _hardtanh(self, min_val=-1, max_val=1, out=None, inplace=False):
    if not self.dtype.is_floating_point:
        raise NotNative
    return _clamp(self, min_val, max_val, out, inplace)


_reg3("hardtanh", "", _hardtanh)


# ---------------------------------------------------------------- unary math

def _unary_float(goop, int_ok=False):
    """Unary op whose result is floating (ints promote to the default dtype) unless int_ok."""
    def fn(self, out=None, inplace=False):
        _complexy(self)
        dt = self.dtype
        if not dt.is_floating_point:
            if int_ok:
                if dt == torch.bool:
                    raise NotNative
            elif inplace:
                raise NotNative
            else:
                dt = torch.get_default_dtype()
        return ew(goop, [self], dt, out=out, inplace=inplace)
    return fn


for _n in ("exp", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "erf", "reciprocal",
           "sigmoid", "tanh"):
    _reg3(_n, "", _unary_float(_n))
for _n in ("neg", "abs", "sign"):
    _reg3(_n, "", _unary_float(_n, int_ok=True))


def _rounding(goop):
    def fn(self, out=None, inplace=False):
        _complexy(self)
        if not self.dtype.is_floating_point:
            raise NotNative  # identity for ints; torch copies
        return ew(goop, [self], self.dtype, out=out, inplace=inplace)
    return fn


for _n in ("floor", "ceil", "trunc", "round"):
    _reg3(_n, "", _rounding(_n))


def _relu(self, out=None, inplace=False):
    _complexy(self)
    if self.dtype == torch.bool:
        raise NotNative
    return ew("relu", [self], self.dtype, out=out, inplace=inplace)


@native("aten::relu")
def relu(self):
    return _relu(self)


@native("aten::relu_")
def relu_(self):
    return _relu(self, out=self, inplace=True)


def _act(goop, params_fn):
    def fn(self, *args, out=None, inplace=False):
        if not self.dtype.is_floating_point:
            raise NotNative
        return ew(goop, [self], self.dtype, params=params_fn(self, *args), out=out, inplace=inplace)
    return fn


_GELU = {"none": 0.0, "tanh": 1.0}


def _gelu_params(self, approximate="none"):
    if approximate not in _GELU:
        raise RuntimeError("approximate argument must be either none or tanh.")
    return (_GELU[approximate],)


_gelu = _act("gelu", _gelu_params)


@native("aten::gelu")
def gelu(self, *, approximate="none"):
    return _gelu(self, approximate)


@native("aten::gelu.out")
def gelu_out(self, *, approximate="none", out):
    return _gelu(self, approximate, out=out)


@native("aten::gelu_")
def gelu_(self, *, approximate="none"):
    return _gelu(self, approximate, out=self, inplace=True)


_reg3("silu", "", _act("silu", lambda self: ()))
_reg3("leaky_relu", "", _act("leaky_relu", lambda self, negative_slope=0.01: (float(negative_slope),)))
_reg3("softplus", "", _act("softplus", lambda self, beta=1, threshold=20: (float(beta), float(threshold))))
_elu = _act("elu", lambda self, alpha=1, scale=1, input_scale=1: (float(alpha), float(scale), float(input_scale)))
_reg3("elu", "", _elu)


# ---------------------------------------------------------------- activation backward

def _bwd(goop, params_fn=lambda *a: ()):
    def fn(grad_output, x, *args, grad_input=None):
        _complexy(grad_output, x)
        rt = _rt(grad_output, x)
        if not rt.is_floating_point:
            raise NotNative
        return ew(goop, [grad_output, x], rt, params=params_fn(*args), out=grad_input, ref=grad_output)
    return fn


def _reg_bwd(name, fn):
    native(f"aten::{name}")(lambda *a, **k: fn(*a, **k))
    native(f"aten::{name}.grad_input")(lambda *a, grad_input, **k: fn(*a, grad_input=grad_input, **k))


_threshold_bwd = _bwd("threshold_backward", lambda threshold: (float(threshold),))


@native("aten::threshold_backward")
def threshold_backward(grad_output, self, threshold):
    return _threshold_bwd(grad_output, self, threshold)


@native("aten::threshold_backward.grad_input")
def threshold_backward_out(grad_output, self, threshold, *, grad_input):
    return _threshold_bwd(grad_output, self, threshold, grad_input=grad_input)


_reg_bwd("sigmoid_backward", _bwd("sigmoid_backward"))
_reg_bwd("tanh_backward", _bwd("tanh_backward"))
_reg_bwd("silu_backward", _bwd("silu_backward"))
_reg_bwd("hardtanh_backward", _bwd("hardtanh_backward", lambda lo, hi: (float(lo), float(hi))))
_reg_bwd("softplus_backward", _bwd("softplus_backward", lambda beta, th: (float(beta), float(th))))
_leaky_bwd = _bwd("leaky_relu_backward", lambda slope, self_is_result: (float(slope),))
_reg_bwd("leaky_relu_backward", _leaky_bwd)
_gelu_bwd = _bwd("gelu_backward", lambda approximate="none": _gelu_params(None, approximate))


@native("aten::gelu_backward")
def gelu_backward(grad_output, self, *, approximate="none"):
    return _gelu_bwd(grad_output, self, approximate)


@native("aten::gelu_backward.grad_input")
def gelu_backward_out(grad_output, self, *, approximate="none", grad_input):
    return _gelu_bwd(grad_output, self, approximate, grad_input=grad_input)


def _elu_bwd(grad_output, alpha, scale, input_scale, is_result, self_or_result, grad_input=None):
    if is_result and float(alpha) < 0:
        raise NotNative  # torch raises its own error
    f = _bwd("elu_backward", lambda *p: p)
    return f(grad_output, self_or_result, float(alpha), float(scale), float(input_scale),
             1.0 if is_result else 0.0, grad_input=grad_input)


native("aten::elu_backward")(_elu_bwd)
native("aten::elu_backward.grad_input")(
    lambda grad_output, alpha, scale, input_scale, is_result, self_or_result, *, grad_input:
    _elu_bwd(grad_output, alpha, scale, input_scale, is_result, self_or_result, grad_input))


# Ops whose CompositeImplicitAutograd decomposition would shadow the backend fallback (and
# round every intermediate in bf16): give them an explicit HPU kernel that routes to the
# native lowering like every other op.
_EXPLICIT = ("silu_backward",)
_explicit_lib = torch.library.Library("aten", "IMPL")


def _route(opname: str):
    from .registry import hpu_kernel, _resolve
    op = _resolve(f"aten::{opname}")

    def kernel(*args, **kwargs):
        return hpu_kernel(op, *args, **kwargs)
    return kernel


for _n in _EXPLICIT:
    _explicit_lib.impl(_n, _route(_n), "HPU")
