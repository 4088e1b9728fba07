"""torchvision's roi_pool, ps_roi_pool, ps_roi_align and deform_conv2d (forward and backward)
run on the device as on Gaudi (kernels/roi_pool_ops.go, kernels/deform_conv.go): against
torchvision's CPU kernels (float32/float64 bit for bit for the pooling ops, to GEMM rounding
for deform_conv2d), bfloat16 against float32 CPU, float64 gradcheck, layouts, bad input.
Eager here, lazy from the Makefile's second pass."""
from __future__ import annotations

import pytest
import torch

import habana_frameworks.torch.core as htcore
from habana_frameworks.torch._ops import fallback

torchvision = pytest.importorskip("torchvision")
from torchvision import ops  # noqa: E402


def _new_fallbacks(before):
    after = fallback.counts()
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _rois(gen, k=6, batches=2, size=14.0, dtype=torch.float32):
    b = torch.rand(k, 4, generator=gen, dtype=torch.float64) * size * 0.7
    b[:, 2:] = b[:, :2] + b[:, 2:] * 0.6 + 1
    b[0] = torch.tensor([-3.0, -2.0, size + 4, size + 1])  # partly outside the map
    b[1] = torch.tensor([5.0, 5.0, 5.2, 5.1])              # under one pixel
    b[2] = torch.tensor([6.0, 6.0, 2.0, 3.0])              # inverted corners
    idx = torch.randint(0, batches, (k, 1), generator=gen).to(b.dtype)
    return torch.cat([idx, b], 1).to(dtype)


POOLS = {
    "roi_pool": lambda x, r, scale: ops.roi_pool(x, r, (3, 4), scale),
    "ps_roi_pool": lambda x, r, scale: ops.ps_roi_pool(x, r, (2, 3), scale),
    "ps_roi_align": lambda x, r, scale: ops.ps_roi_align(x, r, (2, 3), scale, 0),
    "ps_roi_align_sr2": lambda x, r, scale: ops.ps_roi_align(x, r, (3, 2), scale, 2),
}


