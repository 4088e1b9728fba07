"""The bridge's optional hpu ops that vLLM's Gaudi path (vllm-hpu-extension) and optimum-habana's
MoE models call: torch.ops.hpu.mixture_of_experts (all overloads), block_softmax and
block_softmax_adjustment (flat paged attention), convert_from_uint4 (GPTQ/AWQ), and the float
`scale` overloads of cast_to_fp8_v2 / cast_from_fp8. Each is compared with the math written out
here on the CPU in float64, eagerly, under autograd and under torch.compile(backend="hpu_backend")."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import habana_frameworks.torch  # noqa: F401

HPU = "hpu"


def _hpu(ts):
    return [t.to(HPU) for t in ts]


# ---------------------------------------------------------------- mixture_of_experts

def _moe_reference(x, table, rw, gate, up, down, act=F.silu, lo=0, hi=None):
    """Per token, per chosen expert: rw * down @ (act(gate @ x) * (up @ x)), in float64."""
    hi = lo + len(down) - 1 if hi is None else hi
    out = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        xt = x[t].double()
        for j in range(table.shape[1]):
            e = int(table[t, j])
            if not lo <= e <= hi or e - lo >= len(down):
                continue
            i = e - lo
            h = act(gate[i].double() @ xt) * (up[i].double() @ xt)
            out[t] += float(rw[t, j]) * (down[i].double() @ h)
    return out


def _moe_case(T=7, H=16, I=12, E=4, k=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, H, generator=g)
    table = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)])
    rw = torch.rand(T, k, generator=g)
    gate = [torch.randn(I, H, generator=g) * 0.3 for _ in range(E)]
    up = [torch.randn(I, H, generator=g) * 0.3 for _ in range(E)]
    down = [torch.randn(H, I, generator=g) * 0.3 for _ in range(E)]
    return x, table, rw, gate, up, down


@pytest.mark.parametrize("activation", ["silu", "gelu", "relu"])
def test_moe_separate_weights_match_reference(activation):
    x, table, rw, gate, up, down = _moe_case()
    out = torch.ops.hpu.mixture_of_experts(
        hidden_states=x.to(HPU), expert_routing_table=table.to(HPU), router_weights=rw.to(HPU),
        w1=_hpu(gate), w2=_hpu(up), w3=_hpu(down), permuted_weights=True, activation=activation,
        experts_min=0, experts_max=3)
    act = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}[activation]
    assert out.device.type == HPU and out.dtype == torch.float32 and out.shape == x.shape
    torch.testing.assert_close(out.cpu().double(), _moe_reference(x, table, rw, gate, up, down, act),
                               atol=1e-5, rtol=1e-5)


def test_moe_fused_and_unpermuted_weights():
    x, table, rw, gate, up, down = _moe_case(seed=1)
    ref = _moe_reference(x, table, rw, gate, up, down)
    w12 = [torch.cat([g, u]) for g, u in zip(gate, up)]  # vLLM's w13: gate rows first
    fused = torch.ops.hpu.mixture_of_experts(
        hidden_states=x.to(HPU), expert_routing_table=table.to(HPU), router_weights=rw.to(HPU),
        w12=_hpu(w12), w3=_hpu(down), permuted_weights=True, activation="silu", experts_min=0, experts_max=3)
    torch.testing.assert_close(fused.cpu().double(), ref, atol=1e-5, rtol=1e-5)
    # permuted_weights=False: [in, out] layouts, positional call in the schema's order.
    plain = torch.ops.hpu.mixture_of_experts(
        x.to(HPU), table.to(HPU), rw.to(HPU), _hpu([g.t() for g in gate]), _hpu([u.t() for u in up]),
        _hpu([d.t() for d in down]), False, "silu", 0, 3)
    torch.testing.assert_close(plain.cpu().double(), ref, atol=1e-5, rtol=1e-5)


def test_moe_expert_slices_add_up_and_skip_foreign_ids():
    # vllm's VllmMixtureOfExpertsOp with MAX_EXPERTS_PER_SLICE: one call per expert range.
    x, table, rw, gate, up, down = _moe_case(E=6, seed=2)
    total = torch.zeros(x.shape, dtype=torch.float32, device=HPU)
    for lo in (0, 2, 4):
        part = torch.ops.hpu.mixture_of_experts(
            hidden_states=x.to(HPU), expert_routing_table=table.to(HPU), router_weights=rw.to(HPU),
            w1=_hpu(gate[lo:lo + 2]), w2=_hpu(up[lo:lo + 2]), w3=_hpu(down[lo:lo + 2]), permuted_weights=True,
            activation="silu", experts_min=lo, experts_max=lo + 1)
        torch.testing.assert_close(part.cpu().double(), _moe_reference(x, table, rw, gate[lo:lo + 2], up[lo:lo + 2],
                                                                       down[lo:lo + 2], lo=lo), atol=1e-5, rtol=1e-5)
        total += part
    torch.testing.assert_close(total.cpu().double(), _moe_reference(x, table, rw, gate, up, down),
                               atol=1e-5, rtol=1e-5)
    # vllm's default experts_max (8) reaches past a 6-expert list: the list bounds the experts.
    whole = torch.ops.hpu.mixture_of_experts(
        hidden_states=x.to(HPU), expert_routing_table=table.to(HPU), router_weights=rw.to(HPU),
        w1=_hpu(gate), w2=_hpu(up), w3=_hpu(down), permuted_weights=True, activation="silu",
        experts_min=0, experts_max=8)
    torch.testing.assert_close(whole.cpu(), total.cpu(), atol=1e-5, rtol=1e-5)


def test_moe_bfloat16_rounds_once():
    x, table, rw, gate, up, down = _moe_case(seed=3)
    bf = [[t.bfloat16() for t in lst] for lst in (gate, up, down)]
    out = torch.ops.hpu.mixture_of_experts(
        hidden_states=x.bfloat16().to(HPU), expert_routing_table=table.to(HPU), router_weights=rw.bfloat16().to(HPU),
        w1=_hpu(bf[0]), w2=_hpu(bf[1]), w3=_hpu(bf[2]), permuted_weights=True, activation="silu",
        experts_min=0, experts_max=3)
    assert out.dtype == torch.bfloat16
    ref = _moe_reference(x.bfloat16(), table, rw.bfloat16(), *bf)
    torch.testing.assert_close(out.cpu().double(), ref.bfloat16().double(), atol=0, rtol=0)


def _quant(w, per_channel=True):
    amax = w.abs().amax(dim=1, keepdim=True) if per_channel else w.abs().amax()
    scale = amax / 240.0
    return (w / scale).to(torch.float8_e4m3fn), scale.squeeze(-1) if per_channel else scale


def test_moe_fp8_per_channel_and_scalar_scales():
    x, table, rw, gate, up, down = _moe_case(seed=4)
    for per_channel in (True, False):
        qs = [[_quant(w, per_channel) for w in lst] for lst in (gate, up, down)]
        deq = [[q.double() * (s.double()[:, None] if per_channel else s.double()) for q, s in lst] for lst in qs]
        xs = x.abs().amax() / 240.0
        xq = (x / xs).to(torch.float8_e4m3fn)
        out = torch.ops.hpu.mixture_of_experts(
            hidden_states=xq.to(HPU), expert_routing_table=table.to(HPU), router_weights=rw.bfloat16().to(HPU),
            w1=_hpu([q for q, _ in qs[0]]), w2=_hpu([q for q, _ in qs[1]]), w3=_hpu([q for q, _ in qs[2]]),
            d_scale_hidden_states=xs.to(HPU), d_scale_w1=_hpu([s for _, s in qs[0]]),
            d_scale_w2=_hpu([s for _, s in qs[1]]), d_scale_w3=_hpu([s for _, s in qs[2]]),
            permuted_weights=True, activation="silu", experts_min=0, experts_max=3)
        assert out.dtype == torch.bfloat16  # fp8 hidden states: the router weights' dtype
        ref = _moe_reference(xq.double() * xs.double(), table, rw.bfloat16(), *deq)
        torch.testing.assert_close(out.cpu().double(), ref, atol=2e-2, rtol=1e-2)


def test_moe_fp8_fused_blockwise_with_static_intermediate_scale():
    x, table, rw, gate, up, down = _moe_case(H=16, I=8, seed=5)
    bs = 4

    def block_quant(w):
        o, i = w.shape
        blocks = w.reshape(o // bs, bs, i // bs, bs).abs().amax(dim=(1, 3))
        scale = blocks / 240.0
        full = scale.repeat_interleave(bs, 0).repeat_interleave(bs, 1)
        return (w / full).to(torch.float8_e4m3fn), scale, full

    w12 = [block_quant(torch.cat([g, u])) for g, u in zip(gate, up)]
    w3 = [block_quant(d) for d in down]
    inter = torch.tensor(0.01)
    out = torch.ops.hpu.mixture_of_experts(
        hidden_states=x.bfloat16().to(HPU), expert_routing_table=table.to(HPU), router_weights=rw.bfloat16().to(HPU),
        w12=_hpu([q for q, _, _ in w12]), w3=_hpu([q for q, _, _ in w3]),
        d_scale_w12=_hpu([s for _, s, _ in w12]), d_scale_w3=_hpu([s for _, s, _ in w3]),
        d_scale_intermediate_hidden_states=inter.to(HPU), block_size=bs,
        permuted_weights=True, activation="silu", experts_min=0, experts_max=3)
    # Reference: dequantised weights, intermediate rounded through E4M3 with its scale.
    xb = x.bfloat16().double()
    ref = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(table.shape[1]):
            e = int(table[t, j])
            w = w12[e][0].double() * w12[e][2].double()
            g, u = w[:8] @ xb[t], w[8:] @ xb[t]
            h = F.silu(g) * u
            lim = 240.0 if _is_gaudi2() else 448.0  # the generation's E4M3 saturation
            h = (h / 0.01).clamp(-lim, lim).float().to(torch.float8_e4m3fn).double() * 0.01
            ref[t] += float(rw.bfloat16()[t, j]) * ((w3[e][0].double() * w3[e][2].double()) @ h)
    torch.testing.assert_close(out.cpu().double(), ref, atol=3e-2, rtol=2e-2)


def test_moe_training_gradients_match_cpu():
    # optimum-habana's Mixtral and Qwen-MoE blocks train through the op.
    x, table, rw, gate, up, down = _moe_case(seed=6)
    leaves = [t.clone().requires_grad_() for t in [x, rw, *gate, *up, *down]]
    hl = [t.detach().to(HPU).requires_grad_() for t in leaves]
    out = torch.ops.hpu.mixture_of_experts(
        hidden_states=hl[0], expert_routing_table=table.to(HPU), router_weights=hl[1],
        w1=hl[2:6], w2=hl[6:10], w3=hl[10:14], permuted_weights=True, activation="silu", experts_min=0, experts_max=3)
    g = torch.randn(out.shape)
    out.backward(g.to(HPU))
    ref = torch.zeros(x.shape)
    for t in range(x.shape[0]):
        for j in range(table.shape[1]):
            e = int(table[t, j])
            xt = leaves[0][t]
            ref[t] = ref[t] + leaves[1][t, j] * (leaves[10 + e] @ (F.silu(leaves[2 + e] @ xt) * (leaves[6 + e] @ xt)))
    ref.backward(g)
    for a, b in zip(hl, leaves):
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-4, rtol=1e-4)


def test_moe_inference_keeps_single_op_and_compiles():
    x, table, rw, gate, up, down = _moe_case(seed=7)

    def layer(x, table, rw, *ws):
        return torch.ops.hpu.mixture_of_experts(x, table, rw, list(ws[0:4]), list(ws[4:8]), list(ws[8:12]), True,
                                                "silu", 0, 3)

    args = (x.to(HPU), table.to(HPU), rw.to(HPU), *_hpu(gate + up + down))
    compiled = torch.compile(layer, backend="hpu_backend", fullgraph=True)
    with torch.no_grad():
        got = compiled(*args)
    torch.testing.assert_close(got.cpu().double(), _moe_reference(x, table, rw, gate, up, down), atol=1e-5, rtol=1e-5)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake = [mode.from_tensor(a) for a in args]
        out = layer(*fake)
    assert out.shape == x.shape and out.dtype == torch.float32


def test_moe_bad_input_raises():
    x, table, rw, gate, up, down = _moe_case()
    kw = dict(hidden_states=x.to(HPU), expert_routing_table=table.to(HPU), router_weights=rw.to(HPU),
              w1=_hpu(gate), w2=_hpu(up), w3=_hpu(down), permuted_weights=True, experts_min=0, experts_max=3)
    with pytest.raises(RuntimeError, match="unsupported activation 'tanh'"):
        torch.ops.hpu.mixture_of_experts(activation="tanh", **kw)
    kw["w3"] = kw["w3"][:3]
    with pytest.raises(RuntimeError, match="same, non-zero number of experts"):
        torch.ops.hpu.mixture_of_experts(activation="silu", **kw)


# ---------------------------------------------------------------- block softmax (flat PA)

def _flat_pa_case(seed=0):
    """Three sequences spread over blocks of 4 slots, plus two padding blocks (group -1), scores
    laid out as vLLM's GQA flat_pa has them: [blocks, kv_heads, q_per_kv, 1, block]."""
    g = torch.Generator().manual_seed(seed)
    lens, block = [5, 9, 2], 4
    groups, usage = [], []
    for b, n in enumerate(lens):
        nb = (n + block - 1) // block
        groups += [b] * nb
        usage += [block] * (nb - 1) + [n - block * (nb - 1)]
    groups += [-1, -1]
    usage += [1, 1]
    nblk = len(groups)
    scores = torch.randn(nblk, 2, 4, 1, block, generator=g) * 3
    values = torch.randn(nblk, 2, 1, block, 8, generator=g)
    bias = torch.zeros(nblk, block).masked_fill(torch.arange(block)[None] >= torch.tensor(usage)[:, None], -3e38)
    return lens, torch.tensor(groups), scores, values, bias.view(nblk, 1, 1, 1, block)


