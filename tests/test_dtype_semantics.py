"""Integer, reduced-float and mixed-dtype semantics as users hit them (uint8 images, int32 index
math, python scalars and 0-dim CPU tensors with hpu tensors), against CPU: same values and
dtypes, or the same exception. Eager here, lazy from the Makefile's second pass."""
from __future__ import annotations

import pytest
import torch

import habana_frameworks.torch.core as htcore
from habana_frameworks.torch._ops import fallback


def _same(fn, *args):
    """fn on CPU and on hpu copies: equal results (values, dtype, shape) or the same
    exception type; no CPU fallback on the hpu side."""
    try:
        ref, ref_exc = fn(*args), None
    except Exception as e:  # noqa: BLE001 - compared below
        ref, ref_exc = None, e
    before = fallback.counts()
    try:
        out, exc = fn(*(a.to("hpu") if isinstance(a, torch.Tensor) else a for a in args)), None
        htcore.mark_step()
    except Exception as e:  # noqa: BLE001
        out, exc = None, e
    if ref_exc is not None or exc is not None:
        assert type(exc) is type(ref_exc), (ref_exc, exc)
        return
    assert fallback.counts() == before
    assert out.dtype == ref.dtype and out.shape == ref.shape
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, rtol=0, atol=0)


U8 = torch.tensor([0, 1, 44, 200, 255], dtype=torch.uint8)

# python scalars outside the tensor's range are cast as C casts them (uint8 + 300 adds 44),
# where the bridge used to raise "value cannot be converted ... without overflow"
OUT_OF_RANGE = {
    "u8 + 300": lambda x: x + 300,
    "u8 - 300": lambda x: x - 300,
    "u8 - -300": lambda x: x - (-300),
    "u8 eq 300": lambda x: x.eq(300),
    "u8 lt 300": lambda x: x.lt(300),
    "u8 remainder 300": lambda x: x.remainder(300),
    "u8 fmod 300": lambda x: torch.fmod(x, 300),
    "u8 & 300": lambda x: x.bitwise_and(300),
    "u8 % -300": lambda x: x % -300,
    "i8 + 1000": lambda x: x.to(torch.int8) + 1000,
    "i32 + 2**40": lambda x: x.int() + 2**40,
    "i32 * 2**40": lambda x: x.int() * 2**40,
    "f16 + 70000": lambda x: x.half() + 70000,
    "f16 * 1e6": lambda x: x.half() * 1e6,
    "bf16 + 1e39": lambda x: x.bfloat16() + 1e39,
    "f32 + 1e39": lambda x: x.float() + 1e39,
    "u8 in place += 300": lambda x: x.clone().add_(300),
}


@pytest.mark.parametrize("name", sorted(OUT_OF_RANGE))
def test_python_scalar_outside_dtype_range(name):
    _same(OUT_OF_RANGE[name], U8)


A = torch.tensor([[-7, -6, -1, 0, 5, 7], [9, -9, 13, -13, 1, -2]], dtype=torch.int32)
B = torch.tensor([[2, -4, 3, -3, -2, 7], [4, 4, -5, -5, 3, -1]], dtype=torch.int32)
INT_OPS = {
    "floor_divide": lambda a, b: torch.floor_divide(a, b),
    "div trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "true div": lambda a, b: a / b,
    "remainder": lambda a, b: torch.remainder(a, b),
    "fmod": lambda a, b: torch.fmod(a, b),
    "// -3": lambda a, b: a // -3,
    "% -3": lambda a, b: a % -3,
    "shifts": lambda a, b: torch.stack([a << 2, a >> 1, a >> b.abs(), a << b.abs()]),
    "bitwise": lambda a, b: torch.stack([a & b, a | b, a ^ b, ~a]),
    "int // 0 raises": lambda a, b: a // torch.zeros_like(a),
    "int % 0 raises": lambda a, b: a % torch.zeros_like(a),
    "mean raises": lambda a, b: a.mean(),
    "add_ float raises": lambda a, b: a.clone().add_(1.5),
    "+ 0-dim f32 cpu": lambda a, b: a + torch.tensor(1.5),
    "* 0-dim i64 cpu": lambda a, b: a * torch.tensor(3),
    "where float scalar": lambda a, b: torch.where(a > 0, a, 0.5),
}


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8])
@pytest.mark.parametrize("name", sorted(INT_OPS))
def test_integer_semantics_match_cpu(name, dtype):
    _same(INT_OPS[name], A.to(dtype), B.to(dtype))
