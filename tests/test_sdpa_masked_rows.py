"""F.scaled_dot_product_attention backward with query rows masked by a huge additive float
mask, as transformers builds padding masks (torch.finfo(dtype).min on every key of a padded
query row, plus ALiBi's per-head bias for Falcon/BLOOM). For such a row the row maximum m is
about -3.4e38, so the log-sum-exp m + log(l) rounds to m, and a backward that recomputes the
probabilities as exp(s - lse) gets 1 instead of 1/l (Falcon with ALiBi and left padding: hpu
dV 1.5 of the largest gradient away from float64). Judged against float64 on CPU; runs in
eager and lazy mode (the file is on the Makefile's lazy line)."""
import pytest
import torch
import torch.nn.functional as F

import habana_frameworks.torch.core as htcore



def _inputs(gen, b=2, hq=4, hkv=4, lq=6, lk=6, d=8):
    q = torch.randn(b, hq, lq, d, generator=gen)
    k = torch.randn(b, hkv, lk, d, generator=gen)
    v = torch.randn(b, hkv, lk, d, generator=gen)
    return q, k, v


def _padding_mask(b, hq, lq, lk, alibi, gen, fill):
    """Left padding of 2 tokens on the first sequence: its first two query rows and its
    first two key columns are masked with finfo.min (transformers' 4-d mask); ALiBi adds a
    per-head linear bias to every score."""
    mask = torch.zeros(b, 1, lq, lk)
    mask[0, :, :, :2] = fill
    mask[0, :, :2, :] = fill
    mask = mask.expand(b, hq, lq, lk).clone()
    if alibi:
        slopes = torch.rand(hq, generator=gen) * 0.5
        mask = mask + slopes.view(1, hq, 1, 1) * torch.arange(lk).view(1, 1, 1, lk)
    return mask


def _grads(q, k, v, mask, device, dtype, kv):
    leaves = [t.detach().to(device=device, dtype=dtype, copy=True).requires_grad_() for t in (q, k, v)]
    qq, kk, vv = leaves
    if kv == "expand":  # one k/v head expanded to every query head
        kk = kk.expand(-1, q.shape[1], -1, -1)
        vv = vv.expand(-1, q.shape[1], -1, -1)
    # kv == "broadcast": one k/v head that the matmuls broadcast (Falcon's multi-query path)
    if device == "cpu":  # the reference: plain softmax(q k^T / sqrt(d) + mask) v (torch's CPU
        # flash kernel, picked for equal head counts, recomputes the probabilities from a
        # logsumexp that rounds to the row max on these rows, in float64 too)
        scores = qq @ kk.transpose(-2, -1) / q.shape[-1] ** 0.5 + mask.to(dtype=dtype)
        out = torch.softmax(scores, dim=-1) @ vv
    else:
        out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask.to(device=device, dtype=dtype))
    (out * torch.linspace(-1, 1, out.shape[-1], device=device, dtype=dtype)).sum().backward()
    htcore.mark_step()
    return [out.detach().cpu().double()] + [t.grad.cpu().double() for t in leaves]


def _rel_err(got, ref):
    return [(g - r).abs().max().item() / max(r.abs().max().item(), 1e-30) for g, r in zip(got, ref)]


@pytest.mark.parametrize("fill", [torch.finfo(torch.float32).min, -1e9])
@pytest.mark.parametrize("alibi", [False, True])
@pytest.mark.parametrize("kv", ["full", "expand", "broadcast"])
def test_fully_masked_rows_get_their_gradient(fill, alibi, kv):
    """Judged against float64 on CPU. In float32, s + fill rounds every score of a padding
    row to the same value (so its probabilities are exactly 1/l); the float64 reference gets
    the same rounding from a fill of the same relative size (-1e30 for -1e9). torch's own
    CPU flash kernel loses these rows as the old hpu kernel did (its logsumexp rounds to
    the row max), so the reference is the plain softmax formula."""
    gen = torch.Generator().manual_seed(5)
    q, k, v = _inputs(gen, hkv=4 if kv == "full" else 1)
    mask = _padding_mask(2, 4, 6, 6, alibi, gen, fill)
    gen_ref = torch.Generator().manual_seed(5)
    _inputs(gen_ref, hkv=4 if kv == "full" else 1)
    ref_mask = _padding_mask(2, 4, 6, 6, alibi, gen_ref, fill if fill < -1e30 else -1e30)
    got = _grads(q, k, v, mask, "hpu", torch.float32, kv)
    ref = _grads(q, k, v, ref_mask, "cpu", torch.float64, kv)
    for name, err in zip(("out", "dq", "dk", "dv"), _rel_err(got, ref)):
        assert err < 1e-5, f"{name}: {err:.3g} of the largest value away from float64"


def test_moderately_large_scores_keep_their_precision():
    """Rows whose scores sit near 2000 (a large additive bias, not a mask) lose most of
    log(l) in m + log(l) in float32; the backward must still match float64."""
    gen = torch.Generator().manual_seed(6)
    q, k, v = _inputs(gen)
    mask = torch.full((2, 4, 6, 6), 2000.0) + torch.randn(2, 4, 6, 6, generator=gen)
    ref = _grads(q, k, v, mask, "cpu", torch.float64, "full")
    got = _grads(q, k, v, mask, "hpu", torch.float32, "full")
    for name, g, r in zip(("out", "dq", "dk", "dv"), got, ref):
        err = (g - r).abs().max().item() / max(r.abs().max().item(), 1e-30)
        assert err < 1e-4, f"{name}: {err:.3g} of the largest value away from float64"
