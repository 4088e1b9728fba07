"""`torch.ops.hpu.mixture_of_experts`: the bridge's fused MoE op, as optimum-habana's Mixtral /
Qwen-MoE / DeepSeek layers and vllm-hpu-extension's VllmMixtureOfExpertsOp call it.

Every token goes to the experts named in its row of `expert_routing_table` (top-k expert ids),
weighted by the same row of `router_weights`. Expert e is a gated MLP:
    down(act(gate(x)) * up(x))
with the kernel's names w1 = gate, w2 = up, w3 = down (the fused overload takes w12 = gate and
up stacked along the output features, gate first, as vLLM's w13 weights are). The weight lists hold
experts experts_min, experts_min + 1, ... (list index = expert id - experts_min); only ids in
[experts_min, experts_max] that have weights are evaluated, others contribute nothing, so
slices over expert ranges add up to the whole layer.
`permuted_weights=True` means the weights are laid out [out_features, in_features] (nn.Linear's
layout), False means [in_features, out_features].

The fp8 overloads take fp8 weights with their descales (`d_scale_*`: a scalar, one per output
channel, or with `block_size` one per block of block_size x block_size), optionally fp8 hidden
states with their descale, and optionally a static scale for the intermediate activation, which
is then rounded through float8_e4m3fn as the kernel does. Without it the intermediate stays in
float32 (the emulation does not model the kernel's dynamic intermediate quantization).

All math runs in float32 on the device and is rounded once to the output dtype (the hidden
states' dtype, or the router weights' dtype when the hidden states are fp8).
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

_lib = torch.library.Library("hpu", "FRAGMENT")

_TAIL = "bool permuted_weights, str activation, int experts_min, int experts_max"
# The fp8 overloads' optional scales are keyword-only, so the required tail may follow them.
_FP8_SCALES = ("*, Tensor? d_scale_hidden_states=None, Tensor? d_scale_intermediate_hidden_states=None, "
               "int? block_size=None")

_lib.define("mixture_of_experts(Tensor hidden_states, Tensor expert_routing_table, Tensor router_weights, "
            f"Tensor[] w1, Tensor[] w2, Tensor[] w3, {_TAIL}) -> Tensor")
_lib.define("mixture_of_experts.fused_weights(Tensor hidden_states, Tensor expert_routing_table, "
            f"Tensor router_weights, Tensor[] w12, Tensor[] w3, {_TAIL}) -> Tensor")
_lib.define("mixture_of_experts.fp8(Tensor hidden_states, Tensor expert_routing_table, Tensor router_weights, "
            "Tensor[] w1, Tensor[] w2, Tensor[] w3, Tensor[] d_scale_w1, Tensor[] d_scale_w2, Tensor[] d_scale_w3, "
            f"{_FP8_SCALES}, {_TAIL}) -> Tensor")
_lib.define("mixture_of_experts.fp8_fused_weights(Tensor hidden_states, Tensor expert_routing_table, "
            "Tensor router_weights, Tensor[] w12, Tensor[] w3, Tensor[] d_scale_w12, Tensor[] d_scale_w3, "
            f"{_FP8_SCALES}, {_TAIL}) -> Tensor")

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def _activation(name: str):
    if name == "silu":
        return torch.nn.functional.silu
    if name == "gelu":
        return torch.nn.functional.gelu
    if name == "relu":
        return torch.nn.functional.relu
    raise RuntimeError(f"mixture_of_experts: unsupported activation '{name}' (expected silu, gelu or relu)")


def _dequant(w: torch.Tensor, scale: Optional[torch.Tensor], permuted: bool,
             block_size: Optional[int]) -> torch.Tensor:
    """Weight in float32 [out, in] layout, its descale applied (scalar, per output channel or
    per block)."""
    w = w.float()
    if not permuted:
        w = w.t()
    if scale is None:
        return w
    s = scale.float()
    if block_size is not None and s.dim() == 2:
        out_f, in_f = w.shape
        s = s.repeat_interleave(block_size, 0)[:out_f].repeat_interleave(block_size, 1)[:, :in_f]
        return w * s
    if s.numel() == 1:
        return w * s.reshape(())
    return w * s.reshape(-1, 1)


def _check(name: str, hidden: torch.Tensor, table: torch.Tensor, weights: torch.Tensor, lists: Sequence,
           experts_min: int, experts_max: int) -> None:
    if hidden.dim() != 2:
        raise RuntimeError(f"{name}: hidden_states must be 2-D [tokens, hidden], got {tuple(hidden.shape)}")
    if table.shape != weights.shape or table.dim() != 2 or table.shape[0] != hidden.shape[0]:
        raise RuntimeError(f"{name}: expert_routing_table {tuple(table.shape)} and router_weights "
                           f"{tuple(weights.shape)} must both be [tokens, top_k] with tokens={hidden.shape[0]}")
    if table.dtype.is_floating_point or table.dtype == torch.bool:
        raise RuntimeError(f"{name}: expert_routing_table must hold integer expert ids, got {table.dtype}")
    if experts_max < experts_min:
        raise RuntimeError(f"{name}: experts_max ({experts_max}) must not be below experts_min ({experts_min})")
    n = len(lists[0])
    for lst in lists:
        if len(lst) != n or n == 0:
            raise RuntimeError(f"{name}: every weight and scale list needs the same, non-zero number of experts, "
                               f"got {[len(x) for x in lists]}")
    return n


def _moe(hidden, table, weights, gate_up, down, activation, experts_min, experts_max, out_dtype, inter_scale=None):
    """gate_up(i) -> (gate [I, H], up [I, H]) and down(i) -> [H, I] in float32 for expert index i."""
    act = _activation(activation)
    x = hidden.float()
    rw = weights.float()
    out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32, device=x.device)
    # The lists hold experts experts_min, experts_min + 1, ...; ids above experts_max are not
    # this call's (vLLM's default range may reach past the list).
    for i in range(min(len(down), experts_max - experts_min + 1)):
        # Each token's total router weight for this expert (0 when it was not routed here).
        coef = (rw * (table == experts_min + i)).sum(dim=1, keepdim=True)
        g, u = gate_up(i)
        h = act(x @ g.t()) * (x @ u.t())
        if inter_scale is not None:  # static fp8 intermediate: round through E4M3 with its scale
            from .Fp8Ops import fp8_max
            s = inter_scale.float()
            lim = fp8_max(torch.float8_e4m3fn)
            h = (h / s).clamp(-lim, lim).to(torch.float8_e4m3fn).float() * s
        out += coef * (h @ down[i].t())
    return out.to(out_dtype)


def _split(w12: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if w12.shape[0] % 2:
        raise RuntimeError(f"mixture_of_experts: fused w12 needs an even number of output features, "
                           f"got {tuple(w12.shape)}")
    half = w12.shape[0] // 2
    return w12[:half], w12[half:]


def _hidden(hidden: torch.Tensor, d_scale: Optional[torch.Tensor]) -> torch.Tensor:
    x = hidden.float()
    if d_scale is not None:
        x = x * d_scale.float()
    return x


def _out_dtype(hidden: torch.Tensor, weights: torch.Tensor) -> torch.dtype:
    return weights.dtype if hidden.dtype in _FP8 else hidden.dtype


def mixture_of_experts(hidden_states, expert_routing_table, router_weights, w1, w2, w3, permuted_weights=True,
                       activation="silu", experts_min=0, experts_max=7):
    _check("mixture_of_experts", hidden_states, expert_routing_table, router_weights, (w1, w2, w3),
           experts_min, experts_max)
    down = [_dequant(w, None, permuted_weights, None) for w in w3]
    return _moe(hidden_states, expert_routing_table, router_weights,
                lambda i: (_dequant(w1[i], None, permuted_weights, None), _dequant(w2[i], None, permuted_weights, None)),
                down, activation, experts_min, experts_max, hidden_states.dtype)


def mixture_of_experts_fused(hidden_states, expert_routing_table, router_weights, w12, w3, permuted_weights=True,
                             activation="silu", experts_min=0, experts_max=7):
    _check("mixture_of_experts", hidden_states, expert_routing_table, router_weights, (w12, w3),
           experts_min, experts_max)
    down = [_dequant(w, None, permuted_weights, None) for w in w3]
    return _moe(hidden_states, expert_routing_table, router_weights,
                lambda i: _split(_dequant(w12[i], None, permuted_weights, None)),
                down, activation, experts_min, experts_max, hidden_states.dtype)


def mixture_of_experts_fp8(hidden_states, expert_routing_table, router_weights, w1, w2, w3, d_scale_w1, d_scale_w2,
                           d_scale_w3, d_scale_hidden_states=None, d_scale_intermediate_hidden_states=None,
                           block_size=None, permuted_weights=True, activation="silu", experts_min=0, experts_max=7):
    _check("mixture_of_experts", hidden_states, expert_routing_table, router_weights,
           (w1, w2, w3, d_scale_w1, d_scale_w2, d_scale_w3), experts_min, experts_max)
    down = [_dequant(w, s, permuted_weights, block_size) for w, s in zip(w3, d_scale_w3)]
    return _moe(_hidden(hidden_states, d_scale_hidden_states), expert_routing_table, router_weights,
                lambda i: (_dequant(w1[i], d_scale_w1[i], permuted_weights, block_size),
                           _dequant(w2[i], d_scale_w2[i], permuted_weights, block_size)),
                down, activation, experts_min, experts_max, _out_dtype(hidden_states, router_weights),
                d_scale_intermediate_hidden_states)


def mixture_of_experts_fp8_fused(hidden_states, expert_routing_table, router_weights, w12, w3, d_scale_w12,
                                 d_scale_w3, d_scale_hidden_states=None, d_scale_intermediate_hidden_states=None,
                                 block_size=None, permuted_weights=True, activation="silu", experts_min=0,
                                 experts_max=7):
    _check("mixture_of_experts", hidden_states, expert_routing_table, router_weights,
           (w12, w3, d_scale_w12, d_scale_w3), experts_min, experts_max)
    down = [_dequant(w, s, permuted_weights, block_size) for w, s in zip(w3, d_scale_w3)]
    return _moe(_hidden(hidden_states, d_scale_hidden_states), expert_routing_table, router_weights,
                lambda i: _split(_dequant(w12[i], d_scale_w12[i], permuted_weights, block_size)),
                down, activation, experts_min, experts_max, _out_dtype(hidden_states, router_weights),
                d_scale_intermediate_hidden_states)


_IMPLS = {
    "mixture_of_experts": mixture_of_experts,
    "mixture_of_experts.fused_weights": mixture_of_experts_fused,
    "mixture_of_experts.fp8": mixture_of_experts_fp8,
    "mixture_of_experts.fp8_fused_weights": mixture_of_experts_fp8_fused,
}

def _needs_grad(args, kwargs) -> bool:
    if not torch.is_grad_enabled():
        return False
    for a in (*args, *kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                return True
    return False


def _autograd_kernel(name: str, fn):
    """Training (optimum-habana's Mixtral/Qwen-MoE train through the op): run the math with
    autograd recording its differentiable steps. Otherwise go below autograd to the device
    kernel, so inference graphs keep the single op (and its fake kernel under dynamo)."""
    packet = torch.ops.hpu.mixture_of_experts
    overload = getattr(packet, name.partition(".")[2] or "default")

    def kernel(*args, **kwargs):
        if _needs_grad(args, kwargs):
            return fn(*args, **kwargs)
        with torch._C._AutoDispatchBelowAutograd():
            return overload(*args, **kwargs)
    return kernel


for _name, _fn in _IMPLS.items():
    for _key in ("HPU", "CPU"):
        _lib.impl(_name, _fn, _key)
    _lib.impl(_name, _autograd_kernel(_name, _fn), "Autograd")


def _fake(hidden_states, expert_routing_table, router_weights, *args, **kwargs):
    return hidden_states.new_empty(hidden_states.shape, dtype=_out_dtype(hidden_states, router_weights))


for _name in _IMPLS:
    torch.library.register_fake(f"hpu::{_name}")(_fake)