@pytest.mark.parametrize("name", sorted(POOLS))
@pytest.mark.parametrize("scale", [1.0, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pool_forward_backward_match_cpu(name, scale, dtype):
    fn = POOLS[name]
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(2, 12, 13, 15, generator=gen, dtype=dtype)
    rois = _rois(gen, size=13.0 / scale, dtype=dtype)
    xc = x.clone().requires_grad_()
    ref = fn(xc, rois, scale)
    g = torch.randn(ref.shape, generator=gen, dtype=dtype)
    ref.backward(g)
    before = fallback.counts()
    xh = x.to("hpu").requires_grad_()
    out = fn(xh, rois.to("hpu"), scale)
    out.backward(g.to("hpu"))
    htcore.mark_step()
    assert _new_fallbacks(before) == {}
    assert out.device.type == "hpu" and out.dtype == dtype
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=0, atol=0, equal_nan=True)  # 0/0 bins as CPU
    torch.testing.assert_close(xh.grad.cpu(), xc.grad, rtol=1e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool_layouts_box_lists_bf16_and_empty(name):
    """channels_last and sliced maps, boxes as a list per image, bfloat16 (float32 math)
    against float32 CPU on the same rounded inputs, no boxes at all."""
    fn = POOLS[name]
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 24, 16, 18, generator=gen)
    boxes = [_rois(gen, k=5, size=14.0)[[0, 1, 3, 4], 1:], _rois(gen, k=4, size=14.0)[[0, 3], 1:]]
    ref = fn(x[:, ::2, 1:], boxes, 1.0)
    before = fallback.counts()
    xh = x.to("hpu").contiguous(memory_format=torch.channels_last)
    out = fn(xh[:, ::2, 1:], [b.to("hpu") for b in boxes], 1.0)
    xb = xh.bfloat16().requires_grad_()
    bf = fn(xb, [b.to("hpu").bfloat16() for b in boxes], 1.0)
    bf.float().sum().backward()
    empty = fn(xh, torch.empty(0, 5, device="hpu"), 1.0)
    htcore.mark_step()
    assert _new_fallbacks(before) == {}
    torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)
    xr = x.bfloat16().float().requires_grad_()
    ref_bf = fn(xr, [b.bfloat16().float() for b in boxes], 1.0)
    ref_bf.sum().backward()
    assert bf.dtype == torch.bfloat16 and xb.grad.dtype == torch.bfloat16
    torch.testing.assert_close(bf.detach().cpu().float(), ref_bf.detach(), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(xb.grad.cpu().float(), xr.grad, rtol=1e-2, atol=1e-2)
    assert empty.shape[0] == 0 and empty.device.type == "hpu"


def test_pool_gradcheck_float64():
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(1, 4, 6, 6, generator=gen, dtype=torch.float64).to("hpu").requires_grad_()
    rois = torch.tensor([[0, 0.3, 0.6, 5.2, 4.1], [0, 1.7, 0.2, 4.4, 3.9]], dtype=torch.float64, device="hpu")
    assert torch.autograd.gradcheck(lambda t: ops.ps_roi_align(t, rois, 2, 1.0, 2), (x,))
    assert torch.autograd.gradcheck(lambda t: ops.ps_roi_pool(t, rois, 2, 1.0), (x,))
    # max pooling: distinct values so the argmax does not move under the finite difference
    xd = (torch.randperm(4 * 36, generator=gen).double().view(1, 4, 6, 6) / 10).to("hpu").requires_grad_()
    assert torch.autograd.gradcheck(lambda t: ops.roi_pool(t, rois, 2, 1.0), (xd,))


def test_pool_bad_input_raises_as_cpu():
    x, rois = torch.randn(1, 8, 8, 8), torch.tensor([[0.0, 1, 1, 5, 5]])
    cases = ((lambda a, r: ops.ps_roi_pool(a, r, 3, 1.0), x, rois),   # 8 channels, 3x3 bins
             (lambda a, r: ops.ps_roi_align(a, r, 3, 1.0), x, rois),
             (lambda a, r: torch.ops.torchvision.roi_pool(a, r, 1.0, 2, 2), x, rois.double()),
             (lambda a, r: torch.ops.torchvision.ps_roi_align(a, r, 1.0, 2, 2, 0), x, rois[:, :4]))
    for fn, a, r in cases:
        with pytest.raises(RuntimeError) as cpu_err:
            fn(a, r)
        with pytest.raises(RuntimeError) as hpu_err:
            fn(a.to("hpu"), r.to("hpu"))
        assert str(cpu_err.value).split("\n")[0] == str(hpu_err.value).split("\n")[0]
    assert ops.roi_pool(x.to("hpu"), rois.to("hpu"), 2, 1.0).shape == (1, 8, 2, 2)


# ------------------------------------------------------------------ deform_conv2d

def _deform_args(gen, dtype, use_mask, groups=2, offset_groups=2, stride=2, pad=1, dil=1):
    x = torch.randn(2, 4, 9, 10, generator=gen, dtype=dtype)
    w = torch.randn(6, 4 // groups, 3, 3, generator=gen, dtype=dtype)
    oh = (9 + 2 * pad - dil * 2 - 1) // stride + 1
    ow = (10 + 2 * pad - dil * 2 - 1) // stride + 1
    off = torch.randn(2, 2 * offset_groups * 9, oh, ow, generator=gen, dtype=dtype) * 2
    off[0, 0, 0, 0] = 1.0  # an integer sampling point
    off[0, 1, 0, 1] = -30  # far outside the map
    mask = torch.rand(2, offset_groups * 9, oh, ow, generator=gen, dtype=dtype) if use_mask else None
    bias = torch.randn(6, generator=gen, dtype=dtype)
    return dict(input=x, offset=off, weight=w, bias=bias, mask=mask), dict(stride=stride, padding=pad, dilation=dil)


@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("dtype,geom", [(torch.float32, (2, 2, 2, 1, 1)), (torch.float64, (1, 1, 1, 0, 2)),
                                        (torch.float32, (2, 1, 1, 2, 1))])
def test_deform_conv2d_forward_backward_match_cpu(use_mask, dtype, geom):
    groups, offset_groups, stride, pad, dil = geom
    gen = torch.Generator().manual_seed(7)
    args, kw = _deform_args(gen, dtype, use_mask, groups, offset_groups, stride, pad, dil)
    names = [k for k, v in args.items() if v is not None]
    cpu = {k: (v.clone().requires_grad_() if v is not None else None) for k, v in args.items()}
    ref = ops.deform_conv2d(**cpu, **kw)
    g = torch.randn(ref.shape, generator=gen, dtype=dtype)
    ref.backward(g)
    before = fallback.counts()
    hpu = {k: (v.to("hpu").requires_grad_() if v is not None else None) for k, v in args.items()}
    out = ops.deform_conv2d(**hpu, **kw)
    out.backward(g.to("hpu"))
    htcore.mark_step()
    assert _new_fallbacks(before) == {}
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    assert out.is_contiguous()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **tol)
    for k in names:
        torch.testing.assert_close(hpu[k].grad.cpu(), cpu[k].grad, **tol, msg=lambda m, k=k: f"grad {k}: {m}")


def test_deform_conv2d_gradcheck_bf16_and_module():
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(1, 2, 5, 5, generator=gen, dtype=torch.float64).to("hpu").requires_grad_()
    w = torch.randn(3, 2, 2, 2, generator=gen, dtype=torch.float64).to("hpu").requires_grad_()
    # offsets away from integers: the bilinear sample is not differentiable there
    off = (torch.rand(1, 8, 4, 4, generator=gen, dtype=torch.float64) * 0.8 + 0.1).to("hpu").requires_grad_()
    m = torch.rand(1, 4, 4, 4, generator=gen, dtype=torch.float64).to("hpu").requires_grad_()
    assert torch.autograd.gradcheck(lambda *a: ops.deform_conv2d(a[0], a[1], a[2], mask=a[3]), (x, off, w, m))
    # bfloat16 against float32 CPU on the same rounded values, through the nn.Module
    conv = ops.DeformConv2d(4, 8, 3, padding=1)
    xi = torch.randn(2, 4, 8, 8, generator=gen)
    offi = torch.randn(2, 18, 8, 8, generator=gen)
    ref = ops.DeformConv2d(4, 8, 3, padding=1)
    ref.load_state_dict({k: v.bfloat16().float() for k, v in conv.state_dict().items()})
    expect = ref(xi.bfloat16().float(), offi.bfloat16().float())
    before = fallback.counts()
    hconv = conv.to("hpu").bfloat16()
    got = hconv(xi.to("hpu").bfloat16(), offi.to("hpu").bfloat16())
    got.float().pow(2).mean().backward()
    htcore.mark_step()
    assert _new_fallbacks(before) == {}
    assert got.dtype == torch.bfloat16 and hconv.weight.grad.dtype == torch.bfloat16
    torch.testing.assert_close(got.detach().cpu().float(), expect.detach(), rtol=3e-2, atol=3e-2)


def test_deform_conv2d_bad_input_and_empty_batch():
    x, w = torch.randn(1, 4, 6, 6), torch.randn(2, 4, 3, 3)
    bad = ((x, torch.randn(1, 18, 5, 5), w),     # offset spatial size does not match the output
           (x, torch.randn(1, 18, 4, 4), torch.randn(2, 3, 3, 3)),  # channels not divisible
           (x, torch.randn(1, 18, 4, 4).double(), w))  # mixed dtypes
    for a, o, ww in bad:
        with pytest.raises(RuntimeError) as cpu_err:
            ops.deform_conv2d(a, o, ww)
        with pytest.raises(RuntimeError) as hpu_err:
            ops.deform_conv2d(a.to("hpu"), o.to("hpu"), ww.to("hpu"))
        assert str(cpu_err.value).split("\n")[0] == str(hpu_err.value).split("\n")[0]
    e = ops.deform_conv2d(torch.randn(0, 4, 6, 6, device="hpu"), torch.randn(0, 18, 4, 4, device="hpu"), w.to("hpu"))
    assert e.shape == (0, 2, 4, 4) and e.device.type == "hpu"
