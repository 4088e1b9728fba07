"""The import surface third-party clients use (shared/reference/compile-and-hpu-graphs.md §4):
every listed module and symbol imports, and the ones added for it behave:
hpu.enable_const_section_serialization, transformer_engine.FusedAttention (fp8 attention with
delayed scaling) and transformer_engine.distributed.activation_checkpointing."""
import importlib
import math

import pytest
import torch

import habana_frameworks.torch as ht

HPU = "hpu"

SURFACE = {
    "habana_frameworks.torch": ["torch", "core", "hpu", "utils"],
    "habana_frameworks.torch.core": ["mark_step", "is_lazy", "hpu", "hpu_initialize", "hpu_set_env",
                                     "hpu_inference_initialize", "hpu_inference_set_env"],
    "habana_frameworks.torch.core.quantization": ["hpu_set_inference_env", "hpu_teardown_inference_env",
                                                  "hpu_inference_initialize"],
    "habana_frameworks.torch.core.weight_sharing": ["HabanaParameterWrapper"],
    "habana_frameworks.torch.hpu": [
        "is_available", "device_count", "get_device_name", "is_initialized", "synchronize", "Stream", "stream",
        "default_stream", "current_stream", "Event", "memory_stats", "memory_allocated", "max_memory_allocated",
        "reset_peak_memory_stats", "mem_get_info", "hpu", "wrap_in_hpu_graph", "HPUGraph", "graph",
        "make_graphed_callables", "ModuleCacher", "sdp_kernel", "is_autocast_hpu_enabled", "get_autocast_hpu_dtype",
        "enable_dynamic_shape", "disable_dynamic_shape", "enable_const_section_serialization", "set_device",
        "get_device_properties"],
    "habana_frameworks.torch.hpu.graphs": ["input_hash", "CachedParams", "copy_to"],
    "habana_frameworks.torch.hpu.random": ["manual_seed_all", "default_generators"],
    "habana_frameworks.torch.hpu.metrics": ["metric_localcontext", "metric_global"],
    "habana_frameworks.torch.hpex.kernels": ["FusedSDPA", "RotaryPosEmbeddingHelperV2", "RotaryPosEmbeddingHelperV3",
                                             "RotaryPosEmbeddingMode", "apply_rotary_pos_emb", "CTCLoss",
                                             "fp8_fused_sdpa"],
    "habana_frameworks.torch.hpex.kernels.FusedSDPA": ["is_gqa", "gqa_input_reshape_fwd", "gqa_output_reshape"],
    "habana_frameworks.torch.hpex.kernels.Fp8FusedSDPA": ["is_gqa", "gqa_input_reshape_fwd", "gqa_output_reshape",
                                                          "fp8_fused_sdpa"],
    "habana_frameworks.torch.hpex.kernels.Fp8Ops": ["cast_to_fp8_v2"],
    "habana_frameworks.torch.hpex.normalization": ["FusedRMSNorm", "FusedClipNorm"],
    "habana_frameworks.torch.hpex.optimizers": ["FusedAdamW", "FusedSGD"],
    "habana_frameworks.torch.hpex.experimental.transformer_engine": ["Linear", "fp8_autocast", "recipe", "fp8",
                                                                     "FusedAttention", "distributed"],
    "habana_frameworks.torch.distributed.hccl": ["initialize_distributed_hpu"],
    "habana_frameworks.torch.utils.internal": ["is_lazy"],
    "habana_frameworks.torch.utils.experimental": ["_get_device_type", "synDeviceType", "hpu", "_data_ptr",
                                                   "detect_recompilation_auto_model"],
    "habana_frameworks.torch.utils.library_loader": ["is_habana_available"],
    "habana_frameworks.torch.internal.bridge_config": ["env_setting", "get_pt_compile_only_mode"],
    "habana_frameworks.torch.dynamo.compile_backend.experimental": ["enable_compiled_autograd"],
}
HPU_OPS = ["mixture_of_experts", "cast_to_fp8_v2", "cast_from_fp8", "fp8_gemm_v2", "convert_from_uint4",
           "block_softmax", "block_softmax_adjustment", "softmax_fa2", "sdpa_recomp_fwd", "fp8_sdpa_recomp_fwd",
           "rotary_pos_embedding", "rotary_pos_embedding_backward", "softmax_fp8", "cast_to_fp8_just_in_time"]
