"""`habana_frameworks.torch.hpex.kernels.Fp8FusedSDPA`: the fp8 fused attention API over
`torch.ops.hpu.fp8_sdpa_recomp_fwd` (Fp8SDPA.py), as the bridge's module of that name:
`fp8_fused_sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, softmax_mode, d_scale_q, d_scale_k,
d_scale_v, q_scale_s, q_scale_o, d_scale_s, is_amax_s, is_amax_o, valid_seq_len, seq_padding_type,
recompute)` and the grouped-query helpers `is_gqa`, `gqa_input_reshape_fwd`, `gqa_output_reshape`.

Grouped-query attention (q heads a multiple of k/v heads, not 1) runs on 5-D views
[B, groups, heads per group, L, E] with k/v [B, groups, 1, S, E] broadcast over the group.
Inference (no operand requires grad) returns (out, amax_s, amax_o); training returns
(out, m, linv, seed, amax_s, amax_o) and needs is_causal, as the bridge. The emulation always
runs the recompute (flash) form: the non-recompute one has the same results. The backward
recomputes the attention in float32 from the dequantised operands (probabilities not
quantised), through the same dropout mask, and returns gradients in the operands' dtypes.
"""
from __future__ import annotations

import math

import torch

from . import Fp8SDPA  # noqa: F401  (defines the ops)
from ..._ops.hpex_attention import _seed_of, dropout_mask


def is_gqa(q: torch.Tensor, k: torch.Tensor) -> bool:
    return q.dim() == 4 and q.shape[1] != k.shape[1] and k.shape[1] != 1


def gqa_input_reshape_fwd(q, k, v, attention_mask):
    """[B, H, L, E] q and [B, G, S, E] k/v -> [B, G, H/G, L, E] and [B, G, 1, S, E]; a mask over all
    q heads gets the same split, a mask [B, 1, L, S] a group axis of 1."""
    b, hq, lq, e = q.shape
    groups = k.shape[1]
    q = q.reshape(b, groups, hq // groups, lq, e)
    k = k.reshape(k.shape[0], groups, 1, k.shape[2], k.shape[3])
    v = v.reshape(v.shape[0], groups, 1, v.shape[2], v.shape[3])
    if attention_mask is not None:
        if attention_mask.dim() == 4 and attention_mask.shape[1] == hq:
            attention_mask = attention_mask.reshape(attention_mask.shape[0], groups, hq // groups,
                                                    *attention_mask.shape[2:])
        else:
            attention_mask = attention_mask.unsqueeze(1)
    return q, k, v, attention_mask


def gqa_output_reshape(t: torch.Tensor) -> torch.Tensor:
    b, g, hpg, l, e = t.shape
    return t.reshape(b, g * hpg, l, e)


def _deq(t, d):
    x = t.float()
    if d is None:
        return x
    if isinstance(d, torch.Tensor):
        return x if d.numel() == 0 else x * d.float().reshape(-1)[0]
    return x if float(d) == 0.0 else x * float(d)


class Fp8FusedSDPA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, softmax_mode="None",
                d_scale_q=None, d_scale_k=None, d_scale_v=None, q_scale_s=None, q_scale_o=None, d_scale_s=None,
                is_amax_s=False, is_amax_o=False, valid_seq_len=None, seq_padding_type="left", recompute=None):
        requires_backward = q.requires_grad or k.requires_grad or v.requires_grad
        if not requires_backward and (q.numel() == 0 or k.numel() == 0 or v.numel() == 0):
            dtype = q.dtype if q_scale_o is not None else torch.bfloat16
            return q.new_empty((*q.shape[:-1], v.shape[-1]), dtype=dtype), None, None
        softmax_mode = str(softmax_mode).lower()
        if softmax_mode == "fp32":
            raise AssertionError("softmax_mode == fp32 is not supported in fp8 flow")
        if requires_backward and not is_causal:
            raise AssertionError("Fp8 FusedSDPA in training only supports Triangular mask")
        if valid_seq_len is not None and not (is_causal and not requires_backward):
            raise AssertionError("Valid sequence length is supported only in inference with is_causal(triangular) "
                                 "mask case")
        if scale is None:
            scale = 1.0 / math.sqrt(q.size(-1))
        gqa = is_gqa(q, k)
        q5, k5, v5, mask5 = gqa_input_reshape_fwd(q, k, v, attn_mask) if gqa else (q, k, v, attn_mask)
        out, m, linv, seed, amax_s, amax_o = torch.ops.hpu.fp8_sdpa_recomp_fwd(
            q5, k5, v5, mask5, dropout_p, scale, is_causal, requires_backward, softmax_mode, d_scale_q, d_scale_k,
            d_scale_v, q_scale_s, q_scale_o, d_scale_s, is_amax_s, is_amax_o, valid_seq_len,
            str(seq_padding_type).lower())
        if gqa:
            out = gqa_output_reshape(out)
        if not requires_backward:
            return out, amax_s, amax_o
        ctx.save_for_backward(q, k, v, attn_mask, seed)
        ctx.args = (dropout_p, scale, d_scale_q, d_scale_k, d_scale_v)
        ctx.mark_non_differentiable(m, linv, seed, amax_s, amax_o)
        return out, m, linv, seed, amax_s, amax_o

    @staticmethod
    def backward(ctx, dout, *unused):
        q, k, v, attn_mask, seed = ctx.saved_tensors
        dropout_p, scale, d_scale_q, d_scale_k, d_scale_v = ctx.args
        gq, gk, gv = recompute_grads(q, k, v, (d_scale_q, d_scale_k, d_scale_v), attn_mask, seed, dropout_p, scale,
                                     dout)

        def back(g, d, like):
            g = g if d is None else g * _deq(torch.ones((), device=g.device), d)
            return g.to(like.dtype)
        return (back(gq, d_scale_q, q), back(gk, d_scale_k, k), back(gv, d_scale_v, v)) + (None,) * 16


