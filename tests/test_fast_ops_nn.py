"""The glue's fast C++ kernels for a training step's loss, norm and activation ops
(csrc/hpu_fast_ops.cpp): _softmax/_log_softmax and their backwards, nll_loss forward and
backward, native_layer_norm and its backward, gelu and its backward, masked_fill_ and
host-to-device int64 copies. Each result is compared bit for bit with the Python lowering
(the fast kernels off) and with CPU (float32 tight, bfloat16 loose), forward and backward;
the calls they do not serve (other dims, layouts, dtypes, zero-size) reach the Python path
and still match CPU, and bad input raises CPU's exception. Runs in eager and lazy mode."""
from __future__ import annotations

import contextlib
import os

import pytest
import torch
import torch.nn.functional as F

from habana_frameworks.torch import _native

from test_fast_ops_data import calls, fast, host, same_bits


def _rand(shape, dtype=torch.float32, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    """Close to CPU, the absolute tolerance scaled by the result's largest value (parameter
    gradients are sums over many rows, summed in another order than CPU's; CPU's own
    bfloat16 layer_norm weight gradient is ~15x further from float64 than hpu's)."""
    got = host(got)
    scale = max(1.0, want.double().abs().max().item()) if want.numel() else 1.0
    if want.dtype == torch.bfloat16:
        torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=5e-2 * scale)
    else:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * scale)


def _grads(fn, inputs: list[torch.Tensor], device: str, seed: int = 7):
    """fn(*inputs on device) and the gradients of (out * fixed weights).sum()."""
    xs = [x.detach().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*xs)
    w = _rand(out.shape, torch.float32, seed=seed).to(out.dtype).to(device)
    (out * w).sum().backward()
    return [out] + [x.grad for x in xs if x.is_floating_point()]


def _check(fn, inputs, op_names: tuple[str, ...], served: bool = True) -> None:
    """fn on hpu with the fast kernels on equals (bits) fn with them off, and CPU (close);
    the fast kernels served op_names (or, served=False, did not)."""
    want = _grads(fn, inputs, "cpu")
    before = {n: calls(n) for n in op_names}
    got = _grads(fn, inputs, "hpu")
    for n in op_names:
        assert (calls(n) > before[n]) == served, (n, served)
    with fast(False):
        ref = _grads(fn, inputs, "hpu")
    for g, r, w in zip(got, ref, want):
        assert same_bits(host(g), host(r))
        _close(g, w)


DTYPES = (torch.float32, torch.bfloat16)
SOFTMAX_OPS = ("aten::_softmax", "aten::_softmax_backward_data")
LOG_SOFTMAX_OPS = ("aten::_log_softmax", "aten::_log_softmax_backward_data")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ((64, 10), (2, 4, 16, 16), (5,), (3, 1)))
@pytest.mark.parametrize("log", (False, True))
def test_softmax_last_dim_is_served_and_matches(dtype, shape, log):
    f = F.log_softmax if log else F.softmax
    _check(lambda x: f(x, -1), [_rand(shape, dtype)], LOG_SOFTMAX_OPS if log else SOFTMAX_OPS)


@pytest.mark.parametrize("log", (False, True))
@pytest.mark.parametrize("case", ("other_dim", "transposed", "channels_last", "zero_size", "float64"))
def test_softmax_cases_it_does_not_serve_match_cpu(log, case):
    f = F.log_softmax if log else F.softmax
    names = LOG_SOFTMAX_OPS if log else SOFTMAX_OPS
    if case == "other_dim":
        _check(lambda x: f(x, 1), [_rand((4, 6, 5))], names, served=False)
    elif case == "transposed":  # (the backward's operands are contiguous: served)
        _check(lambda x: f(x.transpose(0, 1), -1), [_rand((7, 5))], names[:1], served=False)
    elif case == "channels_last":
        x = _rand((2, 3, 4, 5)).to(memory_format=torch.channels_last)
        _check(lambda x: f(x.contiguous(memory_format=torch.channels_last), -1), [x], names[:1], served=False)
    elif case == "zero_size":
        want = f(torch.empty(0, 5), -1)
        got = f(torch.empty(0, 5, device="hpu"), -1)
        assert got.shape == want.shape and got.device.type == "hpu"
    else:
        x = _rand((3, 4), torch.float64)
        _close(f(x.to("hpu"), -1), f(x, -1))


def test_softmax_bad_dim_raises_cpus_error():
    x = _rand((3, 4))
    with pytest.raises(IndexError) as cpu:
        F.softmax(x, 2)
    with pytest.raises(IndexError) as hpu:
        F.softmax(x.to("hpu"), 2)
    assert str(hpu.value) == str(cpu.value)