TORCH_HPU = ["is_available", "synchronize", "Stream", "Event", "stream", "current_stream", "mem_get_info", "random",
             "set_device", "device_count", "get_device_properties", "is_autocast_hpu_enabled"]


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_module_has_the_symbols_clients_use(module):
    m = importlib.import_module(module)
    missing = [n for n in SURFACE[module] if not hasattr(m, n)]
    assert not missing, f"{module} lacks {missing}"


def test_ops_torch_hpu_and_te_members():
    missing = [n for n in HPU_OPS if not hasattr(torch.ops.hpu, n)]
    missing += [f"torch.hpu.{n}" for n in TORCH_HPU if not hasattr(torch.hpu, n)]
    te = importlib.import_module("habana_frameworks.torch.hpex.experimental.transformer_engine")
    missing += [f"te.recipe.{n}" for n in ("DelayedScaling", "Format") if not hasattr(te.recipe, n)]
    missing += [f"te.fp8.{n}" for n in ("is_fp8_available", "is_fp8_enabled") if not hasattr(te.fp8, n)]
    if not hasattr(te.distributed, "activation_checkpointing"):
        missing.append("te.distributed.activation_checkpointing")
    assert not missing, missing
    from habana_frameworks.torch import torch as reexported
    assert reexported is torch and ht.hpu is torch.hpu and ht.hpu.hpu is ht.hpu and ht.core.hpu is ht.hpu


def test_calls_of_the_device_surface():
    import habana_frameworks.torch.core as htcore
    from habana_frameworks.torch.utils.experimental import _get_device_type, synDeviceType
    from habana_frameworks.torch.utils.internal import is_lazy
    from habana_frameworks.torch.utils.library_loader import is_habana_available

    assert torch.hpu.is_available() and torch.hpu.device_count() >= 1 and is_habana_available()
    assert torch.hpu.get_device_name() in ("GAUDI", "GAUDI2", "GAUDI3")
    assert _get_device_type() in (synDeviceType.synDeviceGaudi, synDeviceType.synDeviceGaudi2,
                                  synDeviceType.synDeviceGaudi3)
    assert htcore.is_lazy() == is_lazy()
    htcore.mark_step()
    x = torch.ones(3, device=HPU)
    torch.hpu.synchronize()
    assert {"InUse", "MaxInUse", "Limit"} <= set(torch.hpu.memory_stats())
    free, total = torch.hpu.mem_get_info()
    assert 0 < free <= total
    assert torch.hpu.memory_allocated() >= x.numel() * 4
    with torch.hpu.stream(torch.hpu.Stream()):
        torch.hpu.current_stream().synchronize()
    torch.hpu.random.manual_seed_all(3)
    assert not torch.hpu.is_autocast_hpu_enabled()
    with torch.autocast("hpu", dtype=torch.bfloat16):
        assert torch.hpu.is_autocast_hpu_enabled() and torch.hpu.get_autocast_hpu_dtype() == torch.bfloat16
    with torch.hpu.sdp_kernel(enable_recompute=True):
        assert torch.hpu.recompute_sdp_enabled()


def test_const_section_serialization_state(tmp_path):
    d = tmp_path / "const"
    d.mkdir()
    (d / "old").write_text("x")
    torch.hpu.enable_const_section_serialization(d, True, True)
    assert torch.hpu.is_const_section_serialization_enabled() and d.is_dir() and not (d / "old").exists()
    assert torch.hpu.get_const_section_serialization_path() == str(d)
    torch.hpu.enable_const_section_serialization(tmp_path / "new", False, False)
    assert (tmp_path / "new").is_dir()
    torch.hpu.disable_const_section_serialization()
    assert not torch.hpu.is_const_section_serialization_enabled()


