"""Integer, reduced-float and mixed-dtype semantics as users hit them (uint8 images, int32 index
math, python scalars and 0-dim CPU tensors with hpu tensors), against CPU: same values and
dtypes, or the same exception. Eager here, lazy from the Makefile's second pass."""
from __future__ import annotations

import pytest
import torch

import habana_frameworks.torch.core as htcore
from habana_frameworks.torch._ops import fallback


def _same(fn, *args):
    """fn on CPU and on hpu copies (tensors moved, the device name "cpu" replaced by "hpu"):
    equal results (values, dtype, shape) or the same exception type; no CPU fallback on the
    hpu side."""
    try:
        ref, ref_exc = fn(*args), None
    except Exception as e:  # noqa: BLE001 - compared below
        ref, ref_exc = None, e
    before = fallback.counts()
    try:
        out, exc = fn(*(a.to("hpu") if isinstance(a, torch.Tensor) else "hpu" if a == "cpu" else a
                        for a in args)), None
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


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int32, torch.int64])
@pytest.mark.parametrize("to", [torch.float32, torch.bfloat16, torch.float64])
def test_cumsum_to_float_of_integer_input_is_native(dtype, to):
    """DETR's position embedding: mask.cumsum(1, dtype=torch.float32) on a bool mask."""
    x = (torch.arange(60).view(3, 4, 5) % 3 != 1).to(dtype)
    for dim in (0, 1, -1):
        _same(lambda t: t.cumsum(dim, dtype=to), x)


ARANGE = [(-24, 24, 1.0), (11.0, -13.0, -1), (12.0, -11.0, -2), (0.5, 7.9, 1.7), (-3.7, 4.2, 2.9),
          (-2.5, 3, 1), (1.9, 20.2, 3.99), (0, 5.5, 1), (0, 16, 1.0)]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
@pytest.mark.parametrize("bounds", ARANGE, ids=str)
def test_arange_integral_dtype_with_float_bounds(bounds, dtype):
    """Funnel's torch.arange(-n, n, 1.0, dtype=torch.long): float bounds truncate to int64 for
    the values; the length is int64's integer formula for int64 and ceil((end-start)/step) of
    the given values for every other dtype, as on CPU."""
    start, end, step = bounds
    if dtype == torch.uint8 and min(start, end) < 0:
        pytest.skip("negative values in uint8")
    _same(lambda dev: torch.arange(start, end, step, dtype=dtype, device=dev), "cpu")


OUT_RESIZE = {
    "add": lambda x, out: torch.add(x, 1, out=out),
    "exp": lambda x, out: torch.exp(x, out=out),
    "sum dim": lambda x, out: torch.sum(x, 0, out=out),
    "mean dim": lambda x, out: torch.mean(x, 1, out=out),
    # The matrix products: one warning each, as on CPU (not one more from a meta check).
    "mm": lambda x, out: torch.mm(x, x.t(), out=out),
    "bmm": lambda x, out: torch.bmm(x[None], x.t()[None], out=out),
    "matmul": lambda x, out: torch.matmul(x, x.t(), out=out),
    "addmm": lambda x, out: torch.addmm(x[:, 0], x, x.t(), out=out),
    "baddbmm": lambda x, out: torch.baddbmm(x[:, 0], x[None], x.t()[None], out=out),
    "mv": lambda x, out: torch.mv(x, x[0], out=out),
    "addmv": lambda x, out: torch.addmv(x[:, 0], x, x[0], out=out),
    "dot": lambda x, out: torch.dot(x[0], x[1], out=out),
}


@pytest.mark.parametrize("name", sorted(OUT_RESIZE))
def test_out_of_the_wrong_size_is_resized_with_cpus_warning(name):
    import warnings
    fn = OUT_RESIZE[name]
    x = torch.randn(10, 4)
    for out_shape in ((3,), (0,)):
        got = {}
        for dev in ("cpu", "hpu"):
            out = torch.empty(out_shape, device=dev)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                res = fn(x.to(dev), out)
            got[dev] = (res.cpu(), [str(m.message).split(" (Triggered internally")[0] for m in w
                                    if "resized" in str(m.message)])
            assert res is out
        torch.testing.assert_close(got["hpu"][0], got["cpu"][0], rtol=1e-6, atol=1e-6)
        assert got["hpu"][1] == got["cpu"][1], (out_shape, got["hpu"][1], got["cpu"][1])