NLL_OPS = ("aten::nll_loss_forward", "aten::nll_loss_backward")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ("mean", "sum", "none"))
@pytest.mark.parametrize("weighted", (False, True))
def test_cross_entropy_is_served_and_matches(dtype, reduction, weighted):
    x = _rand((64, 10), dtype, seed=3)
    t = torch.randint(0, 10, (64,), generator=torch.Generator().manual_seed(4))
    t[5] = -100  # ignored
    w = _rand((10,), dtype, seed=5).abs() if weighted else None

    def fn(x, t):
        return F.cross_entropy(x, t, weight=None if w is None else w.to(x.device), reduction=reduction)
    _check(fn, [x, t], NLL_OPS + LOG_SOFTMAX_OPS)


def test_nll_loss_cases_it_does_not_serve_match_cpu():
    x = _rand((4, 10), seed=1)
    t = torch.tensor([1, 2, 3, 9])
    # a single sample (1-D input); a transposed input is served
    _check(lambda x, t: F.nll_loss(x[0], t[0]), [x, t], NLL_OPS, served=False)
    _check(lambda x, t: F.nll_loss(x.t().contiguous().t(), t), [x, t], NLL_OPS)  # strided: served
    got = F.nll_loss(torch.empty(0, 10, device="hpu"), torch.empty(0, dtype=torch.long, device="hpu"))
    assert torch.isnan(host(got))


@pytest.mark.parametrize("target", (10, -1))
def test_nll_loss_target_out_of_range_raises_cpus_index_error(target):
    x = _rand((4, 10))
    t = torch.tensor([1, 2, target, 0])
    with pytest.raises(IndexError) as cpu:
        F.nll_loss(x, t)
    with pytest.raises(IndexError) as hpu:
        F.nll_loss(x.to("hpu"), t.to("hpu")).cpu()
    # (a lazy graph names the op and graph around CPU's message)
    assert str(cpu.value) in str(hpu.value)


def test_nll_loss_batch_mismatch_raises_cpus_error():
    x, t = _rand((4, 10)), torch.tensor([1, 2, 3])
    with pytest.raises(ValueError) as cpu:
        F.nll_loss(x, t)
    with pytest.raises(ValueError) as hpu:
        F.nll_loss(x.to("hpu"), t.to("hpu"))
    assert str(hpu.value) == str(cpu.value)


LN_OPS = ("aten::native_layer_norm", "aten::native_layer_norm_backward")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,norm", (((16, 64, 64), (64,)), ((4, 6, 8), (6, 8)), ((3, 5), (5,))))
@pytest.mark.parametrize("affine", (True, False))
def test_layer_norm_is_served_and_matches(dtype, shape, norm, affine):
    x = _rand(shape, dtype, seed=2)
    inputs = [x]
    if affine:
        inputs += [_rand(norm, dtype, seed=3), _rand(norm, dtype, seed=4)]
    _check(lambda x, *wb: F.layer_norm(x, norm, *wb, eps=1e-5), inputs, LN_OPS)


def test_layer_norm_weight_only_and_cases_it_does_not_serve_match_cpu():
    x, w, b = _rand((6, 8), seed=1), _rand((8,), seed=2), _rand((8,), seed=3)
    _check(lambda x, w: F.layer_norm(x, (8,), w), [x, w], LN_OPS)
    _check(lambda x, w, b: F.layer_norm(x.t(), (6,), w[:6], b[:6]), [x, w, b], LN_OPS, served=False)
    xc = _rand((2, 3, 4, 4)).to(memory_format=torch.channels_last)
    _check(lambda x: F.layer_norm(x.contiguous(memory_format=torch.channels_last), (4,)), [xc], LN_OPS,
           served=False)
    # bfloat16 input, float32 parameters (autocast's layer_norm): served, float32 statistics
    xb = _rand((5, 8), torch.bfloat16, seed=4)
    before = calls("aten::native_layer_norm")
    got = F.layer_norm(xb.to("hpu"), (8,), w.to("hpu"), b.to("hpu"))
    assert calls("aten::native_layer_norm") == before + 1
    _close(got, F.layer_norm(xb, (8,), w, b))
    _, mean, rstd = torch.ops.aten.native_layer_norm(xb.to("hpu"), (8,), w.to("hpu"), b.to("hpu"), 1e-5)
    assert mean.dtype == rstd.dtype == torch.float32 and mean.shape == (5, 1)
    z = F.layer_norm(torch.empty(0, 8, device="hpu"), (8,))
    assert z.shape == (0, 8)