def test_block_softmax_is_each_blocks_numerator():
    _, groups, scores, _, bias = _flat_pa_case()
    e, m, s = torch.ops.hpu.block_softmax(scores.to(HPU), bias.to(HPU), groups.to(HPU))
    x = scores.double() + bias.double()
    m_ref = x.amax(-1, keepdim=True)
    e_ref = (x - m_ref).exp()
    torch.testing.assert_close(m.cpu().double(), m_ref)
    torch.testing.assert_close(e.cpu().double(), e_ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(s.cpu().double(), e_ref.sum(-1, keepdim=True), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_block_softmax_and_adjustment_give_exact_attention(dtype):
    lens, groups, scores, values, bias = _flat_pa_case(seed=1)
    batch = len(lens)
    e, m, s = torch.ops.hpu.block_softmax(scores.to(HPU, dtype), bias.to(HPU, dtype), groups.to(HPU))
    av = torch.matmul(e, values.to(HPU, dtype))  # [blocks, kv, q, 1, d]
    rescale = torch.ops.hpu.block_softmax_adjustment(m, s.to(m.dtype), groups.to(HPU), batch,
                                                     list(av.shape[:3]) + [1, 1])
    assert rescale.shape == (len(groups), 2, 4, 1, 1) and rescale.dtype == dtype
    per_block = (av * rescale).cpu().double()
    # Reference: softmax over each sequence's valid slots, all blocks of it concatenated.
    for b in range(batch):
        idx = (groups == b).nonzero().flatten()
        sc = torch.cat([(scores[i].double() + bias[i].double()) for i in idx], -1)
        vv = torch.cat([values[i].double() for i in idx], -2)
        ref = torch.matmul(torch.softmax(sc, -1), vv)
        tol = 1e-5 if dtype == torch.float32 else 4e-2
        torch.testing.assert_close(per_block[idx].sum(0), ref, atol=tol, rtol=tol)


def test_block_softmax_adjustment_reference_values():
    # Two sequences: blocks 0,1 -> 0, block 2 -> 1, block 3 padding.
    bm = torch.tensor([1.0, 3.0, -2.0, 0.0]).view(4, 1, 1)
    bs = torch.tensor([2.0, 0.5, 4.0, 1.0]).view(4, 1, 1)
    out = torch.ops.hpu.block_softmax_adjustment(bm.to(HPU), bs.to(HPU), torch.tensor([0, 0, 1, -1]).to(HPU), 2,
                                                 None)
    e = torch.exp(torch.tensor(-2.0))
    group0 = 2.0 * e + 0.5
    expected = torch.tensor([e / group0, 1 / group0, 1 / 4.0, 1.0]).view(4, 1, 1)
    torch.testing.assert_close(out.cpu(), expected)


def test_block_softmax_ops_trace_under_compile():
    _, groups, scores, values, bias = _flat_pa_case(seed=2)

    def pa(sc, bias, groups, v):
        e, m, s = torch.ops.hpu.block_softmax(sc, bias, groups)
        av = torch.matmul(e, v)
        return av * torch.ops.hpu.block_softmax_adjustment(m, s, groups, 3, list(av.shape[:3]) + [1, 1])

    args = (scores.to(HPU), bias.to(HPU), groups.to(HPU), values.to(HPU))
    compiled = torch.compile(pa, backend="hpu_backend", fullgraph=True)
    torch.testing.assert_close(compiled(*args).cpu(), pa(*args).cpu(), atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------- convert_from_uint4

def _pack(q):
    """[K, N] values 0..15 -> int32 [K, N / 8], element j of each word in bits 4j..4j+3."""
    k, n = q.shape
    out = torch.zeros(k, n // 8, dtype=torch.int64)
    for j in range(8):
        out |= q[:, j::8].long() << (4 * j)
    return (out - (out >= 2 ** 31).long() * 2 ** 32).to(torch.int32)


@pytest.mark.parametrize("use_g_idx", [False, True])
def test_convert_from_uint4_dequantises_like_gptq(use_g_idx):
    g = torch.Generator().manual_seed(0)
    K, N, G = 16, 24, 4
    q = torch.randint(0, 16, (K, N), generator=g)
    z = torch.randint(0, 16, (G, N), generator=g)
    s = torch.rand(G, N, generator=g) + 0.1
    g_idx = torch.randint(0, G, (K,), generator=g) if use_g_idx else None
    rows = g_idx if use_g_idx else torch.arange(K) // (K // G)
    expected = torch.empty(K, N, dtype=torch.float64)
    for kk in range(K):
        for nn in range(N):
            expected[kk, nn] = (int(q[kk, nn]) - int(z[rows[kk], nn])) * float(s[rows[kk], nn])
    out = torch.ops.hpu.convert_from_uint4(_pack(q).to(HPU), s.bfloat16().to(HPU), _pack(z).to(HPU), torch.bfloat16,
                                           None if g_idx is None else g_idx.to(torch.int32).to(HPU))
    assert out.dtype == torch.bfloat16 and out.shape == (K, N)
    ref = torch.tensor([[(int(q[kk, nn]) - int(z[rows[kk], nn])) * float(s.bfloat16()[rows[kk], nn])
                         for nn in range(N)] for kk in range(K)], dtype=torch.float64)
    torch.testing.assert_close(out.cpu().double(), ref.bfloat16().double(), atol=0, rtol=0)
    torch.testing.assert_close(out.cpu().double(), expected, atol=0.1, rtol=1e-2)
    with pytest.raises(RuntimeError, match="packed 4-bit"):
        torch.ops.hpu.convert_from_uint4(q.float().to(HPU), s.to(HPU), _pack(z).to(HPU), torch.float32)


# ---------------------------------------------------------------- fp8 casts with a float scale

def test_fp8_casts_take_a_python_float_scale():
    # vllm-hpu-extension's VLLMFP8KVCache: cast_to_fp8_v2(x, 1.0, ...), cast_from_fp8(x, 1.0, bf16).
    x = torch.randn(8, 16) * 3
    q = torch.ops.hpu.cast_to_fp8_v2(x.to(HPU), 4.0, False, False, torch.float8_e4m3fn)[0]
    assert q.dtype == torch.float8_e4m3fn
    torch.testing.assert_close(q.cpu().float(), (x * 4.0).clamp(-240, 240).to(torch.float8_e4m3fn).float()
                               if _is_gaudi2() else (x * 4.0).to(torch.float8_e4m3fn).float())
    back = torch.ops.hpu.cast_from_fp8(q, 0.25, torch.bfloat16)
    assert back.dtype == torch.bfloat16
    torch.testing.assert_close(back.cpu().float(), (q.cpu().float() * 0.25).bfloat16().float())


def _is_gaudi2():
    import habana_frameworks.torch.utils.experimental as htexp
    return htexp._get_device_type() == htexp.synDeviceType.synDeviceGaudi2


# ---------------------------------------------------------------- optimum-habana's Mixtral MoE block

_MIXTRAL = r"""
import torch, habana_frameworks.torch  # noqa
from transformers import MixtralConfig
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
from optimum.habana.transformers.models.mixtral.modeling_mixtral import GaudiMixtralSparseMoeBlock
torch.manual_seed(0)
cfg = MixtralConfig(hidden_size=16, intermediate_size=12, num_local_experts=4, num_experts_per_tok=2)
ref = MixtralSparseMoeBlock(cfg)
blk = GaudiMixtralSparseMoeBlock(cfg)
blk.load_state_dict(ref.state_dict())
blk = blk.to("hpu")
x = torch.randn(2, 3, 16)
xh = x.to("hpu").requires_grad_()
xr = x.clone().requires_grad_()
out, logits = blk(xh)
rout, rlogits = ref(xr)
out.sum().backward(); rout.sum().backward()
torch.testing.assert_close(out.cpu(), rout, atol=1e-5, rtol=1e-5)
torch.testing.assert_close(xh.grad.cpu(), xr.grad, atol=1e-5, rtol=1e-5)
for (n, p), (_, q) in zip(blk.named_parameters(), ref.named_parameters()):
    torch.testing.assert_close(p.grad.cpu(), q.grad, atol=1e-5, rtol=1e-5, msg=n)
print("OK")
"""


def _plugin_version_parses() -> bool:
    """optimum-habana reads the last column of `pip list`; an editable install puts a path there
    (test_clients_optimum skips on the same condition)."""
    from packaging.version import InvalidVersion, Version
    out = subprocess.run([sys.executable, "-m", "pip", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("habana-torch-plugin "):
            try:
                Version(line.split()[-1])
                return True
            except InvalidVersion:
                return False
    return False


def test_optimum_habana_mixtral_moe_block_matches_transformers():
    import importlib.util
    if importlib.util.find_spec("optimum") is None or importlib.util.find_spec("optimum.habana") is None:
        pytest.skip("optimum-habana is not installed (requirements.txt pins it)")
    if not _plugin_version_parses():
        pytest.skip("habana-torch-plugin is an editable install: optimum-habana cannot parse its version")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PT_HPU_LAZY_MODE=os.environ.get("PT_HPU_LAZY_MODE", "0"))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    res = subprocess.run([sys.executable, "-c", _MIXTRAL], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]