def recompute_grads(q, k, v, d_scales, attn_mask, seed, dropout_p, scale, dout):
    """Gradients (float32) of causal attention with respect to the dequantised q, k, v (4-D,
    grouped heads allowed), recomputed with the forward's dropout mask."""
    with torch.enable_grad():
        qd = _deq(q, d_scales[0]).detach().requires_grad_()
        kd = _deq(k, d_scales[1]).detach().requires_grad_()
        vd = _deq(v, d_scales[2]).detach().requires_grad_()
        kk, vv = kd, vd
        if is_gqa(q, k):
            rep = q.shape[1] // k.shape[1]
            kk, vv = kd.repeat_interleave(rep, 1), vd.repeat_interleave(rep, 1)
        s = torch.matmul(qd, kk.transpose(-2, -1)) * scale
        L, S = s.shape[-2], s.shape[-1]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(), float("-inf"))
        if attn_mask is not None:
            s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask.float()
        p = torch.softmax(s, dim=-1)
        if dropout_p > 0:
            p = p * dropout_mask(p.shape, p.device, dropout_p, _seed_of(seed)) / (1.0 - dropout_p)
        o = torch.matmul(p, vv)
        return torch.autograd.grad(o, (qd, kd, vd), dout.float())


def fp8_fused_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, softmax_mode="None",
                   d_scale_q=None, d_scale_k=None, d_scale_v=None, q_scale_s=None, q_scale_o=None, d_scale_s=None,
                   is_amax_s=False, is_amax_o=False, valid_seq_len=None, seq_padding_type="left", recompute=None):
    return Fp8FusedSDPA.apply(q, k, v, attn_mask, dropout_p, is_causal, scale, softmax_mode, d_scale_q, d_scale_k,
                              d_scale_v, q_scale_s, q_scale_o, d_scale_s, is_amax_s, is_amax_o, valid_seq_len,
                              seq_padding_type, recompute)
