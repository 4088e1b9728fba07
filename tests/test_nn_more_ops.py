"""Upsampling, padding and pooling kernels (kernels/resample.go, kernels/pool3d.go through
_ops/nn_more_ops.py) against torch's CPU kernels on layouts op_db does not sample:
channels_last, permuted and sliced inputs, no batch axis, zero-size, negative padding, plus
the errors bad input raises; and the compositions of nn_composite_ops.py. Every case also
asserts that nothing fell back to CPU."""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch._ops import fallback

LAZY = os.environ.get("PT_HPU_LAZY_MODE") == "1"


def _run(fn, x, *, grad=True, tol=None):
    """fn on a cpu copy and an hpu copy of x: outputs and input gradients must agree and the
    hpu run must stay native."""
    before = sum(fallback.counts().values())
    grad = grad and x.dtype.is_floating_point
    xc = x.detach().clone().requires_grad_(grad)
    xh = x.detach().to("hpu").requires_grad_(grad)
    yc, yh = fn(xc), fn(xh)
    kw = tol or ({"atol": 2e-2, "rtol": 2e-2} if x.dtype == torch.bfloat16 else {})
    outs_c = yc if isinstance(yc, tuple) else (yc,)
    outs_h = yh if isinstance(yh, tuple) else (yh,)
    for a, b in zip(outs_h, outs_c):
        torch.testing.assert_close(a.cpu(), b, equal_nan=True, **kw)
    if grad and outs_c[0].numel():
        g = torch.randn_like(outs_c[0])
        outs_c[0].backward(g)
        outs_h[0].backward(g.to("hpu"))
        torch.testing.assert_close(xh.grad.cpu(), xc.grad, **kw)
    assert sum(fallback.counts().values()) == before, fallback.counts()


def _layouts(x):
    """The same values as contiguous, channels_last-like (permuted) and sliced tensors."""
    yield x
    perm = list(range(x.dim()))
    perm = perm[:1] + perm[2:] + perm[1:2]
    inv = [perm.index(i) for i in range(x.dim())]
    yield x.permute(perm).contiguous().permute(inv)  # channels last
    wide = torch.zeros(*x.shape[:-1], x.shape[-1] * 2, dtype=x.dtype)
    wide[..., ::2] = x
    yield wide[..., ::2]  # strided last axis


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode,size,align", [
    ("nearest", (7, 3), None), ("nearest-exact", (7, 10), None), ("bilinear", (9, 4), False),
    ("bilinear", (9, 4), True), ("bicubic", (6, 9), False), ("bicubic", (3, 3), True)])
def test_interpolate_2d_layouts(dtype, mode, size, align):
    x = torch.randn(2, 3, 5, 6, dtype=dtype)
    for xv in _layouts(x):
        _run(lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align), xv)


def test_interpolate_antialias_and_scales():
    x = torch.randn(2, 3, 9, 8)
    _run(lambda t: F.interpolate(t, size=(4, 3), mode="bilinear", antialias=True), x)
    _run(lambda t: F.interpolate(t, size=(4, 3), mode="bicubic", antialias=True), x)
    _run(lambda t: F.interpolate(t, scale_factor=1.7, mode="bilinear", recompute_scale_factor=False), x)
    _run(lambda t: F.interpolate(t, scale_factor=0.6, mode="nearest"), x)


def test_interpolate_1d_3d_and_uint8_nearest():
    _run(lambda t: F.interpolate(t, size=11, mode="linear"), torch.randn(2, 3, 6))
    x3 = torch.randn(2, 3, 4, 5, 6).permute(0, 1, 4, 2, 3)
    _run(lambda t: F.interpolate(t, size=(5, 7, 3), mode="trilinear"), x3)
    _run(lambda t: F.interpolate(t, size=(5, 7, 3), mode="nearest"), x3)
    _run(lambda t: F.interpolate(t, size=(5, 7), mode="nearest"), torch.randint(0, 255, (1, 2, 3, 4), dtype=torch.uint8))


def test_interpolate_zero_size():
    _run(lambda t: F.interpolate(t, size=(4, 4), mode="bilinear"), torch.randn(0, 3, 2, 2))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_layouts(mode):
    for xv in _layouts(torch.randn(2, 3, 5, 6)):
        _run(lambda t: F.pad(t, (2, 3, 1, 4), mode=mode), xv)
        _run(lambda t: F.pad(t, (-1, 3, 1, -2), mode=mode), xv)
    _run(lambda t: F.pad(t, (1, 2), mode=mode), torch.randn(3, 6))  # no batch axis
    _run(lambda t: F.pad(t, (1, 2, 1, 0, 2, 1), mode=mode), torch.randn(2, 3, 4, 5, 6))
    _run(lambda t: F.pad(t, (2, 3), mode=mode), torch.randint(-50, 50, (2, 3, 6)))
    _run(lambda t: F.pad(t, (2, 3), mode=mode), torch.randn(2, 3, 6, dtype=torch.bfloat16))


def test_reflect_pad_too_large_raises_like_cpu():
    x = torch.randn(1, 2, 3)
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x.to("hpu"), (3, 0), mode="reflect")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max_pool3d_layouts(dtype):
    x = torch.randn(2, 3, 6, 7, 8, dtype=dtype)
    for xv in _layouts(x):
        _run(lambda t: F.max_pool3d(t, 3, 2, 1, return_indices=True), xv)
        _run(lambda t: F.max_pool3d(t, (2, 3, 2), (1, 2, 2), (1, 1, 0), dilation=(2, 1, 1), ceil_mode=True), xv)


