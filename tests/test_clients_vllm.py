"""vLLM's Gaudi path (vllm-fork, vllm-gaudi, vllm-hpu-extension) as it calls the bridge:
the module-level grouped-query attention helpers of `hpex.kernels.FusedSDPA` around a
FusedSDPA call on 5-D grouped views, the newer bridge's inference-env names in
`habana_frameworks.torch.core`, and `core.weight_sharing` as quantization tools import it
(tied parameters stay tied on hpu). Results are compared with torch's CPU attention."""
import pytest
import torch

import habana_frameworks.torch.core as htcore
import habana_frameworks.torch.hpu as hthpu
from habana_frameworks.torch.hpex.kernels import FusedSDPA


def _expand_kv(t, n):
    return t.repeat_interleave(n, dim=1)


def test_is_gqa_rules():
    from habana_frameworks.torch.hpex.kernels.FusedSDPA import is_gqa
    q = torch.empty(1, 8, 4, 16)
    assert is_gqa(q, torch.empty(1, 2, 4, 16))
    assert not is_gqa(q, torch.empty(1, 8, 4, 16))  # plain multi-head
    assert not is_gqa(q, torch.empty(1, 1, 4, 16))  # one shared head broadcasts as is
    assert not is_gqa(torch.empty(8, 4, 16), torch.empty(2, 4, 16))  # only 4-D inputs


@pytest.mark.parametrize("mask_heads", [None, 1, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gqa_reshape_around_fused_sdpa_matches_cpu(mask_heads, dtype):
    # The calls of vllm-hpu-extension's ModuleFusedSDPA, in its order.
    from habana_frameworks.torch.hpex.kernels.FusedSDPA import (gqa_input_reshape_fwd, gqa_output_reshape,
                                                                is_gqa)
    torch.manual_seed(0)
    b, hq, hkv, s, d = 2, 8, 2, 6, 16
    q, k, v = torch.randn(b, hq, s, d), torch.randn(b, hkv, s, d), torch.randn(b, hkv, s, d)
    mask = None if mask_heads is None else torch.randn(b, mask_heads, s, s)
    qh, kh, vh = (t.to("hpu", dtype) for t in (q, k, v))
    mh = None if mask is None else mask.to("hpu", dtype)
    assert is_gqa(qh, kh)
    q5, k5, v5, m5 = gqa_input_reshape_fwd(qh, kh, vh, mh)
    assert q5.shape == (b, hkv, hq // hkv, s, d) and k5.shape == (b, hkv, 1, s, d) and v5.shape == k5.shape
    if mask is not None:
        assert m5.shape == ((b, hkv, hq // hkv, s, s) if mask_heads == hq else (b, 1, 1, s, s))
    causal = mask is None
    out = gqa_output_reshape(FusedSDPA.apply(q5, k5, v5, m5, 0.0, causal, None, "None", False, None, "left"))
    assert out.shape == (b, hq, s, d) and out.device.type == "hpu" and out.dtype == dtype
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.to(dtype), _expand_kv(k, hq // hkv).to(dtype), _expand_kv(v, hq // hkv).to(dtype),
        attn_mask=None if mask is None else mask.to(dtype), is_causal=causal)
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(out.cpu(), ref, atol=tol, rtol=tol)


def test_gqa_input_reshape_bwd_views_grad_as_grouped_query():
    from habana_frameworks.torch.hpex.kernels.FusedSDPA import gqa_input_reshape_bwd
    q5 = torch.empty(2, 2, 4, 6, 16)
    v5 = torch.empty(2, 2, 1, 6, 8)
    g = torch.arange(2 * 8 * 6 * 8, dtype=torch.float32).reshape(2, 8, 6, 8)
    r = gqa_input_reshape_bwd(q5, v5, g)
    assert r.shape == (2, 2, 4, 6, 8) and torch.equal(r.reshape(2, 8, 6, 8), g)


def test_inference_env_new_names_switch_the_bridge_state():
    # vLLM/neural-compressor: `htcore.hpu_inference_set_env()` where it exists, else hpu_set_env.
    assert hasattr(htcore, "hpu_inference_set_env") and hasattr(htcore, "hpu_inference_reset_env")
    try:
        model = torch.nn.Linear(2, 2)
        assert htcore.hpu_inference_set_env(model) is model
        assert hthpu.is_inference_mode_enabled() and hthpu.is_quantization_enabled()
        htcore.hpu_inference_reset_env()
        assert not hthpu.is_inference_mode_enabled() and not hthpu.is_quantization_enabled()
        assert htcore.hpu_set_inference_env() is None  # no model: nothing to hand back
        assert hthpu.is_inference_mode_enabled()
    finally:
        htcore.hpu_teardown_inference_env()
    assert not hthpu.is_inference_mode_enabled()


def test_weight_sharing_module_and_tied_parameters_survive_move():
    # neural-compressor's clean_module_weight on HPU: import the module, compare the class.
    from habana_frameworks.torch.core import weight_sharing
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied, as in language models
    model = torch.nn.ModuleDict({"emb": emb, "head": head}).to("hpu")
    w = model["head"].weight
    assert w is model["emb"].weight and w.device.type == "hpu"
    assert type(w) is torch.nn.Parameter and type(w) != weight_sharing.HabanaParameterWrapper
    # The client then rebuilds each parameter on meta from its class and __dict__.
    rebuilt = type(w)(torch.zeros(w.shape, device="meta"), requires_grad=w.requires_grad, **w.__dict__)
    assert rebuilt.device.type == "meta" and rebuilt.shape == w.shape
    with torch.no_grad():
        model["emb"].weight.add_(1.0)  # one storage: the head sees the update
    htcore.mark_step()
    assert torch.equal(model["head"].weight.cpu(), model["emb"].weight.cpu())
    weight_sharing.enable_weight_sharing()  # installs nothing, checks ties hold
    wrapped = weight_sharing.HabanaParameterWrapper(torch.ones(2))
    assert isinstance(wrapped, torch.nn.Parameter) and wrapped.requires_grad
