"""The glue's direct functional and in-place kernels (csrc/hpu_fast_ops.cpp, "functional and
in-place forms"): add/sub/mul/div, lerp, addcmul/addcdiv, the unary float ops, gelu,
threshold_backward, softmax/log_softmax (+backward), sum(dim), mm/bmm/addmm. They skip
torch's generic structured wrapper (meta function, allocation, out= redispatch), so what
that wrapper gave must still hold: the result's values (bit for bit the Python path's, close
to CPU), its strides (CPU's memory format), torch's errors, and in-place version counts.
Runs in eager and lazy mode."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from test_fast_ops_data import calls, fast, host, same_bits


def _rand(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 4 + 0.25).to(dtype)


# name -> (fn, operand shapes, aten op name counted by the fast kernels)
FUNCTIONAL = {
    "add": (lambda a, b: torch.add(a, b, alpha=0.5), ((6, 5), (6, 5)), "aten::add"),
    "add_bcast": (lambda a, b: a + b, ((4, 6, 5), (5,)), "aten::add"),
    "sub_scalar": (lambda a: a - 3, ((6, 5),), "aten::sub"),
    "rsub": (lambda a: 1 - a, ((6, 5),), "aten::sub"),
    "mul": (lambda a, b: a * b, ((3, 1, 5), (3, 4, 5)), "aten::mul"),
    "div_scalar": (lambda a: a / 0.3, ((7,),), "aten::div"),
    "lerp": (lambda a, b: torch.lerp(a, b, 0.25), ((6, 5), (6, 5)), "aten::lerp"),
    "addcmul": (lambda a, b: torch.addcmul(a, b, b, value=-0.5), ((6, 5), (6, 5)), "aten::addcmul"),
    "addcdiv": (lambda a, b: torch.addcdiv(a, b, b + 1, value=2), ((6, 5), (6, 5)), "aten::addcdiv"),
    "sqrt": (torch.sqrt, ((6, 5),), "aten::sqrt"),
    "sigmoid": (torch.sigmoid, ((2, 3, 4),), "aten::sigmoid"),
    "gelu": (F.gelu, ((6, 5),), "aten::gelu"),
    "softmax": (lambda a: F.softmax(a, -1), ((6, 5),), "aten::_softmax"),
    "log_softmax": (lambda a: F.log_softmax(a, 1), ((6, 5),), "aten::_log_softmax"),
    "sum_dim": (lambda a: a.sum(0), ((6, 5),), "aten::sum"),
    "sum_keepdim": (lambda a: a.sum((0, 2), keepdim=True), ((3, 4, 5),), "aten::sum"),
    "mm": (torch.mm, ((6, 5), (5, 3)), "aten::mm"),
    "bmm": (torch.bmm, ((2, 6, 5), (2, 5, 3)), "aten::bmm"),
    "addmm": (lambda c, a, b: torch.addmm(c, a, b), ((3,), (6, 5), (5, 3)), "aten::addmm"),
    "threshold_backward": (lambda g, x: torch.ops.aten.threshold_backward(g, x - 2, 0.0), ((6, 5), (6, 5)),
                           "aten::threshold_backward"),
}


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_forms_are_served_with_cpus_layout(name, dtype):
    fn, shapes, op = FUNCTIONAL[name]
    xs = [_rand(s, dtype, i) for i, s in enumerate(shapes)]
    hs = [x.to("hpu") for x in xs]
    want = fn(*xs)
    before = calls(op)
    got = fn(*hs)
    assert calls(op) > before
    with fast(False):
        ref = fn(*hs)
    assert same_bits(host(got), host(ref))
    assert got.stride() == want.stride() and got.dtype == want.dtype
    tol = {"atol": 5e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-5, "rtol": 1e-5}
    torch.testing.assert_close(host(got), want, **tol)


@pytest.mark.parametrize("layout", ("transposed", "channels_last", "expanded"))
@pytest.mark.parametrize("name", ("add", "mul", "sqrt", "gelu", "addcmul"))
def test_other_layouts_keep_cpus_strides(name, layout):
    """Operands that are not all contiguous take torch's generic path: its strides."""
    fn = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sqrt": lambda a, b: a.sqrt(),
          "gelu": lambda a, b: F.gelu(a), "addcmul": lambda a, b: torch.addcmul(a, b, b)}[name]

    def operands(dev):
        a, b = _rand((2, 3, 4, 5), seed=1).to(dev), _rand((2, 3, 4, 5), seed=2).to(dev)
        if layout == "transposed":
            return a.transpose(1, 3), b.transpose(1, 3)
        if layout == "channels_last":
            return a.contiguous(memory_format=torch.channels_last), b.contiguous(memory_format=torch.channels_last)
        return a[:, :1].expand(2, 3, 4, 5), b
    want = fn(*operands("cpu"))
    got = fn(*operands("hpu"))
    assert got.stride() == want.stride()
    torch.testing.assert_close(host(got), want, atol=1e-5, rtol=1e-5)


def test_in_place_forms_are_served_and_bump_the_version():
    ts = [_rand((8, 6), seed=s).to("hpu") for s in range(3)]
    p, m, g = ts
    refs = [t.clone() for t in ts]
    ops = [("aten::add", lambda p, m, g: p.add_(g, alpha=-0.1)), ("aten::sub", lambda p, m, g: p.sub_(m)),
           ("aten::mul", lambda p, m, g: p.mul_(0.99)), ("aten::div", lambda p, m, g: p.div_(m)),
           ("aten::lerp", lambda p, m, g: m.lerp_(g, 0.1)),
           ("aten::addcmul", lambda p, m, g: m.addcmul_(g, g, value=0.5)),
           ("aten::addcdiv", lambda p, m, g: p.addcdiv_(m, g, value=-0.01)),
           ("aten::sqrt", lambda p, m, g: m.sqrt_()), ("aten::exp", lambda p, m, g: g.exp_())]
    for name, fn in ops:
        v, before = (p._version, m._version, g._version), calls(name)
        fn(p, m, g)
        assert calls(name) == before + 1, name
        assert (p._version, m._version, g._version) != v
        with fast(False):
            fn(*refs)
        for a, b in zip(ts, refs):
            assert same_bits(host(a), host(b)), name


def test_errors_are_still_torchs():
    a = torch.ones(3, 4, device="hpu")
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
        torch.add(a, a, alpha=True)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
        a.sub_(a, alpha=False)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        a.mul_(torch.ones(2, 3, 4, device="hpu"))
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.lerp(a, torch.ones(5, device="hpu"), 0.5)
    with pytest.raises(IndexError, match="Dimension out of range"):
        a.sum(2)
    with pytest.raises(RuntimeError, match="dim 1 appears multiple times"):
        a.sum((1, -1))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x4\)"):
        torch.addmm(torch.ones(4, device="hpu"), a, a)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        F.gelu(a, approximate="x")
    # integer and mixed dtypes: the generic path, CPU's promotion
    i = torch.arange(6, device="hpu").view(2, 3)
    assert torch.equal(host(i / 2), torch.arange(6).view(2, 3) / 2)
    assert (a + torch.ones(3, 4, dtype=torch.bfloat16, device="hpu")).dtype == torch.float32
    z = torch.empty(0, 4, device="hpu")
    assert (z + z).shape == (0, 4) and z.sqrt().shape == (0, 4) and z.sum(0).shape == (4,)
    assert torch.equal(host(z.sum(0)), torch.zeros(4))
