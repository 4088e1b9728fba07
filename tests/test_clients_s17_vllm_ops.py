"""torch.ops.hpu ops vLLM's Gaudi path calls that came later than test_clients_vllm_ops.py's:
softmax_fa2 (unified attention's online softmax step), compared with the float64 math written
out, eagerly, chained over key chunks, with fp8 scores, under torch.compile(backend="hpu_backend"),
and in Gaudi3's cache-line layout of the row statistics; and the fp8 flash attention forward
fp8_sdpa_recomp_fwd (bfloat16 and fp8 operands, scales, quantised probabilities, fp8 output,
amax outputs, the seeded dropout variant, compile) against float64 attention."""
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import habana_frameworks.torch  # noqa: F401

HPU = "hpu"


def _fa2_ref(x, m_in, l_in):
    """float64: (exp(x - M), M, fixup * L + rowsum, fixup) with M = max(m_in, rowmax)."""
    x, m_in, l_in = x.double(), m_in.double(), l_in.double()
    m = torch.maximum(m_in, x.amax(-1))
    e = torch.exp(x - m.unsqueeze(-1))
    fix = torch.exp(m_in - m)
    return e, m, fix * l_in + e.sum(-1), fix


def _case(shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 3
    m_in = torch.randn(shape[:-1], generator=g)
    l_in = torch.rand(shape[:-1], generator=g) * 5
    return x, m_in, l_in


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 4, 9)])
def test_softmax_fa2_matches_float64(dtype, shape):
    x, m_in, l_in = (t.to(dtype) for t in _case(shape, seed=len(shape)))
    res, m, l, fix = torch.ops.hpu.softmax_fa2(x.to(HPU), inputM=m_in.to(HPU), inputL=l_in.to(HPU))
    ref = _fa2_ref(x, m_in, l_in)
    assert res.dtype == dtype and res.shape == x.shape and m.shape == l.shape == fix.shape == x.shape[:-1]
    tol = dict(atol=1e-6, rtol=1e-6) if dtype == torch.float32 else dict(atol=1e-2, rtol=8e-3)
    for got, want in zip((res, m, l, fix), ref):
        assert got.device.type == HPU and got.dtype == dtype
        torch.testing.assert_close(got.cpu().double(), want, **tol)
    # the results round once from float32: bit-equal to the float64 result rounded to dtype
    # wherever float32 itself is exact enough (the max is exact)
    assert torch.equal(m.cpu(), ref[1].to(dtype))


def test_softmax_fa2_first_step_from_empty_statistics():
    x = _case((4, 6), seed=3)[0]
    m0 = torch.full((4,), -math.inf)
    l0 = torch.zeros(4)
    res, m, l, fix = torch.ops.hpu.softmax_fa2(x.to(HPU), m0.to(HPU), l0.to(HPU))
    torch.testing.assert_close(fix.cpu(), torch.zeros(4))
    torch.testing.assert_close((res / l.unsqueeze(-1)).cpu().double(), torch.softmax(x.double(), -1),
                               atol=1e-6, rtol=1e-6)


def test_softmax_fa2_chunks_give_flash_attention():
    # online softmax over key chunks, as flash attention 2: rescale the accumulator by fixup
    g = torch.Generator().manual_seed(5)
    q, k, v = torch.randn(6, 8, generator=g), torch.randn(20, 8, generator=g), torch.randn(20, 4, generator=g)
    scores = (q @ k.T).to(HPU)
    vh = v.to(HPU)
    m = torch.full((6,), -math.inf, device=HPU)
    l = torch.zeros(6, device=HPU)
    acc = torch.zeros(6, 4, device=HPU)
    for lo in range(0, 20, 7):
        p, m, l, fix = torch.ops.hpu.softmax_fa2(scores[:, lo:lo + 7].contiguous(), inputM=m, inputL=l)
        acc = acc * fix.unsqueeze(-1) + p @ vh[lo:lo + 7]
    out = (acc / l.unsqueeze(-1)).cpu().double()
    ref = torch.softmax(q.double() @ k.double().T, -1) @ v.double()
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("experimental_mode", [False, True])
def test_softmax_fa2_fp8_scores(experimental_mode):
    x, m_in, l_in = _case((4, 16), seed=7)
    descale = torch.tensor([0.5])
    x8 = (x / 0.5).to(torch.float8_e4m3fn)
    m_in, l_in = m_in.bfloat16(), l_in.bfloat16()
    res, m, l, fix = torch.ops.hpu.softmax_fa2(x8.to(HPU), inputM=m_in.to(HPU), inputL=l_in.to(HPU),
                                               experimental_mode=experimental_mode, descale=descale.to(HPU))
    assert res.dtype == torch.float8_e4m3fn and m.dtype == l.dtype == fix.dtype == torch.bfloat16
    xd = (x8.double() * 0.5).to(torch.bfloat16).double()  # cast_from_fp8 to bfloat16
    e, m_ref, l_ref, fix_ref = _fa2_ref(xd, m_in, l_in)
    top = 448.0 if experimental_mode else 240.0
    scale = 2.0 ** math.floor(math.log2(top / float(e.max())))
    torch.testing.assert_close(res.cpu().double(), (e * scale).to(torch.float8_e4m3fn).double(),
                               atol=2.0 ** -9, rtol=0.13)  # at most one fp8 step apart
    assert float(res.cpu().double().max()) <= top
    torch.testing.assert_close(m.cpu().double(), m_ref, atol=1e-2, rtol=8e-3)
    torch.testing.assert_close(l.cpu().double(), l_ref, atol=1e-2, rtol=8e-3)
    torch.testing.assert_close(fix.cpu().double(), fix_ref, atol=1e-2, rtol=8e-3)


