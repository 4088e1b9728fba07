"""Index and range factories on native hpu ops: logspace, triu_indices / tril_indices and
repeat_interleave's index form (repeat_interleave.Tensor, which the self_Tensor and self_int
forms reach through torch's composite).

logspace follows torch's CPU kernel (aten/src/ATen/native/RangeFactories.cpp): the exponents
are start + step*i for the first half and end - step*(steps-1-i) for the second, in float64,
with start/end first rounded to the result's dtype (truncated for integers, whose base is
rounded to float32), and base**exponent in float64 rounded once to the result's dtype.
"""
from __future__ import annotations

import torch

from .registry import NotNative, native

aten = torch.ops.aten
_SCALAR_TYPE = {torch.float32: "Float", torch.float64: "Double", torch.bfloat16: "BFloat16",
                torch.float16: "Half", torch.int64: "Long", torch.int32: "Int", torch.int16: "Short",
                torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool"}
_INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def _num(v):
    return v.item() if isinstance(v, torch.Tensor) else v


def _round_to(v, dtype):
    """A host scalar rounded to dtype, as Scalar::to<scalar_t> does (a scalar, not data)."""
    return torch.tensor(v, dtype=torch.float64).to(dtype).item()


def _resize(out: torch.Tensor, n: int) -> None:
    if out.shape != (n,):
        out.resize_((n,))


# ------------------------------------------------------------------------------------- logspace

@native("aten::logspace.out")
def logspace_out(start, end, steps, base=10.0, *, out):
    start, end = _num(start), _num(end)
    if any(isinstance(x, complex) for x in (start, end)) or out.dtype not in _INTS + _FLOATS:
        if out.dtype == torch.bool:
            raise RuntimeError("\"logspace_cpu\" not implemented for 'Bool'")
        raise NotNative
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    _resize(out, steps)
    if steps == 0:
        return out
    dev = out.device
    base = float(base)
    if steps == 1:
        val = torch.pow(torch.full((), base, dtype=torch.float64, device=dev),
                        torch.full((), float(start), dtype=torch.float64, device=dev))
        return out.copy_(val.expand(1))
    if out.dtype in _INTS:
        s, e = int(start), int(end)
        diff = float(e - s)
        base = _round_to(base, torch.float32)
    else:
        s, e = _round_to(start, out.dtype), _round_to(end, out.dtype)
        diff = _round_to(e - s, out.dtype)  # scalar_end - scalar_start in scalar_t
    step = diff / (steps - 1)
    i = torch.arange(steps, dtype=torch.float64, device=dev)
    lo = i * step + s
    hi = torch.full((), float(e), dtype=torch.float64, device=dev) - (
        torch.full((), float(steps - 1), dtype=torch.float64, device=dev) - i) * step
    expo = torch.where(i < steps // 2, lo, hi)
    val = torch.pow(torch.full((), base, dtype=torch.float64, device=dev), expo)
    return out.copy_(val)


# ------------------------------------------------------------------------ triu/tril_indices

def _tri_indices(name, upper, row, col, offset, dtype, layout, device):
    if device is None or torch.device(device).type != "hpu":
        raise NotNative
    if layout not in (None, torch.strided):
        raise NotNative
    dtype = torch.int64 if dtype is None else dtype
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    if dtype not in (torch.int32, torch.int64):
        raise RuntimeError(f"\"{name}\" not implemented for '{_SCALAR_TYPE.get(dtype, dtype)}'")
    r = torch.arange(row, dtype=torch.int64, device=device).view(-1, 1)
    c = torch.arange(col, dtype=torch.int64, device=device).view(1, -1)
    diag = c - r
    keep = diag >= offset if upper else diag <= offset
    # nonzero lists the kept (row, col) pairs in row-major order, torch's order
    return torch.nonzero(keep).t().contiguous().to(dtype)


@native("aten::triu_indices")
def triu_indices(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _tri_indices("triu_indices", True, row, col, offset, dtype, layout, device)


@native("aten::tril_indices")
def tril_indices(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _tri_indices("tril_indices", False, row, col, offset, dtype, layout, device)


# ------------------------------------------------------------------------ repeat_interleave

@native("aten::repeat_interleave.Tensor")
def repeat_interleave(repeats, *, output_size=None):
    if repeats.dim() != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.dtype not in (torch.int32, torch.int64):
        raise RuntimeError(f"\"repeat_interleave_cpu\" not implemented for "
                           f"'{_SCALAR_TYPE.get(repeats.dtype, repeats.dtype)}'")
    dev = repeats.device
    n = repeats.shape[0]
    if n == 0:
        if output_size not in (None, 0):
            raise RuntimeError("allocated size does not match required size")
        return torch.empty(0, dtype=repeats.dtype, device=dev)
    ends = torch.cumsum(repeats, 0, dtype=torch.int64)
    # one read-back for both of CPU's checks (the sign and the total size)
    lowest, total = torch.stack([repeats.min().to(torch.int64), ends[-1]]).tolist()
    if lowest < 0:
        raise RuntimeError("repeats can not be negative")
    if output_size is not None and output_size != total:
        raise RuntimeError("allocated size does not match required size")
    if total == 0:
        return torch.empty(0, dtype=repeats.dtype, device=dev)
    # a 1 where each index's run starts (runs of zero length start where the next one does,
    # so a position counts every index that started at or before it); the running count
    # minus one is the index
    starts = ends - repeats.to(torch.int64)
    inside = starts < total
    marks = torch.zeros(total, dtype=torch.int64, device=dev)
    marks.index_add_(0, starts.clamp(max=total - 1), inside.to(torch.int64))
    return (torch.cumsum(marks, 0) - 1).to(repeats.dtype)


@native("aten::repeat_interleave.Tensor_out")
def repeat_interleave_out(repeats, *, output_size=None, out):
    r = repeat_interleave(repeats, output_size=output_size)
    if out.dtype != r.dtype:
        raise NotNative
    if out.shape != r.shape:
        out.resize_(r.shape)
    return out.copy_(r)