def test_max_pool_nan_and_int():
    x = torch.randn(1, 2, 4, 4, 4)
    x[0, 0, 1, 1, 1] = float("nan")
    _run(lambda t: F.max_pool3d(t, 2, return_indices=True), x, grad=False)
    _run(lambda t: F.max_pool2d(t, 2, return_indices=True), torch.randint(-99, 99, (2, 3, 6, 6)))
    _run(lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True), torch.randint(-99, 99, (2, 3, 7, 7)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_adaptive_and_avg_pools(dtype):
    for xv in _layouts(torch.randn(2, 3, 7, 9, dtype=dtype)):
        _run(lambda t: F.adaptive_max_pool2d(t, (3, 4), return_indices=True), xv)
        _run(lambda t: F.adaptive_max_pool1d(t.flatten(2), 5), xv)
    for xv in _layouts(torch.randn(2, 3, 5, 7, 9, dtype=dtype)):
        _run(lambda t: F.adaptive_max_pool3d(t, (2, 3, 4)), xv)
        _run(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)), xv)
        if dtype == torch.float32:  # torch's CPU avg_pool3d has no bfloat16 kernel to compare with
            _run(lambda t: F.avg_pool3d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False), xv)
            _run(lambda t: F.avg_pool3d(t, 2, divisor_override=3), xv)


def test_max_unpool_and_bad_index():
    x = torch.randn(2, 3, 6, 8)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    ref = F.max_unpool2d(out, idx, 2)
    got = F.max_unpool2d(out.to("hpu"), idx.to("hpu"), 2)
    torch.testing.assert_close(got.cpu(), ref)
    x3 = torch.randn(1, 2, 4, 4, 4)
    out, idx = F.max_pool3d(x3, 2, return_indices=True)
    torch.testing.assert_close(F.max_unpool3d(out.to("hpu"), idx.to("hpu"), 2).cpu(), F.max_unpool3d(out, idx, 2))
    bad = torch.tensor([[[[0, 1], [2, 99]]]])
    v = torch.randn(1, 1, 2, 2)
    # eager raises torch's message; lazy mode finds the index when the graph runs
    msg = r"Found an invalid max index: 99" + ("" if LAZY else r" \(output volumes are of size 4x4")
    with pytest.raises(RuntimeError, match=msg):
        torch.ops.aten.max_unpool2d(v.to("hpu"), bad.to("hpu"), [4, 4]).cpu()


def test_fractional_max_pool_deterministic_given_samples():
    x = torch.randn(2, 3, 9, 9)
    s = torch.rand(2, 3, 2)
    ref = torch.ops.aten.fractional_max_pool2d(x, [2, 2], [4, 5], s)
    got = torch.ops.aten.fractional_max_pool2d(x.to("hpu"), [2, 2], [4, 5], s.to("hpu"))
    torch.testing.assert_close(got[0].cpu(), ref[0])
    torch.testing.assert_close(got[1].cpu(), ref[1])
    x3 = torch.randn(1, 2, 7, 8, 9)
    s3 = torch.rand(1, 2, 3)
    ref = torch.ops.aten.fractional_max_pool3d(x3, [2, 3, 2], [3, 4, 5], s3)
    got = torch.ops.aten.fractional_max_pool3d(x3.to("hpu"), [2, 3, 2], [3, 4, 5], s3.to("hpu"))
    torch.testing.assert_close(got[0].cpu(), ref[0])
    torch.testing.assert_close(got[1].cpu(), ref[1])


def test_composite_nn_ops_native():
    """nn_composite_ops.py: compositions of native ops, forward and backward, no fallback."""
    x = torch.randn(2, 6, 3, 4)
    _run(lambda t: F.channel_shuffle(t, 3), x.contiguous(memory_format=torch.channels_last), grad=False)
    _run(lambda t: F.channel_shuffle(t, 2), torch.randint(0, 9, (2, 4, 3)), grad=False)
    _run(lambda t: t.unfold(2, 3, 2) * 2, x)
    _run(lambda t: torch.renorm(t, 2, 1, 1.5), x)
    _run(lambda t: F.unfold(t, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), x)
    _run(lambda t: F.fold(t, (5, 6), (2, 2), padding=1), torch.randn(2, 12, 42))
    y = torch.randn(3, 7)
    _run(lambda t: torch.cdist(t, y.to(t.device), p=1.5), torch.randn(4, 7))
    _run(lambda t: torch.cdist(t, y.to(t.device), p=float("inf")), torch.randn(4, 7))
    _run(lambda t: F.pdist(t, 3.0), torch.randn(5, 4))
    tgt = torch.randint(0, 5, (2, 3, 4))
    _run(lambda t: F.cross_entropy(t, tgt.to(t.device)), torch.randn(2, 5, 3, 4))
    w = torch.randn(6, 2, 3, 3)
    _run(lambda t: F.conv_transpose2d(t, w.to(t.device), stride=2, padding=1, output_padding=1, groups=2), x)
    w1 = torch.randn(6, 4, 3)
    _run(lambda t: F.conv_transpose1d(t, w1.to(t.device), stride=2, dilation=2), torch.randn(2, 6, 5))
