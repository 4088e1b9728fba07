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


# ----------------------------------------------------------------------- attention

import math  # noqa: E402

import torch.nn.functional as F  # noqa: E402

from habana_frameworks.torch.hpex.kernels import FusedSDPA  # noqa: E402


def sdpa_ref(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q k^T * scale + mask) v in float64, GQA by repeating k/v heads."""
    q, k, v = q.double(), k.double(), v.double()
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.double()
    p = torch.softmax(s, -1).nan_to_num(0.0)  # a fully masked row gives 0, as torch's CPU SDPA
    return p @ v


CASES = [  # B, Hq, Hkv, L, S, D, causal, mask kind
    (2, 4, 4, 100, 130, 16, False, None),
    (1, 4, 2, 200, 200, 32, True, None),   # GQA, several tiles, causal
    (2, 2, 2, 70, 300, 8, False, "float"),
    (2, 2, 1, 70, 150, 8, False, "bool"),  # MQA with a bool mask
]


def make_mask(kind, B, H, L, S, dtype):
    g = torch.Generator().manual_seed(1)
    if kind == "float":
        return torch.randn(B, 1, L, S, generator=g).to(dtype)
    if kind == "bool":
        m = torch.rand(L, S, generator=g) > 0.3
        m[3] = False  # a fully masked row
        return m
    return None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_fused_sdpa_forward_backward(dtype, case):
    B, Hq, Hk, L, S, D, causal, mk = case
    torch.manual_seed(0)
    q, k, v = torch.randn(B, Hq, L, D, dtype=dtype), torch.randn(B, Hk, S, D, dtype=dtype), torch.randn(B, Hk, S, D, dtype=dtype)
    g = torch.randn(B, Hq, L, D, dtype=dtype)
    mask = make_mask(mk, B, Hq, L, S, dtype)
    qh, kh, vh = (leaf(t, "hpu") for t in (q, k, v))
    out = FusedSDPA.apply(qh, kh, vh, None if mask is None else mask.to("hpu"), 0.0, causal)
    out.backward(g.to("hpu"))
    qc, kc, vc = (leaf(t.double(), "cpu") for t in (q, k, v))
    ref = sdpa_ref(qc, kc, vc, mask, causal)
    ref.backward(g.double())
    t = dict(atol=2e-5, rtol=2e-5) if dtype == torch.float32 else dict(atol=6e-2, rtol=5e-2)
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), **t)
    for a, b in ((qh, qc), (kh, kc), (vh, vc)):
        torch.testing.assert_close(a.grad.cpu().double(), b.grad, **t)


def test_sdpa_on_hpu_is_native_and_matches_cpu(fallback_counter):
    torch.manual_seed(0)
    q = torch.randn(2, 3, 50, 16)
    m = torch.randn(50, 50)
    qh = leaf(q, "hpu")
    out = F.scaled_dot_product_attention(qh, qh * 0.5, qh, attn_mask=m.to("hpu"), scale=0.3)
    out.sum().backward()
    qc = leaf(q, "cpu")
    ref = F.scaled_dot_product_attention(qc, qc * 0.5, qc, attn_mask=m, scale=0.3)
    ref.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(qh.grad.cpu(), qc.grad, atol=1e-5, rtol=1e-5)
    assert fallback_counter() == {}
    # 3-D operands and a broadcast batch
    x, y = torch.randn(4, 9, 8), torch.randn(1, 11, 8)
    torch.testing.assert_close(F.scaled_dot_product_attention(x.to("hpu"), y.to("hpu"), y.to("hpu")).cpu(),
                               F.scaled_dot_product_attention(x, y, y), atol=1e-5, rtol=1e-5)


def test_sdpa_bad_input_raises_like_torch():
    q, k = torch.randn(2, 4, 8, 16), torch.randn(2, 4, 9, 8)
    for args, kw in [((q, k, k), {}), ((q, q, q), dict(attn_mask=torch.ones(8, 8, dtype=torch.int32))),
                     ((q, q[:, :3], q[:, :3]), dict(enable_gqa=True))]:
        with pytest.raises(RuntimeError) as cpu_err:
            F.scaled_dot_product_attention(*args, **kw)
        hargs = [a.to("hpu") for a in args]
        hkw = {n: t.to("hpu") if isinstance(t, torch.Tensor) else t for n, t in kw.items()}
        with pytest.raises(RuntimeError) as hpu_err:
            F.scaled_dot_product_attention(*hargs, **hkw)
        assert str(hpu_err.value) == str(cpu_err.value)
    with pytest.raises(RuntimeError):
        FusedSDPA.apply(q.to("hpu"), k.to("hpu"), k.to("hpu"))


def test_fused_sdpa_dropout_mask_and_probs():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 40, 8).to("hpu") for _ in range(3))
    out, dm = FusedSDPA.apply(q, k, v, None, 0.3, False, None, "None", False, None, "left", True)
    assert dm.dtype == torch.bool and dm.shape == (1, 2, 40, 40)
    keep = dm.float().mean().item()
    assert 0.6 < keep < 0.8
    p = torch.softmax(q.cpu() @ k.cpu().transpose(-2, -1) / math.sqrt(8), -1)
    ref = (p * dm.cpu() / 0.7) @ v.cpu()
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    out2, probs = FusedSDPA.apply(q, k, v, None, 0.0, True, None, "none", False, None, "left", False, True)
    torch.testing.assert_close(probs.cpu(), torch.softmax(
        (q.cpu() @ k.cpu().transpose(-2, -1) / math.sqrt(8)).masked_fill(~torch.ones(40, 40, dtype=torch.bool).tril(),
                                                                          float("-inf")), -1), atol=1e-5, rtol=1e-5)


def test_fused_sdpa_dropout_backward_consistent():
    """With dropout, the gradient is that of the output actually produced (same mask)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 33, 8) for _ in range(3))
    qh, kh, vh = (leaf(t, "hpu") for t in (q, k, v))
    out, dm = FusedSDPA.apply(qh, kh, vh, None, 0.2, False, None, "None", False, None, "left", True)
    out.sum().backward()
    qc, kc, vc = (leaf(t, "cpu") for t in (q, k, v))
    p = torch.softmax(qc @ kc.transpose(-2, -1) / math.sqrt(8), -1)
    ((p * dm.cpu() / 0.8) @ vc).sum().backward()
    for a, b in ((qh, qc), (kh, kc), (vh, vc)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-5, rtol=1e-5)


