"""Grid sampling (kernels/grid_sample.go via _ops/sampling_ops.py) against torch's CPU kernels
on layouts op_db does not sample (channels_last, permuted/strided grids, zero-size), every
mode/padding/align_corners, bfloat16 judged against float64, bad input raising like CPU; no
CPU fallback anywhere."""
from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch._ops import fallback


def _fallbacks() -> int:
    return sum(fallback.counts().values())


def _grid_sample_all(x, g, go, dev, dt, **kw):
    a = x.detach().to(dev, dt).requires_grad_()
    b = g.detach().to(dev, dt).requires_grad_()
    y = F.grid_sample(a, b, **kw)
    y.backward(go.to(dev, dt))
    return [t.detach().cpu() for t in (y, a.grad, b.grad)]


def _channels_last(x):
    return x.contiguous(memory_format=torch.channels_last)


MODES = list(itertools.product(["bilinear", "nearest", "bicubic"], ["zeros", "border", "reflection"], [False, True]))


@pytest.mark.parametrize("mode,pad,align", MODES)
def test_grid_sample_float32_layouts(mode, pad, align):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 6)
    g = torch.rand(2, 4, 7, 2) * 2.4 - 1.2
    go = torch.randn(2, 3, 4, 7)
    kw = dict(mode=mode, padding_mode=pad, align_corners=align)
    ref = _grid_sample_all(x, g, go, "cpu", torch.float32, **kw)
    before = _fallbacks()
    gT = g.transpose(1, 2).contiguous().transpose(1, 2)  # permuted grid
    for xv, gv in [(x, g), (_channels_last(x), gT), (x[..., ::1], g.flip(-1).flip(-1))]:
        a = xv.detach().to("hpu").requires_grad_()
        b = gv.detach().to("hpu").requires_grad_()
        y = F.grid_sample(a, b, **kw)
        y.backward(go.to("hpu"))
        for h, c in zip((y, a.grad, b.grad), ref):
            torch.testing.assert_close(h.cpu(), c, atol=2e-5, rtol=1e-5)
    assert _fallbacks() == before, fallback.counts()


@pytest.mark.parametrize("mode,pad,align", MODES)
def test_grid_sample_bfloat16_vs_float64(mode, pad, align):
    """torch's CPU rounds the coordinates to bfloat16; hpu must be no further from float64."""
    torch.manual_seed(1)
    x = torch.randn(2, 3, 5, 6).bfloat16()
    g = (torch.rand(2, 4, 7, 2) * 2.4 - 1.2).bfloat16()
    go = torch.randn(2, 3, 4, 7).bfloat16()
    kw = dict(mode=mode, padding_mode=pad, align_corners=align)
    r64 = _grid_sample_all(x, g, go, "cpu", torch.float64, **kw)
    cpu = _grid_sample_all(x, g, go, "cpu", torch.bfloat16, **kw)
    before = _fallbacks()
    hpu = _grid_sample_all(x, g, go, "hpu", torch.bfloat16, **kw)
    assert _fallbacks() == before, fallback.counts()
    for h, c, r in zip(hpu, cpu, r64):
        eh = (h.double() - r).abs().max().item()
        ec = (c.double() - r).abs().max().item()
        assert eh <= ec + 1e-2 * (r.abs().max().item() + 1), (eh, ec)


def test_grid_sample_zero_size_and_large_coordinates():
    x = torch.randn(0, 3, 4, 4)
    g = torch.rand(0, 2, 2, 2)
    before = _fallbacks()
    assert F.grid_sample(x.to("hpu"), g.to("hpu"), align_corners=False).shape == (0, 3, 2, 2)
    x = torch.randn(1, 2, 4, 4)
    g = torch.tensor([[[[1e20, -1e20], [3.0, 0.5]], [[-3e9, 0.0], [-0.2, 0.9]]]])
    for mode, pad in itertools.product(["bilinear", "nearest"], ["zeros", "border", "reflection"]):
        c = F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=False)
        h = F.grid_sample(x.to("hpu"), g.to("hpu"), mode=mode, padding_mode=pad, align_corners=False)
        torch.testing.assert_close(h.cpu(), c, equal_nan=True)
    assert _fallbacks() == before, fallback.counts()


def test_grid_sample_bad_input_raises_like_cpu():
    x, g = torch.randn(2, 3, 4, 4), torch.rand(3, 2, 2, 2)  # batch mismatch
    with pytest.raises(RuntimeError):
        F.grid_sample(x, g, align_corners=False)
    with pytest.raises(RuntimeError):
        F.grid_sample(x.to("hpu"), g.to("hpu"), align_corners=False)
    with pytest.raises(RuntimeError):
        torch.grid_sampler_2d(x.to("hpu"), torch.rand(2, 2, 2, 3).to("hpu"), 0, 0, False)