def test_layer_norm_bad_shape_raises_cpus_error():
    x = _rand((4, 6))
    with pytest.raises(RuntimeError) as cpu:
        F.layer_norm(x, (5,))
    with pytest.raises(RuntimeError) as hpu:
        F.layer_norm(x.to("hpu"), (5,))
    assert str(hpu.value) == str(cpu.value)


GELU_OPS = ("aten::gelu", "aten::gelu_backward")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ("none", "tanh"))
def test_gelu_is_served_and_matches(dtype, approximate):
    _check(lambda x: F.gelu(x, approximate=approximate), [_rand((16, 64, 32), dtype)], GELU_OPS)
    _check(lambda x: F.gelu(x.transpose(0, 2), approximate=approximate), [_rand((4, 3, 5), dtype)], GELU_OPS)


def test_gelu_bad_approximation_raises_cpus_error():
    with pytest.raises(RuntimeError) as cpu:
        F.gelu(torch.ones(3), approximate="fast")
    with pytest.raises(RuntimeError) as hpu:
        F.gelu(torch.ones(3, device="hpu"), approximate="fast")
    assert str(hpu.value) == str(cpu.value)


@pytest.mark.parametrize("value", (float("-inf"), 2.5, 3, True))
@pytest.mark.parametrize("layout", ("plain", "broadcast", "strided"))
def test_masked_fill_is_served_and_matches(value, layout):
    x = _rand((4, 5, 6), seed=1)
    m = torch.rand(5, 6, generator=torch.Generator().manual_seed(2)) > 0.5
    if layout == "plain":
        m = m.expand(4, 5, 6).contiguous()
        fn = lambda x, m: x.clone().masked_fill_(m, value)  # noqa: E731
    elif layout == "broadcast":
        fn = lambda x, m: x.clone().masked_fill_(m, value)  # noqa: E731
    else:
        fn = lambda x, m: x.clone().transpose(0, 2).masked_fill_(m.t().unsqueeze(-1), value)  # noqa: E731
    _check(fn, [x, m], ("aten::masked_fill_",))


def test_masked_fill_bfloat16_is_served_and_matches():
    x = _rand((4, 6), torch.bfloat16)
    m = torch.rand(4, 6, generator=torch.Generator().manual_seed(2)) > 0.5
    _check(lambda x, m: x.clone().masked_fill_(m, -1.5), [x, m], ("aten::masked_fill_",))


def test_masked_fill_cases_it_does_not_serve_match_cpu():
    x = _rand((4, 6), torch.float64)
    m = torch.rand(4, 6, generator=torch.Generator().manual_seed(2)) > 0.5
    _check(lambda x, m: x.clone().masked_fill_(m, -1.5), [x, m], ("aten::masked_fill_",), served=False)
    z = torch.empty(0, 6, device="hpu").masked_fill_(torch.empty(0, 6, dtype=torch.bool, device="hpu"), 1.0)
    assert z.shape == (0, 6)
    with pytest.raises(RuntimeError) as cpu:
        torch.zeros(4, 6).masked_fill_(torch.ones(3, 6, dtype=torch.bool), 1.0)
    with pytest.raises(RuntimeError):
        torch.zeros(4, 6, device="hpu").masked_fill_(torch.ones(3, 6, dtype=torch.bool, device="hpu"), 1.0)
    assert "must match" in str(cpu.value)


@contextlib.contextmanager
def _env(name: str, value: str | None):
    prev = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if prev is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = prev


def test_int64_host_copies_are_served_unless_int64_support_is_off():
    t = torch.tensor([1, -7, 2**31 - 1, 2**40])
    with _env("PT_ENABLE_INT64_SUPPORT", None):
        before = calls("aten::_copy_from")
        d = t.to("hpu")
        assert calls("aten::_copy_from") == before + 1
        assert torch.equal(host(d), t)
    with _env("PT_ENABLE_INT64_SUPPORT", " Off "):
        before = calls("aten::_copy_from")
        small = torch.tensor([3, -4]).to("hpu")
        assert calls("aten::_copy_from") == before  # the Python path's range check
        assert torch.equal(host(small), torch.tensor([3, -4]))
        with pytest.raises(RuntimeError, match="exceeds Int range"):
            t.to("hpu")


def test_fast_op_names_are_reported():
    names = set(_native.fast_op_counts())
    for n in NLL_OPS + LN_OPS + GELU_OPS + SOFTMAX_OPS + LOG_SOFTMAX_OPS + ("aten::masked_fill_",):
        assert n in names
