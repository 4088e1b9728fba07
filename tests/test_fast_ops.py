"""The glue's fast C++ kernels (csrc/hpu_fast_ops.cpp) against the Python lowerings they stand in for.

They must hand the Go core the very frame the Python path builds, so every result here is
compared bit for bit with the same call made with the fast kernels off, and with CPU."""
from __future__ import annotations

import contextlib

import pytest
import torch

from habana_frameworks.torch import _native
from habana_frameworks.torch._ops import fallback, registry

DTYPES = (torch.float32, torch.bfloat16)


@contextlib.contextmanager
def fast(on: bool):
    prev = _native.fast_ops(on)
    try:
        yield
    finally:
        _native.fast_ops(prev)


def bits(t: torch.Tensor) -> torch.Tensor:
    t = t.cpu()
    return t.view(torch.int16 if t.dtype == torch.bfloat16 else torch.int32)


def _rand(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 4 + 0.25).to(dtype)


# name -> fn(tensors...) computing the op; the operands are made by CASES below.
BINARY = {
    "add": lambda a, b: torch.add(a, b),
    "add_alpha": lambda a, b: torch.add(a, b, alpha=0.3),
    "add_int_alpha": lambda a, b: torch.add(a, b, alpha=3),
    "sub": lambda a, b: torch.sub(a, b, alpha=1.7),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "add_scalar": lambda a, b: a + 0.1,
    "add_int_scalar": lambda a, b: a + 3,
    "mul_scalar": lambda a, b: a * 0.999,
    "mul_int_scalar": lambda a, b: a * 3,
    "div_scalar": lambda a, b: a / 0.0316,
    "rsub_scalar": lambda a, b: 1 - a,
    "lerp": lambda a, b: torch.lerp(a, b, 0.1),
    "addcmul": lambda a, b: torch.addcmul(a, b, b, value=0.001),
    "addcdiv": lambda a, b: torch.addcdiv(a, b, b + 1, value=-0.01),
}
UNARY = ("exp", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "erf", "reciprocal",
         "sigmoid", "tanh", "neg", "abs")

# (shape of a, shape of b, transpose a): same shapes, broadcasting both ways, 0-dim, strided.
SHAPES = [((33, 70), (33, 70), False), ((8, 5, 6), (5, 1), False), ((5, 1), (3, 5, 7), False),
          ((4, 9), (), False), ((), (), False), ((70, 33), (33, 70), True), ((1,), (3,), False)]