def _attn_ref(q, k, v, causal):
    q, k, v = q.double(), k.double(), v.double()
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v


def test_te_fused_attention_in_fp8_with_delayed_scaling():
    import habana_frameworks.torch.hpex.experimental.transformer_engine as te

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 6, 8, generator=g) * 2).bfloat16(), (torch.randn(1, 2, 6, 8, generator=g)).bfloat16(), \
        (torch.randn(1, 2, 6, 8, generator=g)).bfloat16()
    attn = te.FusedAttention(scale=None, attention_dropout=0.0, enable_recompute=True)
    ref = _attn_ref(q, k, v, True)
    plain = attn(q.to(HPU), k.to(HPU), v.to(HPU), None, True, "None")  # outside fp8_autocast: bf16 FusedSDPA
    torch.testing.assert_close(plain.cpu().double(), ref, atol=2e-2, rtol=2e-2)
    recipe = te.recipe.DelayedScaling(amax_history_len=4)
    outs = []
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
        for _ in range(3):
            outs.append(attn(q.to(HPU), k.to(HPU), v.to(HPU), None, True, "None"))
    st = attn._scaling
    top = 240.0 if torch.hpu.get_device_name() == "GAUDI2" else 448.0
    amax = torch.stack([t.abs().max().float() for t in (q, k, v)])
    torch.testing.assert_close(st.scale.cpu(), top / amax)  # delayed: from the earlier steps' amax

    def fp8_ref(scales):  # float64 attention of the operands rounded through fp8 at these scales
        r = [(t.float() * s).to(torch.float8_e4m3fn).double() / float(s) for t, s in zip((q, k, v), scales)]
        return _attn_ref(*r, True)

    # the first step casts with scale 1 (no history yet), the later ones with fp8_max / amax
    for o, scales in zip(outs, (torch.ones(3), top / amax, top / amax)):
        assert o.dtype == torch.bfloat16
        torch.testing.assert_close(o.cpu().double(), fp8_ref(scales), atol=1e-2, rtol=1e-2)
        assert (o.cpu().double() - ref).abs().max() < 0.3  # and near the unquantised attention
    # training: causal, gradients of the float64 attention of the fp8-rounded operands
    qh, kh, vh = (t.to(HPU).requires_grad_() for t in (q, k, v))
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
        out = attn(qh, kh, vh, None, True, "None")
    dout = torch.randn(out.shape, generator=g).bfloat16()
    out.backward(dout.to(HPU))
    sc = st.scale.cpu()
    qr, kr, vr = ((t.float() * s).to(torch.float8_e4m3fn).double().div(float(s)).requires_grad_()
                  for t, s in zip((q, k, v), sc))
    _attn_ref(qr, kr, vr, True).backward(dout.double())
    for got, want in ((qh, qr), (kh, kr), (vh, vr)):
        assert got.grad.dtype == torch.bfloat16
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, atol=3e-2, rtol=3e-2)
    with pytest.raises(AssertionError, match="Triangular"):
        with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
            attn(qh, kh, vh, None, False, "None")


def test_te_activation_checkpointing_context_and_decorator():
    import habana_frameworks.torch.hpex.experimental.transformer_engine as te

    seen = []

    def f(x):
        seen.append(te.distributed.is_activation_checkpointing())
        return x * 2

    wrapped = te.distributed.activation_checkpointing()(f)
    assert wrapped(3) == 6 and f(1) == 2 and seen == [True, False]
    with te.distributed.activation_checkpointing():
        assert te.distributed.is_activation_checkpointing()
    assert not te.distributed.is_activation_checkpointing()
    # as optimum-habana wraps a checkpointed function
    x = torch.ones(4, device=HPU, requires_grad=True)
    y = torch.utils.checkpoint.checkpoint(te.distributed.activation_checkpointing()(lambda t: (t * t).sum()), x,
                                          use_reentrant=False)
    y.backward()
    assert torch.equal(x.grad.cpu(), torch.full((4,), 2.0))
