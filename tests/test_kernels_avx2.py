"""Kernels whose vector paths changed in session 18, against PyTorch on CPU (eager, and lazy
mode through the Makefile's lazy line): float32 batch norm in AVX2 lanes on CPUs without
AVX-512 (kernels/bn_f32_cgo.go bnf2_*), softmax/log_softmax/layer_norm rows whose 16-lane
sums now vectorize (kernels/vec16.h). Each at the reference models' shapes and at odd ones
(row lengths around the 8/16-lane widths, channels_last, strided rows)."""
import pytest
import torch
import torch.nn.functional as F

import habana_frameworks.torch.core as htcore  # noqa: F401


def _grads(fn, dev, dtype, *xs):
    leaves = [x.detach().to(dev, dtype).requires_grad_(True) for x in xs]
    out = fn(*leaves)
    g = torch.Generator().manual_seed(7)
    w = torch.randn(out.shape, generator=g, dtype=torch.float64).to(dev, dtype)
    (out * w).sum().backward()
    return [out.detach().cpu().double()] + [t.grad.detach().cpu().double() for t in leaves]


def _check(fn, *xs, mult=4.0):
    """hpu's float32 results are no further from a float64 CPU reference than a small multiple
    of CPU float32's distance (plus a floor at float32 rounding of the values)."""
    ref = _grads(fn, "cpu", torch.float64, *xs)
    cpu = _grads(fn, "cpu", torch.float32, *xs)
    hpu = _grads(fn, "hpu", torch.float32, *xs)
    for name, r, c, h in zip(["out"] + [f"grad{i}" for i in range(len(xs))], ref, cpu, hpu):
        scale = r.abs().max().item() + 1e-30
        cerr = (c - r).abs().max().item()
        herr = (h - r).abs().max().item()
        assert herr <= mult * cerr + 4e-7 * scale, f"{name}: hpu err {herr:.3g}, cpu err {cerr:.3g}, max {scale:.3g}"


@pytest.mark.parametrize("shape,channels_last", [
    ((64, 16, 28, 28), False), ((64, 32, 14, 14), False), ((5, 6, 37), False), ((3, 4, 7, 1), False),
    ((8, 16, 7, 7), True), ((2, 3, 5, 9), True)])
def test_batch_norm_training_float32(shape, channels_last):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=g) * 3 + 5  # a mean away from 0: the shifted sums matter
    C = shape[1]
    w, b = torch.randn(C, generator=g), torch.randn(C, generator=g)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)

    def fn(x, w, b):
        return F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)
    _check(fn, x, w, b)


def test_batch_norm_eval_and_running_stats_float32():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(16, 8, 9, 9, generator=g)
    bn_c = torch.nn.BatchNorm2d(8)
    bn_h = torch.nn.BatchNorm2d(8).to("hpu")
    out_c, out_h = bn_c(x), bn_h(x.to("hpu"))
    torch.testing.assert_close(out_h.cpu(), out_c, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bn_h.running_mean.cpu(), bn_c.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bn_h.running_var.cpu(), bn_c.running_var, rtol=1e-5, atol=1e-6)
    bn_c.eval(), bn_h.eval()
    torch.testing.assert_close(bn_h(x.to("hpu")).cpu(), bn_c(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [7, 16, 33, 64, 100])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_rows_float32(n, log):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 3, 17, n, generator=g) * 4
    f = F.log_softmax if log else F.softmax
    _check(lambda x: f(x, -1), x)


@pytest.mark.parametrize("d", [7, 16, 33, 64])
def test_layer_norm_rows_float32(d):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 41, d, generator=g) + 2
    w, b = torch.randn(d, generator=g), torch.randn(d, generator=g)
    _check(lambda x, w, b: F.layer_norm(x, (d,), w, b, 1e-5), x, w, b)