def test_softmax_fa2_under_compile_and_bad_shapes():
    x, m_in, l_in = _case((3, 5, 8), seed=9)

    def step(x, m, l):
        p, m2, l2, fix = torch.ops.hpu.softmax_fa2(x, inputM=m, inputL=l)
        return p.sum(-1) / l2, m2, fix

    args = (x.to(HPU), m_in.to(HPU), l_in.to(HPU))
    compiled = torch.compile(step, backend="hpu_backend", fullgraph=True)
    for got, want in zip(compiled(*args), step(*args)):
        torch.testing.assert_close(got.cpu(), want.cpu(), atol=1e-6, rtol=1e-6)
    with pytest.raises(RuntimeError, match="inputM must have shape"):
        torch.ops.hpu.softmax_fa2(args[0], torch.zeros(3, device=HPU), args[2])
    with pytest.raises(RuntimeError, match="last dimension"):
        torch.ops.hpu.softmax_fa2(args[0], args[1], args[2], dim=0)


_GAUDI3 = textwrap.dedent("""
    import math, torch, habana_frameworks.torch
    def to_cl(t, vec):  # vLLM's layout: row j at (j // 8) * vec + j % 8
        n = t.shape[-1]; g = math.ceil(n / 8)
        out = torch.full((*t.shape[:-1], g * vec), 7.0, dtype=t.dtype)
        for j in range(n):
            out[..., (j // 8) * vec + j % 8] = t[..., j]
        return out
    def from_cl(t, n, vec):  # vLLM's convert_cl_aligned_tensor
        return t.reshape(*t.shape[:-1], -1, vec)[..., :8].flatten(-2)[..., :n]
    torch.manual_seed(0)
    x = torch.randn(2, 11, 6).bfloat16()
    m_in = torch.randn(2, 11).bfloat16(); l_in = torch.rand(2, 11).bfloat16()
    vec = 128
    res, m, l, fix = torch.ops.hpu.softmax_fa2(x.to("hpu"), inputM=to_cl(m_in, vec).to("hpu"),
                                               inputL=to_cl(l_in, vec).to("hpu"))
    assert m.shape == (2, 2 * vec), m.shape
    xd, md, ld = x.double(), m_in.double(), l_in.double()
    mr = torch.maximum(md, xd.amax(-1)); e = torch.exp(xd - mr.unsqueeze(-1)); fr = torch.exp(md - mr)
    lr = fr * ld + e.sum(-1)
    tol = dict(atol=1e-2, rtol=8e-3)
    torch.testing.assert_close(res.cpu().double(), e, **tol)
    torch.testing.assert_close(from_cl(m.cpu(), 11, vec).double(), mr, **tol)
    torch.testing.assert_close(from_cl(l.cpu(), 11, vec).double(), lr, **tol)
    torch.testing.assert_close(from_cl(fix.cpu(), 11, vec).double(), fr, **tol)
    assert float(m.cpu()[0, 3 + 8]) == 7.0  # outside the used lanes: inputM's value stays
    print("OK")
""")


def test_softmax_fa2_gaudi3_cache_line_layout():
    env = dict(os.environ, HPUSIM_DEVICE_TYPE="GAUDI3", PT_HPU_LAZY_MODE="0")
    out = subprocess.run([sys.executable, "-c", _GAUDI3], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]


# ---------------------------------------------------------------- fp8_sdpa_recomp_fwd