def test_fused_sdpa_assertions_and_valid_seq_len():
    q = torch.randn(2, 2, 6, 8).to("hpu")
    ql = leaf(q, "hpu")
    with pytest.raises(AssertionError, match="Return_dropout_mask is not supported in recompute mode"):
        FusedSDPA.apply(q, q, q, None, 0.1, False, None, "None", True, None, "left", True)
    with pytest.raises(AssertionError, match="return_attn_probs is supported only for inference mode"):
        FusedSDPA.apply(ql, ql, ql, None, 0.0, False, None, "None", None, None, "left", False, True)
    with pytest.raises(AssertionError, match="Optimized softmax mode is supported in recompute training mode only"):
        FusedSDPA.apply(ql, ql, ql, None, 0.0, False, None, "fast", True)
    with pytest.raises(AssertionError, match="Valid sequence length is supported only in inference"):
        FusedSDPA.apply(q, q, q, None, 0.0, False, None, "None", None, torch.tensor([3, 6]))
    # right padding: batch 0 has 3 valid tokens; its first 3 rows see only those keys
    out = FusedSDPA.apply(q, q, q, None, 0.0, True, None, "None", None, torch.tensor([3, 6]), "right")
    ref0 = sdpa_ref(q[:1, :, :3].cpu(), q[:1, :, :3].cpu(), q[:1, :, :3].cpu(), causal=True)
    torch.testing.assert_close(out[:1, :, :3].cpu().double(), ref0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1:].cpu().double(), sdpa_ref(q[1:].cpu(), q[1:].cpu(), q[1:].cpu(), causal=True),
                               atol=1e-5, rtol=1e-5)


