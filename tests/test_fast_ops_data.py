"""The glue's fast C++ kernels for data movement, relu and sum(dim) (csrc/hpu_fast_ops.cpp):
_copy_from (host<->device, device<->device, dtype casts: autocast's casts), fill_,
_local_scalar_dense (item), relu, threshold_backward and sum.IntList_out. Each result is
compared bit for bit with the Python lowering (the fast kernels off) and with CPU, and the
calls they do not serve still reach the Python path."""
from __future__ import annotations

import contextlib

import pytest
import torch

from habana_frameworks.torch import _native
from habana_frameworks.torch._ops import fallback


@contextlib.contextmanager
def fast(on: bool):
    prev = _native.fast_ops(on)
    try:
        yield
    finally:
        _native.fast_ops(prev)


def calls(name: str) -> int:
    return _native.fast_op_counts().get(name, 0)


def host(t: torch.Tensor) -> torch.Tensor:
    with fast(False):
        return t.cpu()


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    a, b = a.cpu(), b.cpu()
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.is_floating_point:
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.contiguous().view(view), b.contiguous().view(view))
    return torch.equal(a, b)


def _rand(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 3).to(dtype)


CAST_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.bool)


@pytest.mark.parametrize("src_dt", CAST_DTYPES)
@pytest.mark.parametrize("dst_dt", (torch.float32, torch.bfloat16, torch.int32))
def test_copies_and_casts_match_cpu_and_python_path(src_dt, dst_dt):
    """to(dtype) on the device (autocast's casts), host to device and back, with
    contiguous, transposed and sliced operands."""
    x = _rand((37, 20), seed=1).to(src_dt)
    for view in (lambda t: t, lambda t: t.t(), lambda t: t[3:30:2, 1:]):
        want = view(x).to(dst_dt)
        before = calls("aten::_copy_from")
        d = view(x).to("hpu")  # host -> device, a strided source
        got = d.to(dst_dt)  # device -> device cast
        back = got.cpu()  # device -> host
        assert calls("aten::_copy_from") >= before + 2
        assert same_bits(back, want), (src_dt, dst_dt)
        with fast(False):
            ref = view(x).to("hpu").to(dst_dt)
        assert same_bits(host(ref), want)
        # into a strided device destination
        dst = torch.empty(want.shape[::-1], dtype=dst_dt, device="hpu").t()
        dst.copy_(d)
        assert same_bits(host(dst), want)


def test_copy_cases_it_does_not_serve_go_to_python():
    """Broadcasting copies go to the Python path and still give CPU's results (int64
    host copies while int64 support is off: test_fast_ops_nn.py)."""
    a = torch.arange(5, dtype=torch.float32).to("hpu")
    dst = torch.empty(3, 5, device="hpu")
    before = calls("aten::_copy_from")
    dst.copy_(a)  # broadcast
    assert calls("aten::_copy_from") == before
    t = torch.tensor([1, -7, 2**31 - 1])
    d = t.to("hpu")  # int64 destination
    assert torch.equal(host(dst), host(a).expand(3, 5)) and torch.equal(host(d), t)
    x = torch.tensor([1.5, 2.25], dtype=torch.float64)
    assert torch.equal(x.to("hpu").cpu(), x)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int32, torch.bool, torch.float16))
@pytest.mark.parametrize("value", (0, 3, -2.75, True, 1e-3))
def test_fill_matches_cpu_and_python_path(dtype, value):
    want = torch.empty(6, 9, dtype=dtype).t()[1:].fill_(value)
    for on in (True, False):
        with fast(on):
            got = torch.empty(6, 9, dtype=dtype, device="hpu").t()[1:].fill_(value)
        assert same_bits(host(got), want), (dtype, value, on)


def test_fill_complex_value_raises_as_before():
    with pytest.raises(RuntimeError):
        torch.empty(3, device="hpu").fill_(1 + 2j)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int32, torch.bool, torch.int64))
def test_item_matches_cpu(dtype):
    x = _rand((4, 5), seed=2).to(dtype)
    d = x.to("hpu")
    before = calls("aten::_local_scalar_dense")
    assert d[2, 3].item() == x[2, 3].item()
    assert d.sum().item() == pytest.approx(x.sum().item(), rel=1e-2) if dtype != torch.bool else True
    assert calls("aten::_local_scalar_dense") > before
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        d.item()


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_relu_and_its_backward_match_python_path_and_cpu(dtype):
    x = _rand((33, 17), seed=3).to(dtype)
    g = _rand((33, 17), seed=4).to(dtype)
    for view in (lambda t: t, lambda t: t.t()):
        outs = {}
        for on in (True, False):
            with fast(on):
                xd = view(x).to("hpu").requires_grad_()
                y = torch.relu(xd)
                y.backward(view(g).to("hpu"))
                inplace = view(x).to("hpu").clone()
                inplace.relu_()
                tb = torch.ops.aten.threshold_backward(view(g).to("hpu"), view(x).to("hpu"), 0.5)
                outs[on] = (host(y.detach()), host(xd.grad), host(inplace), host(tb))
        xc = view(x).clone().requires_grad_()
        yc = torch.relu(xc)
        yc.backward(view(g))
        cpu = (yc.detach(), xc.grad, view(x).clone().relu_(), torch.ops.aten.threshold_backward(view(g), view(x), 0.5))
        for a, b, c in zip(outs[True], outs[False], cpu):
            assert same_bits(a, b) and same_bits(a, c)


SUM_CASES = [((64, 10), 0, False), ((64, 10), [1], True), ((4, 5, 6), [0, 2], False), ((4, 5, 6), -1, True),
             ((4, 5, 6), [], False), ((7,), 0, True), ((3, 0, 4), 1, False)]


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("shape,dim,keepdim", SUM_CASES)
def test_sum_dim_matches_python_path_and_cpu(shape, dim, keepdim, dtype):
    x = _rand(shape, seed=5).to(dtype)
    want = x.sum(dim, keepdim=keepdim)
    for xv in (x, x.transpose(0, -1).contiguous().transpose(0, -1)):
        res = {}
        for on in (True, False):
            with fast(on):
                res[on] = host(xv.to("hpu").sum(dim, keepdim=keepdim))
        assert same_bits(res[True], res[False]), (shape, dim)
        torch.testing.assert_close(res[True], want, rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-5)


def test_sum_served_and_errors_are_torchs():
    x = torch.ones(4, 5, device="hpu")
    before = calls("aten::sum")
    fb = fallback.total()
    assert x.sum(0).cpu().tolist() == [4.0] * 5
    assert calls("aten::sum") == before + 1 and fallback.total() == fb
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.sum(2)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        x.sum([0, 0])
    out = torch.empty(3, device="hpu")  # wrong shape: resized by the Python path, as on CPU
    torch.sum(x, 0, out=out)
    assert out.shape == (5,) and host(out).tolist() == [4.0] * 5
