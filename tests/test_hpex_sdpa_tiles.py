"""The attention kernel's tiling (kernels/attention.go): query and key blocks of 96 with
partial tails, the causal limit skipping masked blocks when queries and keys differ in
number, dropout across several tiles, and strided float32 operands read in place; each
forward and backward against PyTorch's CPU SDPA in float64 (also in the lazy pass)."""
import math

import pytest
import torch
import torch.nn.functional as F

from habana_frameworks.torch.hpex.kernels import FusedSDPA


def leaf(t, dev):
    return t.detach().clone().to(dev).requires_grad_()


def tol(dtype):
    return dict(atol=2e-5, rtol=2e-5) if dtype == torch.float32 else dict(atol=6e-2, rtol=5e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("L,S,Hq,Hk", [(130, 250, 2, 1), (250, 130, 2, 2), (193, 193, 4, 2)])
def test_causal_tiles_match_cpu(dtype, L, S, Hq, Hk):
    torch.manual_seed(0)
    q, k, v = torch.randn(1, Hq, L, 32, dtype=dtype), torch.randn(1, Hk, S, 32, dtype=dtype), torch.randn(1, Hk, S, 32, dtype=dtype)
    g = torch.randn(1, Hq, L, 32, dtype=dtype)
    qh, kh, vh = (leaf(t, "hpu") for t in (q, k, v))
    out = FusedSDPA.apply(qh, kh, vh, None, 0.0, True)
    out.backward(g.to("hpu"))
    qc, kc, vc = (leaf(t.double(), "cpu") for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True, enable_gqa=Hq != Hk)
    ref.backward(g.double())
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), **tol(dtype))
    for a, b in ((qh, qc), (kh, kc), (vh, vc)):
        torch.testing.assert_close(a.grad.cpu().double(), b.grad, **tol(dtype))


def test_strided_operands_read_in_place():
    """[B, L, H, D] tensors transposed to [B, H, L, D] (rows H*D apart) give the results of
    their contiguous copies."""
    torch.manual_seed(0)
    B, L, H, D = 2, 150, 3, 16
    x = [torch.randn(B, L, H, D) for _ in range(4)]
    hs = [leaf(t, "hpu") for t in x[:3]]
    out = FusedSDPA.apply(*(t.transpose(1, 2) for t in hs), None, 0.0, True)
    assert not hs[0].transpose(1, 2).is_contiguous()
    out.backward(x[3].transpose(1, 2).to("hpu"))
    cs = [leaf(t.double(), "cpu") for t in x[:3]]
    ref = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in cs), is_causal=True)
    ref.backward(x[3].transpose(1, 2).double())
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), **tol(torch.float32))
    for a, b in zip(hs, cs):
        torch.testing.assert_close(a.grad.cpu().double(), b.grad, **tol(torch.float32))


def test_causal_dropout_across_tiles():
    """Dropout over several tiles under the causal limit: the output and its gradient are
    those of the keep mask the call returns."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 200, 16) for _ in range(3))
    qh, kh, vh = (leaf(t, "hpu") for t in (q, k, v))
    out, dm = FusedSDPA.apply(qh, kh, vh, None, 0.2, True, None, "None", False, None, "left", True)
    out.sum().backward()
    keep = dm.cpu()
    qc, kc, vc = (leaf(t.double(), "cpu") for t in (q, k, v))
    s = (qc @ kc.transpose(-2, -1) / math.sqrt(16)).masked_fill(~torch.ones(200, 200, dtype=torch.bool).tril(),
                                                                 float("-inf"))
    ref = (torch.softmax(s, -1) * keep / 0.8) @ vc
    ref.sum().backward()
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), atol=1e-5, rtol=1e-5)
    for a, b in ((qh, qc), (kh, kc), (vh, vc)):
        torch.testing.assert_close(a.grad.cpu().double(), b.grad, atol=1e-5, rtol=1e-5)


def test_bad_input_raises_after_good_calls():
    """The shape check (torch's own, on meta tensors) remembers only signatures that passed:
    a bad mask raises what CPU raises every time, also after good calls with the same q/k/v
    (for FusedSDPA and F.scaled_dot_product_attention alike)."""
    q = torch.randn(1, 2, 8, 16)
    bad = torch.ones(1, 2, 8, 7, dtype=torch.bool)  # 7 keys for 8
    with pytest.raises(Exception) as cpu_err:
        F.scaled_dot_product_attention(q, q, q, attn_mask=bad)
    qh, badh = q.to("hpu"), bad.to("hpu")
    for _ in range(2):
        FusedSDPA.apply(qh, qh, qh, None, 0.0, True)
        F.scaled_dot_product_attention(qh, qh, qh, is_causal=True)
        with pytest.raises(cpu_err.type):
            FusedSDPA.apply(qh, qh, qh, badh, 0.0, False)
        with pytest.raises(cpu_err.type):
            F.scaled_dot_product_attention(qh, qh, qh, attn_mask=badh)