def fast_softmax_ref(q, k, v, causal):
    """softmax_mode="fast" from its documented behaviour: the exponentials exp(s - rowmax)
    are rounded to bfloat16 before they meet v; the row sum stays exact (float64 here)."""
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return (e.float().to(torch.bfloat16).double() @ v) / e.sum(-1, keepdim=True)


@pytest.mark.parametrize("causal", [False, True])
def test_fused_sdpa_fast_softmax(causal):
    torch.manual_seed(0)
    B, H, L, D = 2, 2, 96, 16  # one key tile: the kernel's row max is the global one
    q, k, v = (torch.randn(B, H, L, D) for _ in range(3))
    qh, kh, vh = (leaf(t, "hpu") for t in (q, k, v))
    out = FusedSDPA.apply(qh, kh, vh, None, 0.0, causal, None, "fast", causal)  # recompute only when causal
    exact = sdpa_ref(q, k, v, causal=causal)
    fast = fast_softmax_ref(q, k, v, causal)
    got = out.detach().cpu().double()
    # (the kernel's exp is within 2 ulp of exp: a few roundings flip at a bfloat16 boundary)
    torch.testing.assert_close(got, fast, atol=1e-3, rtol=1e-2)
    assert (got - exact).abs().mean() > 10 * (got - fast).abs().mean()  # the reduced precision is real
    default = FusedSDPA.apply(q.to("hpu"), k.to("hpu"), v.to("hpu"), None, 0.0, causal)
    torch.testing.assert_close(default.cpu().double(), exact, atol=2e-5, rtol=2e-5)
    # The backward uses the same rounded probabilities: close to the exact gradients.
    g = torch.randn(B, H, L, D)
    out.backward(g.to("hpu"))
    qc, kc, vc = (leaf(t.double(), "cpu") for t in (q, k, v))
    sdpa_ref(qc, kc, vc, causal=causal).backward(g.double())
    for a, b in ((qh, qc), (kh, kc), (vh, vc)):
        torch.testing.assert_close(a.grad.cpu().double(), b.grad, atol=3e-2, rtol=3e-2)
    # Non-recompute training takes "fast" with any mask; recompute training only causal.
    if not causal:
        with pytest.raises(AssertionError, match=r"Optimized softmax mode is supported in recompute training "
                                                 r"mode only in causal\(triangular\) mask case"):
            FusedSDPA.apply(qh, kh, vh, None, 0.0, False, None, "fast", True)
        FusedSDPA.apply(qh, kh, vh, None, 0.0, False, None, "FAST", False).sum().backward()


# ------------------------------------------------------------------- rotary embedding

from habana_frameworks.torch.hpex.kernels import (RotaryPosEmbeddingHelperV1, RotaryPosEmbeddingHelperV2,  # noqa: E402
                                                  RotaryPosEmbeddingHelperV3, RotaryPosEmbeddingMode,
                                                  apply_rotary_pos_emb)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_tables(S, D, dtype=torch.float32):
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    f = torch.outer(torch.arange(S).float(), inv)
    emb = torch.cat((f, f), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_v2_position_ids_forward_backward(dtype):
    """optimum's FusedRoPE.apply(q, cos, sin, position_ids) with [1,1,S_max,D] caches."""
    torch.manual_seed(0)
    B, H, S, D, Smax = 2, 3, 5, 16, 12
    q = torch.randn(B, H, S, D, dtype=dtype)
    cos, sin = rope_tables(Smax, D, dtype)
    pos = torch.tensor([[0, 1, 2, 3, 4], [4, 5, 6, 7, 8]])
    g = torch.randn(B, H, S, D, dtype=dtype)
    qh = leaf(q, "hpu")
    out = RotaryPosEmbeddingHelperV2.apply(qh, cos[None, None].to("hpu"), sin[None, None].to("hpu"), pos.to("hpu"))
    out.backward(g.to("hpu"))
    qc = leaf(q.double(), "cpu")
    c, s = cos.double()[pos].unsqueeze(1), sin.double()[pos].unsqueeze(1)
    ref = qc * c + rotate_half(qc) * s
    ref.backward(g.double())
    assert out.dtype == dtype
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), **tol(dtype))
    torch.testing.assert_close(qh.grad.cpu().double(), qc.grad, **tol(dtype))