def _sdpa_case(B=2, H=4, Hk=2, L=5, S=7, E=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, L, E, generator=g), torch.randn(B, Hk, S, E, generator=g),
            torch.randn(B, Hk, S, E, generator=g))


def _sdpa_ref(q, k, v, scale, causal, s_quant=None):
    """float64 softmax attention (GQA by repeating kv heads), its row max, inverse sum, max prob;
    s_quant=(q_scale_s, d_scale_s) rounds the probabilities through fp8 first."""
    q, k, v = q.double(), k.double(), v.double()
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - m)
    l = e.sum(-1, keepdim=True)
    p = e / l
    pq = p if s_quant is None else (p * s_quant[0]).clamp(max=240.0).to(torch.float8_e4m3fn).double() * s_quant[1]
    return pq @ v, m, 1 / l, p.max()


SDPA_ARGS = dict(softmax_mode="None", valid_seq_len=None, seq_padding_type="right")


def _fp8_sdpa(q, k, v, scale, causal, dq=None, dk=None, dv=None, qs=None, qo=None, ds=None, p=0.0, op=None):
    op = op or torch.ops.hpu.fp8_sdpa_recomp_fwd
    return op(q, k, v, None, p, scale, causal, False, "None", dq, dk, dv, qs, qo, ds, True, True, None, "right")


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_sdpa_bfloat16_inputs_match_float64_attention(causal):
    q, k, v = (t.bfloat16() for t in _sdpa_case(seed=1))
    out, m, linv, seed, amax_s, amax_o = _fp8_sdpa(q.to(HPU), k.to(HPU), v.to(HPU), 0.3, causal)
    o_ref, m_ref, linv_ref, pmax = _sdpa_ref(q, k, v, 0.3, causal)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 4, 5, 8)
    assert m.shape == linv.shape == (2, 4, 5, 1) and m.dtype == torch.bfloat16 and linv.dtype == torch.float32
    torch.testing.assert_close(out.cpu().double(), o_ref, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(m.cpu().double(), m_ref, atol=1e-2, rtol=8e-3)
    torch.testing.assert_close(linv.cpu().double(), linv_ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(amax_s.cpu().double(), pmax.reshape(1), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(amax_o.cpu().double(), o_ref.abs().max().reshape(1), atol=1e-2, rtol=1e-2)


def test_fp8_sdpa_fp8_inputs_scales_and_fp8_output():
    q, k, v = _sdpa_case(seed=2)
    sq, sk, sv = 16.0, 32.0, 8.0  # quantisation scales; the op gets their inverses
    q8, k8, v8 = ((t * s).clamp(-240, 240).to(torch.float8_e4m3fn) for t, s in ((q, sq), (k, sk), (v, sv)))
    qd, kd, vd = q8.double() / sq, k8.double() / sk, v8.double() / sv
    o_ref, m_ref, linv_ref, _ = _sdpa_ref(qd, kd, vd, 0.25, True)
    t = lambda x: torch.tensor([x]).to(HPU)  # noqa: E731
    out, m, linv, _, _, amax_o = _fp8_sdpa(q8.to(HPU), k8.to(HPU), v8.to(HPU), 0.25, True, t(1 / sq), t(1 / sk),
                                           t(1 / sv), None, t(64.0), None)
    assert out.dtype == torch.float8_e4m3fn and m.dtype == linv.dtype == torch.bfloat16
    want = (o_ref * 64.0).clamp(-240, 240).to(torch.float8_e4m3fn).double()
    torch.testing.assert_close(out.cpu().double(), want, atol=2.0 ** -9, rtol=0.13)  # at most one fp8 step
    torch.testing.assert_close(amax_o.cpu().double(), o_ref.abs().max().reshape(1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(linv.cpu().double(), linv_ref, atol=1e-2, rtol=8e-3)
    # the .scalar overload (float scales) gives the same
    out2 = _fp8_sdpa(q8.to(HPU), k8.to(HPU), v8.to(HPU), 0.25, True, 1 / sq, 1 / sk, 1 / sv, 0.0, 64.0, 0.0)[0]
    assert torch.equal(out2.cpu().view(torch.uint8), out.cpu().view(torch.uint8))


def test_fp8_sdpa_quantised_probabilities():
    q, k, v = (t.bfloat16() for t in _sdpa_case(seed=3))
    out = _fp8_sdpa(q.to(HPU), k.to(HPU), v.to(HPU), 0.3, False, qs=torch.tensor([240.0]).to(HPU),
                    ds=torch.tensor([1 / 240.0]).to(HPU))[0]
    o_q = _sdpa_ref(q, k, v, 0.3, False, s_quant=(240.0, 1 / 240.0))[0]
    o_exact = _sdpa_ref(q, k, v, 0.3, False)[0]
    torch.testing.assert_close(out.cpu().double(), o_q, atol=2e-2, rtol=2e-2)
    assert (o_q - o_exact).abs().max() > 1e-3  # the quantisation is visible, and reproduced


def test_fp8_sdpa_dropout_seed_and_compile():
    q, k, v = (t.bfloat16().to(HPU) for t in _sdpa_case(seed=4))
    seed = torch.tensor([1234, 0], dtype=torch.int64).to(HPU)
    op = torch.ops.hpu.fp8_sdpa_recomp_fwd_dropout_seed
    a = op(seed, q, k, v, None, 0.3, 0.3, False, True, "None", None, None, None, None, None, None, False, False,
           None, "right")
    b = op(seed, q, k, v, None, 0.3, 0.3, False, True, "None", None, None, None, None, None, None, False, False,
           None, "right")
    nd = _fp8_sdpa(q, k, v, 0.3, False, op=torch.ops.hpu.fp8_sdpa_recomp_fwd_non_dropout)[0]
    assert torch.equal(a[0].cpu(), b[0].cpu()) and not torch.equal(a[0].cpu(), nd.cpu())
    assert a[3].cpu().tolist() == [1234, 0]

    def f(q, k, v):
        out, m, linv, _, amax_s, amax_o = _fp8_sdpa(q, k, v, 0.3, True)
        return out.float() * 2, amax_o

    compiled = torch.compile(f, backend="hpu_backend", fullgraph=True)
    for got, want in zip(compiled(q, k, v), f(q, k, v)):
        torch.testing.assert_close(got.cpu(), want.cpu())


def test_fp8_fused_sdpa_api_gqa_inference_and_training():
    from habana_frameworks.torch.hpex.kernels import fp8_fused_sdpa
    from habana_frameworks.torch.hpex.kernels.Fp8FusedSDPA import gqa_input_reshape_fwd, gqa_output_reshape, is_gqa

    q, k, v = _sdpa_case(B=1, H=6, Hk=2, L=6, S=6, E=8, seed=6)
    assert is_gqa(q, k) and not is_gqa(q, q) and not is_gqa(q, k[:, :1])
    q5, k5, v5, _ = gqa_input_reshape_fwd(q, k, v, None)
    assert q5.shape == (1, 2, 3, 6, 8) and k5.shape == (1, 2, 1, 6, 8) and torch.equal(gqa_output_reshape(q5), q)
    sq = 8.0
    q8, k8, v8 = ((t * sq).to(torch.float8_e4m3fn) for t in (q, k, v))
    inv = torch.tensor([1 / sq]).to(HPU)
    out, amax_s, amax_o = fp8_fused_sdpa(q8.to(HPU), k8.to(HPU), v8.to(HPU), is_causal=True, d_scale_q=inv,
                                         d_scale_k=inv, d_scale_v=inv, is_amax_s=True, is_amax_o=True)
    o_ref, _, _, pmax = _sdpa_ref(q8.double() / sq, k8.double() / sq, v8.double() / sq, 1 / math.sqrt(8), True)
    assert out.dtype == torch.bfloat16 and out.shape == (1, 6, 6, 8)
    torch.testing.assert_close(out.cpu().double(), o_ref, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(amax_s.cpu().double(), pmax.reshape(1), atol=1e-6, rtol=1e-5)
    # training (causal only, as the bridge): gradients of the float64 attention
    qh, kh, vh = (t.bfloat16().to(HPU).requires_grad_() for t in (q, k, v))
    res = fp8_fused_sdpa(qh, kh, vh, is_causal=True)
    assert len(res) == 6
    g = torch.Generator().manual_seed(7)
    dout = torch.randn(1, 6, 6, 8, generator=g)
    res[0].backward(dout.bfloat16().to(HPU))
    qr, kr, vr = (t.bfloat16().double().requires_grad_() for t in (q, k, v))
    _sdpa_ref(qr, kr, vr, 1 / math.sqrt(8), True)[0].backward(dout.bfloat16().double())
    for got, want in ((qh, qr), (kh, kr), (vh, vr)):
        assert got.grad.dtype == torch.bfloat16
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, atol=2e-2, rtol=2e-2)
    with pytest.raises(AssertionError, match="Triangular"):
        fp8_fused_sdpa(qh, kh, vh, is_causal=False)