def _operands(shape_a, shape_b, transpose, dtype, dev):
    a = _rand(shape_a, dtype, 1).to(dev)
    b = _rand(shape_b, dtype, 2).to(dev)
    return (a.t() if transpose else a), b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_python_path_bit_for_bit(name, dtype):
    fn = BINARY[name]
    for shape_a, shape_b, transpose in SHAPES:
        a, b = _operands(shape_a, shape_b, transpose, dtype, "hpu")
        with fast(False):
            want = fn(a, b)
        with fast(True):
            got = fn(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert torch.equal(bits(got), bits(want)), (name, shape_a, shape_b)
        ca, cb = _operands(shape_a, shape_b, transpose, dtype, "cpu")
        # bf16: CPU rounds alpha*b to bf16 before adding (one more rounding than Go), which
        # under cancellation is one ulp of the operands, not of the result.
        tol = {"atol": 1.6e-2, "rtol": 1.6e-2} if dtype == torch.bfloat16 else {}
        torch.testing.assert_close(got.cpu(), fn(ca, cb), equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_python_path_bit_for_bit(name, dtype):
    fn = getattr(torch, name)
    for shape in ((129, 31), (), (4, 0, 3)):
        x = (_rand(shape, dtype, 3) - 1.5).to("hpu")
        with fast(False):
            want = fn(x)
        with fast(True):
            got = fn(x)
        assert torch.equal(bits(got), bits(want)), (name, shape)
        torch.testing.assert_close(got.cpu(), fn(x.cpu()), equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_in_place_and_out_forms(dtype):
    """An optimizer's in-place chain (AdamW's ops) and out= with a preallocated output."""
    def step(p, g, m, v):
        p.mul_(1 - 1e-3 * 1e-2)
        m.lerp_(g, 0.1)
        v.mul_(0.999).addcmul_(g, g, value=0.001)
        denom = (v.sqrt() / 0.0316).add_(1e-8)
        p.addcdiv_(m, denom, value=-0.01)
        out = torch.empty_like(p)
        torch.mul(p, g, out=out)
        torch.sqrt(v, out=out.t().t())
        return p, m, v, out

    def run(on):
        ts = [_rand((64, 48), dtype, s).to("hpu") for s in range(4)]
        with fast(on):
            for _ in range(3):
                step(*ts)
        return ts

    for got, want in zip(run(True), run(False)):
        assert torch.equal(bits(got), bits(want))


def test_served_calls_are_counted_as_native():
    a = torch.ones(10, device="hpu")
    before = registry.native_counts().get("aten::mul", 0)
    fb = fallback.total()
    with fast(True):
        a * a
        a.mul_(2.0)
    assert registry.native_counts().get("aten::mul", 0) == before + 2
    assert fallback.total() == fb
    assert _native.fast_op_counts()["aten::mul"] >= 2


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("case", ["int", "mixed_dtype", "out_resized", "float64", "host_tensor_operand"])
def test_calls_it_does_not_serve_go_to_the_python_path(case):
    """Every other case of these ops is redispatched to the Python lowering (and its CPU
    fallback) and computes what CPU computes."""
    def make(dev):
        if case == "int":
            return lambda: torch.arange(12, device=dev).view(3, 4) * torch.arange(4, device=dev)
        if case == "mixed_dtype":
            return lambda: torch.ones(3, device=dev) + torch.ones(3, dtype=torch.bfloat16, device=dev)
        if case == "float64":
            return lambda: torch.ones(3, dtype=torch.float64, device=dev).exp()
        if case == "host_tensor_operand":
            return lambda: torch.ones(3, device=dev) * torch.tensor(2.5)

        def run():
            out = torch.empty(2, device=dev)
            torch.mul(torch.arange(10, dtype=torch.float32, device=dev), 2.0, out=out)
            return out
        return run

    hpu = make("hpu")()
    assert torch.equal(hpu.cpu(), make("cpu")())
    counts = registry.native_counts()
    assert counts.get("aten::mul", 0) + counts.get("aten::add", 0) + counts.get("aten::exp", 0) > 0


@pytest.mark.parametrize("on", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_partial_overlap_raises_as_on_cpu(on, dtype):
    for dev in ("cpu", "hpu"):
        x = torch.arange(10, device=dev).to(dtype)
        with fast(on), pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to"):
            torch.add(x[:-1], x[1:], out=x[1:])


def test_errors_are_torchs():
    a = torch.ones(3, 4, device="hpu")
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        a.add_(torch.ones(2, 3, 4, device="hpu"))
    with pytest.raises(RuntimeError, match="must match the size"):
        a * torch.ones(5, device="hpu")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a * torch.ones(3, 4)


def test_switch_reports_previous_state():
    prev = _native.fast_ops(False)
    try:
        assert _native.fast_ops(False) is False
    finally:
        _native.fast_ops(prev)


GEMMS = {
    "mm": lambda a, b, c: torch.mm(a, b),
    "mm_transposed": lambda a, b, c: torch.mm(b.t(), a.t()),
    "bmm": lambda a, b, c: torch.bmm(a.expand(3, -1, -1), b.expand(3, -1, -1)),
    "bmm_small": lambda a, b, c: torch.bmm(a[:, :3].expand(2, -1, -1)[:, :4], b[:3, :5].expand(2, -1, -1)),
    "addmm_bias": lambda a, b, c: torch.addmm(c[0], a, b),
    "addmm_matrix": lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=-2),
    "addmm_beta0": lambda a, b, c: torch.addmm(c, a, b, beta=0),
    "addmm_column": lambda a, b, c: torch.addmm(c[:, :1], a, b, alpha=3),
    "linear_3d": lambda a, b, c: torch.nn.functional.linear(a.expand(2, -1, -1), b.t(), c[0]),
    "mm_out": lambda a, b, c: torch.mm(a, b, out=torch.empty_like(c)),
    "addmm_out": lambda a, b, c: torch.addmm(c, a, b, out=torch.empty_like(c)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(GEMMS))
def test_matrix_products_match_python_path_bit_for_bit(name, dtype):
    fn = GEMMS[name]

    def operands(dev):
        return (_rand((37, 50), dtype, 1).to(dev), _rand((50, 29), dtype, 2).to(dev),
                _rand((37, 29), dtype, 3).to(dev))

    ops = operands("hpu")
    with fast(False):
        want = fn(*ops)
    before = sum(_native.fast_op_counts()[k] for k in ("aten::mm", "aten::bmm", "aten::addmm"))
    with fast(True):
        got = fn(*ops)
    assert sum(_native.fast_op_counts()[k] for k in ("aten::mm", "aten::bmm", "aten::addmm")) > before
    assert got.shape == want.shape and torch.equal(bits(got), bits(want))
    tol = {"atol": 0.1, "rtol": 1.6e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(got.cpu(), fn(*operands("cpu")), **tol)


def test_matrix_product_errors_are_torchs():
    a, b = torch.ones(3, 4, device="hpu"), torch.ones(5, 6, device="hpu")
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 5x6\)"):
        torch.mm(a, b)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        torch.mm(a, torch.ones(4, 2, dtype=torch.bfloat16, device="hpu"))
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        torch.bmm(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scalar", [float("nan"), float("inf"), -0.0, 0.0, 2**60 + 1, -3, 1e-45, 3.4e38, True])
def test_scalar_edge_cases_match_python_path(dtype, scalar):
    """Python scalars reach the out= kernels as wrapped 0-dim tensors; their conversions
    (int64 through float, double to bfloat16 through float) must be the lowering's."""
    x = (_rand((5, 7), dtype, 4) - 2).to("hpu")
    fns = [lambda: x + scalar, lambda: x - scalar, lambda: x * scalar, lambda: x / scalar,
           lambda: torch.add(x, x, alpha=scalar), lambda: torch.addcmul(x, x, x, value=scalar),
           lambda: torch.lerp(x, x * 2, scalar)]
    for i, fn in enumerate(fns):
        try:
            with fast(False):
                want = fn()
        except (RuntimeError, TypeError) as e:
            with fast(True), pytest.raises(type(e)):
                fn()
            continue
        with fast(True):
            got = fn()
        assert got.dtype == want.dtype and torch.equal(bits(got), bits(want)), (i, scalar)
