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


# ----------------------------------------------------------------------- segment_reduce

def _segment_case(data, reduce, **kw):
    """segment_reduce on cpu and hpu: values and data gradients equal (same arithmetic, same
    rounding as torch's CPU kernel), nothing falls back."""
    before = _fallbacks()
    on = {k: (v.to("hpu") if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    dc = data.detach().clone().requires_grad_()
    dh = data.detach().to("hpu").requires_grad_()
    yc = torch.segment_reduce(dc, reduce, **kw)
    yh = torch.segment_reduce(dh, reduce, **on)
    torch.testing.assert_close(yh.cpu(), yc, equal_nan=True, rtol=0, atol=0)
    g = torch.randn(yc.shape).to(data.dtype)
    yc.backward(g)
    yh.backward(g.to("hpu"))
    torch.testing.assert_close(dh.grad.cpu(), dc.grad, equal_nan=True, rtol=0, atol=0)
    assert _fallbacks() == before, fallback.counts()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_axes_lengths_offsets(dtype, reduce):
    torch.manual_seed(2)
    data = torch.randn(3, 7, 4).to(dtype)
    data[0, 2, 1] = data[0, 3, 1]  # a tie for max/min
    data[1, 4, 2] = 0.0  # a zero for prod
    lengths = torch.tensor([2, 0, 3, 2])
    _segment_case(data.transpose(0, 1).contiguous(), reduce, lengths=lengths, axis=0)
    _segment_case(data.transpose(0, 1).contiguous(), reduce, lengths=lengths, axis=0, initial=0.5)
    _segment_case(data.transpose(0, 1).contiguous(), reduce,
                  offsets=torch.tensor([0, 2, 2, 5, 7], dtype=torch.int32), axis=0, unsafe=True)
    lengths2 = torch.tensor([[1, 6, 0], [3, 3, 1], [0, 0, 7]])
    _segment_case(data, reduce, lengths=lengths2, axis=1)
    _segment_case(data.permute(0, 2, 1).contiguous().permute(0, 2, 1), reduce, lengths=lengths2, axis=1, initial=-2)
    offsets2 = torch.tensor([[0, 1, 7, 7], [0, 3, 6, 7], [0, 0, 0, 7]])
    _segment_case(data, reduce, offsets=offsets2, axis=1)


def test_segment_reduce_nan_and_errors():
    data = torch.tensor([1.0, float("nan"), 2.0, 3.0, 3.0])
    for reduce in ("max", "min", "sum", "mean", "prod"):
        _segment_case(data, reduce, lengths=torch.tensor([2, 3]))
    d = torch.randn(5)
    for kw in (dict(lengths=torch.tensor([2, 2])), dict(lengths=torch.tensor([6, -1]))):
        with pytest.raises(RuntimeError) as ec:
            torch.segment_reduce(d, "sum", **kw)
        with pytest.raises(RuntimeError) as eh:
            torch.segment_reduce(d.to("hpu"), "sum", **{k: v.to("hpu") for k, v in kw.items()})
        assert str(eh.value) == str(ec.value)