def test_rope_v1_offset_pairwise_and_v3():
    torch.manual_seed(0)
    q = torch.randn(1, 2, 4, 8)
    cos, sin = rope_tables(10, 8)
    out = RotaryPosEmbeddingHelperV1.apply(q.to("hpu"), cos.to("hpu"), sin.to("hpu"), 3)
    torch.testing.assert_close(out.cpu(), q * cos[3:7] + rotate_half(q) * sin[3:7], atol=1e-6, rtol=1e-6)
    # PAIRWISE (GPT-J): pairs (x0, x1) -> (x0 c - x1 s, x1 c + x0 s)
    c2, s2 = cos[:4].repeat_interleave(1, -1), sin[:4]
    out = apply_rotary_pos_emb(q.to("hpu"), c2.to("hpu"), s2.to("hpu"), None, 0, RotaryPosEmbeddingMode.PAIRWISE)
    x0, x1 = q[..., 0::2], q[..., 1::2]
    ref = torch.empty_like(q)
    ref[..., 0::2] = x0 * c2[..., 0::2] - x1 * s2[..., 0::2]
    ref[..., 1::2] = x1 * c2[..., 1::2] + x0 * s2[..., 1::2]
    torch.testing.assert_close(out.cpu(), ref, atol=1e-6, rtol=1e-6)
    # ChatGLM: p [S, B, H, D], rope_cache [S, B, rot/2, 2]; the rest of the channels pass
    S, B, H, D, rot = 4, 2, 3, 12, 8
    p = torch.randn(S, B, H, D)
    cache = torch.randn(S, B, rot // 2, 2)
    out = RotaryPosEmbeddingHelperV3.apply(p.to("hpu"), cache.to("hpu"))
    xs = p[..., :rot].reshape(S, B, H, rot // 2, 2)
    rc = cache.view(S, B, 1, rot // 2, 2)
    ref = torch.stack([xs[..., 0] * rc[..., 0] - xs[..., 1] * rc[..., 1],
                       xs[..., 1] * rc[..., 0] + xs[..., 0] * rc[..., 1]], -1).flatten(3)
    torch.testing.assert_close(out.cpu(), torch.cat((ref, p[..., rot:]), -1), atol=1e-6, rtol=1e-6)
    assert "Tensor sin, Tensor cos" in str(torch.ops.hpu.rotary_pos_embedding.default._schema)


# ------------------------------------------------------- the bridge's hpu::sdpa_* ops

def sdpa_dropout_ref(q, k, v, keep, p, causal, scale):
    """softmax(q k^T * scale) with the keep mask applied (kept / (1-p)), then v; float64."""
    q, k, v = q.double(), k.double(), v.double()
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    probs = torch.softmax(s, -1)
    d = probs * keep.double() / (1 - p) if keep is not None else probs
    return d @ v, probs


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("Hq,Hk,causal,p", [(4, 4, True, 0.0), (4, 2, False, 0.0), (2, 2, True, 0.3)])
def test_sdpa_fwd_bwd_ops(dtype, Hq, Hk, causal, p, fallback_counter):
    """hpu::sdpa_fwd returns (out, P, dm) and hpu::sdpa_bwd works from P and dm; both equal
    the formula in float64 (dropout: with the keep mask the forward returned)."""
    torch.manual_seed(0)
    B, L, D = 2, 33, 16
    q, k, v = torch.randn(B, Hq, L, D, dtype=dtype), torch.randn(B, Hk, L, D, dtype=dtype), torch.randn(B, Hk, L, D, dtype=dtype)
    g = torch.randn(B, Hq, L, D, dtype=dtype)
    scale = 0.3
    qh, kh, vh, gh = (t.to("hpu") for t in (q, k, v, g))
    seed = torch.tensor([1234, 0]).to("hpu")
    out, P, dm = torch.ops.hpu.sdpa_fwd_dropout_seed(seed, qh, kh, vh, None, p, scale, causal, "None", None, "left")
    keep = dm.cpu() if p > 0 else None
    assert (dm.numel() == 0) == (p == 0)
    if p > 0:
        assert dm.shape == (B, Hq, L, L) and dm.dtype == torch.bool
        assert 0.5 < keep.float().mean().item() < 0.85  # about 1 - p kept
    qc, kc, vc = (leaf(t.double(), "cpu") for t in (q, k, v))
    ref, probs = sdpa_dropout_ref(qc, kc, vc, keep, p, causal, scale)
    t = dict(atol=2e-5, rtol=2e-5) if dtype == torch.float32 else dict(atol=6e-2, rtol=5e-2)
    torch.testing.assert_close(out.cpu().double(), ref.detach(), **t)
    torch.testing.assert_close(P.cpu().double(), probs.detach(), **t)
    ref.backward(g.double())
    dq, dk, dv = torch.ops.hpu.sdpa_bwd(gh, qh, kh, vh, P, dm if p > 0 else None, causal, p, scale, out)
    for a, b in ((dq, qc), (dk, kc), (dv, vc)):
        torch.testing.assert_close(a.cpu().double(), b.grad, **t)
    # the recompute pair with the same seed gives the same forward, and its backward the same grads
    out2, m, linv, sd = torch.ops.hpu.sdpa_recomp_fwd_dropout_seed(seed, qh, kh, vh, None, p, scale, causal, True,
                                                                   "None", None, "left")
    torch.testing.assert_close(out2.cpu(), out.cpu())
    grads = torch.ops.hpu.sdpa_recomp_bwd(gh, qh, kh, vh, None, m, linv, sd, causal, p, scale, "None", out2)
    for a, b in zip(grads, (qc, kc, vc)):
        torch.testing.assert_close(a.cpu().double(), b.grad, **t)
    assert fallback_counter() == {}


def test_sdpa_op_variants_schemas_and_fakes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    for name in ("sdpa_fwd", "sdpa_fwd_dropout", "sdpa_fwd_non_dropout", "sdpa_fwd_dropout_seed", "sdpa_bwd",
                 "sdpa_recomp_fwd", "sdpa_recomp_fwd_dropout", "sdpa_recomp_fwd_non_dropout",
                 "sdpa_recomp_fwd_dropout_seed", "sdpa_recomp_bwd"):
        assert hasattr(torch.ops.hpu, name), name
    s = str(torch.ops.hpu.sdpa_bwd.default._schema)
    assert s.endswith("(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor P, Tensor? dm, bool is_causal, float p, "
                      "float scale, Tensor fwd_out) -> (Tensor, Tensor, Tensor)")
    with FakeTensorMode():
        q = torch.empty(1, 2, 5, 8)
        kv = torch.empty(1, 2, 7, 8)
        o, P, dm = torch.ops.hpu.sdpa_fwd_non_dropout(q, kv, kv, None, 0.0, 0.1, False, "None", None, "left")
        assert o.shape == (1, 2, 5, 8) and P.shape == (1, 2, 5, 7)
        o, m, linv, sd = torch.ops.hpu.sdpa_recomp_fwd_dropout(q, kv, kv, None, 0.1, 0.1, False, True, "fast", None,
                                                               "right")
        assert m.shape == (1, 2, 5, 1)
        dq, dk, dv = torch.ops.hpu.sdpa_bwd(o, q, kv, kv, P, None, False, 0.0, 0.1, o)
        assert dk.shape == kv.shape


# ------------------------------------------------------------- CTCLoss, CustomSoftmax

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("concat", [False, True])
def test_ctc_loss_matches_torch(dtype, reduction, concat, fallback_counter):
    from habana_frameworks.torch.hpex.kernels import CTCLoss
    torch.manual_seed(0)
    T, N, C, S = 30, 4, 7, 9
    logits = torch.randn(T, N, C)
    targets = torch.randint(1, C, (N, S))
    targets[1, 2] = targets[1, 1]  # a repeated label needs a blank between
    il = torch.tensor([30, 25, 17, 30])
    tl = torch.tensor([9, 5, 0, 7])  # an empty target too
    if concat:
        targets = torch.cat([targets[n, :tl[n]] for n in range(N)])
    lp_cpu = torch.log_softmax(logits, -1).to(dtype).double().requires_grad_()
    ref = torch.nn.functional.ctc_loss(lp_cpu, targets, il, tl, blank=0, reduction=reduction)
    g = torch.rand(ref.shape, dtype=torch.float64) + 0.5
    ref.backward(g)
    lp = torch.log_softmax(logits, -1).to(dtype).to("hpu").requires_grad_()
    loss = CTCLoss.apply(lp, targets.to("hpu"), il.to("hpu"), tl.to("hpu"), 0, reduction, False)
    loss.backward(g.to(dtype).to("hpu"))
    t = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=2e-2)
    assert loss.dtype == dtype
    torch.testing.assert_close(loss.detach().cpu().double(), ref.detach(), **t)
    torch.testing.assert_close(lp.grad.cpu().double(), lp_cpu.grad, **t)
    assert fallback_counter() == {}


def test_ctc_loss_zero_infinity_and_blank():
    from habana_frameworks.torch.hpex.kernels import CTCLoss
    torch.manual_seed(1)
    T, N, C = 4, 2, 5
    lp = torch.log_softmax(torch.randn(T, N, C), -1)
    targets = torch.tensor([[1, 1, 1, 1], [2, 3, 0, 0]])  # the first cannot fit in 4 steps (needs 7)
    il, tl = torch.tensor([4, 4]), torch.tensor([4, 2])
    for zi in (False, True):
        ref_lp = lp.clone().requires_grad_()
        ref = torch.nn.functional.ctc_loss(ref_lp, targets, il, tl, blank=4, reduction="sum", zero_infinity=zi)
        h = lp.to("hpu").requires_grad_()
        out = CTCLoss.apply(h, targets.to("hpu"), il, tl, 4, "sum", zi)
        torch.testing.assert_close(out.detach().cpu(), ref.detach())
        if zi:
            ref.backward()
            out.backward()
            torch.testing.assert_close(h.grad.cpu(), ref_lp.grad, atol=1e-6, rtol=1e-5)


def test_custom_softmax():
    from habana_frameworks.torch.hpex.kernels import CustomSoftmax
    torch.manual_seed(0)
    x = torch.randn(3, 5, 40, dtype=torch.bfloat16)
    for flavor in (0, 1):
        xh = x.to("hpu").requires_grad_()
        y = CustomSoftmax.apply(xh, flavor)
        xc = x.double().requires_grad_()
        ref = torch.softmax(xc, -1)
        torch.testing.assert_close(y.detach().cpu().double(), ref.detach(), atol=1e-2, rtol=1e-2)
        g = torch.randn(x.shape)
        y.backward(g.to(torch.bfloat16).to("hpu"))
        ref.backward(g.to(torch.bfloat16).double())
        torch.testing.assert_close(xh.grad.cpu().double(), xc.grad, atol=2e-2, rtol=2e-2)
    with pytest.raises(RuntimeError, match="only bfloat16"):
        CustomSoftmax.apply(torch.randn(3).to("hpu"), 0)
