"""masked_fill / masked_fill_ on the glue's fast path (float32 and bfloat16) against CPU:
broadcast and full masks, in place and out of place, non-contiguous self, zero size,
backward through autograd, and bad masks raising as CPU raises."""
import pytest
import torch

import habana_frameworks.torch  # noqa: F401

DTYPES = [torch.float32, torch.bfloat16]


def _cases():
    g = torch.Generator().manual_seed(0)
    causal = torch.ones(64, 64, dtype=torch.bool).triu(1)
    yield "attention", torch.randn(4, 4, 64, 64, generator=g), causal
    yield "full", torch.randn(3, 5, 37, generator=g), torch.rand(3, 5, 37, generator=g) > 0.5
    yield "row", torch.randn(9, 100, generator=g), torch.rand(100, generator=g) > 0.5
    yield "column", torch.randn(50, 30, generator=g), torch.rand(50, 1, generator=g) > 0.5
    yield "transposed", torch.randn(30, 40, generator=g).t(), torch.rand(40, 30, generator=g) > 0.5
    yield "short", torch.randn(64, 8, generator=g), torch.rand(8, generator=g) > 0.5
    yield "empty", torch.randn(0, 64, generator=g), torch.ones(64, dtype=torch.bool)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", [float("-inf"), 0.0, 1.0 / 3, 7])
def test_masked_fill_matches_cpu(dtype, value):
    for name, x, m in _cases():
        x = x.to(dtype)
        want = x.masked_fill(m, value)
        got = x.to("hpu").masked_fill(m.to("hpu"), value)
        assert got.is_contiguous() and got.shape == want.shape, name
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True, msg=name)
        y, yh = x.clone(), x.to("hpu")
        y.masked_fill_(m, value)
        yh.masked_fill_(m.to("hpu"), value)
        torch.testing.assert_close(yh.cpu(), y, rtol=0, atol=0, equal_nan=True, msg=name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill_nan_payload_and_broadcast_result(dtype):
    x = torch.randn(2, 64, 64).to(dtype)
    x[0, 3, 5] = float("nan")
    m = torch.zeros(64, 64, dtype=torch.bool)
    got = x.to("hpu").masked_fill(m.to("hpu"), 1.0).cpu()
    assert torch.equal(got.view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                       x.view(torch.int16 if dtype == torch.bfloat16 else torch.int32))
    # a mask larger than self broadcasts the result, as on CPU
    small, big = torch.randn(64).to(dtype), torch.rand(3, 64) > 0.5
    torch.testing.assert_close(small.to("hpu").masked_fill(big.to("hpu"), 2.0).cpu(), small.masked_fill(big, 2.0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill_backward(dtype):
    x = torch.randn(2, 4, 64, 64).to(dtype)
    m = torch.ones(64, 64, dtype=torch.bool).triu(1)
    xc = x.clone().requires_grad_()
    xh = x.to("hpu").requires_grad_()
    g = torch.randn(2, 4, 64, 64).to(dtype)
    torch.softmax(xc.masked_fill(m, float("-inf")), -1).backward(g)
    torch.softmax(xh.masked_fill(m.to("hpu"), float("-inf")), -1).backward(g.to("hpu"))
    ref = x.double().requires_grad_()
    torch.softmax(ref.masked_fill(m, float("-inf")), -1).backward(g.double())
    err_h = (xh.grad.cpu().double() - ref.grad).abs().max()
    err_c = (xc.grad.double() - ref.grad).abs().max()
    assert err_h <= 4 * err_c + (1e-6 if dtype == torch.float32 else 1e-2)


def test_masked_fill_bad_mask_raises_as_cpu():
    x = torch.randn(4, 8)
    for bad in (torch.ones(4, 8), torch.ones(4, 8, dtype=torch.uint8)):
        with pytest.raises(RuntimeError) as cpu_err:
            x.masked_fill(bad, 1.0)
        with pytest.raises(RuntimeError) as hpu_err:
            x.to("hpu").masked_fill(bad.to("hpu"), 1.0)
        assert str(hpu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]
    with pytest.raises(RuntimeError):
        x.masked_fill(torch.ones(3, 8, dtype=torch.bool), 1.0)
    with pytest.raises(RuntimeError):
        x.to("hpu").masked_fill(torch.ones(3, 8, dtype=torch.bool, device="hpu"), 1.0)
