"""FusedSDPA: the bridge's fused scaled dot-product attention on hpu, on the Go flash-style
kernel (never the full score matrix; the backward recomputes the probabilities)."""
from __future__ import annotations

import math

import torch

from habana_frameworks.torch._ops import hpex_attention as _att


def _recompute_default() -> bool:
    fn = getattr(torch.hpu, "recompute_sdp_enabled", None) if hasattr(torch, "hpu") else None
    return bool(fn()) if callable(fn) else False


class FusedSDPA:
    """`FusedSDPA.apply(...)` as in the bridge (there an autograd.Function; here the
    gradient flows through the attention kernel's own Function)."""

    @staticmethod
    def apply(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, softmax_mode="None",
              recompute_mode=None, valid_seq_len=None, seq_padding_type="left", return_dropout_mask=False,
              return_attn_probs=False):
        softmax_mode = str(softmax_mode).lower()
        seq_padding_type = str(seq_padding_type).lower()
        requires_backward = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
        if torch.compiler.is_compiling():
            # Being traced by dynamo (torch.compile): the eager path below calls the kernel
            # runtime, which dynamo does not trace (every call would be a graph break).
            return _traced_apply(q, k, v, attn_mask, dropout_p, is_causal, scale, softmax_mode, recompute_mode,
                                 valid_seq_len, seq_padding_type, return_dropout_mask, return_attn_probs,
                                 requires_backward)
        recompute = _recompute_default() if recompute_mode is None else bool(recompute_mode)
        if return_attn_probs:
            assert not requires_backward, "return_attn_probs is supported only for inference mode"
            recompute = False
        if recompute:
            assert not return_dropout_mask, "Return_dropout_mask is not supported in recompute mode"
            if requires_backward and softmax_mode == "fast":
                assert is_causal, ("Optimized softmax mode is supported in recompute training mode only in "
                                   "causal(triangular) mask case")
        if valid_seq_len is not None:
            assert (not requires_backward) and is_causal and attn_mask is None, (
                "Valid sequence length is supported only in inference with is_causal(triangular) mask case")
        gqa = q.dim() == 4 and k.dim() == 4 and q.shape[1] != k.shape[1]
        _att.check_like_torch(q, k, v, attn_mask, dropout_p, is_causal and valid_seq_len is None, scale, gqa)
        if scale is None:
            scale = 1.0 / math.sqrt(q.shape[-1])
        mask, causal = attn_mask, is_causal
        if valid_seq_len is not None:
            mask, causal = _att._valid_len_mask(q, k, valid_seq_len, seq_padding_type), False
        if mask is not None and q.dim() == 4 and mask.dim() == 4 and gqa and mask.shape[1] not in (1, q.shape[1]):
            raise RuntimeError(f"FusedSDPA: mask heads {mask.shape[1]} match neither 1 nor {q.shape[1]}")
        if not _att.native_ok(q, k, v):
            raise RuntimeError("FusedSDPA: q, k and v must be float32 or bfloat16 hpu tensors of one dtype")
        if mask is not None:
            mask = mask.to(q.device)
        seed = _att.new_seed(dropout_p)
        out = _att.sdpa_4d(q, k, v, mask, dropout_p, causal, scale, seed, fast=softmax_mode == "fast")
        extras = []
        if return_attn_probs:
            extras.append(_att.attention_probs(q, k, mask, causal, scale))
        if return_dropout_mask:
            # The keep mask of the Philox stream the kernel used.
            extras.append(_att.dropout_mask((*q.shape[:-1], k.shape[-2]), q.device, dropout_p, seed))
        if not extras:
            return out
        return (out, *extras)


# ------------------------------------------------------------ FusedSDPA under torch.compile
#
# As in the bridge, a compiled FusedSDPA is an autograd.Function over the hpu::sdpa_* ops
# (fake kernels for tracing; the Go attention kernel at run time), so dynamo puts it in the
# graph: the recompute pair (row max and inverse sum saved, probabilities recomputed in the
# backward) by default, the non-recompute pair when the probabilities or the dropout mask
# are returned. The dropout seed is drawn by the forward op at each run and handed to the
# backward as a tensor.


class _RecomputeSDPA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask, dropout_p, scale, is_causal, softmax_mode, valid_seq_len, seq_padding_type):
        out, m, linv, seed = torch.ops.hpu.sdpa_recomp_fwd(q, k, v, mask, dropout_p, scale, is_causal, True,
                                                           softmax_mode, valid_seq_len, seq_padding_type)
        ctx.save_for_backward(q, k, v, mask, m, linv, seed, out)
        ctx.args = (is_causal, dropout_p, scale, softmax_mode)
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, mask, m, linv, seed, out = ctx.saved_tensors
        is_causal, dropout_p, scale, softmax_mode = ctx.args
        dq, dk, dv = torch.ops.hpu.sdpa_recomp_bwd(grad, q, k, v, mask, m, linv, seed, is_causal, dropout_p, scale,
                                                   softmax_mode, out)
        return dq, dk, dv, None, None, None, None, None, None, None


class _ProbsSDPA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask, dropout_p, scale, is_causal, softmax_mode, valid_seq_len, seq_padding_type):
        out, probs, dm = torch.ops.hpu.sdpa_fwd(q, k, v, mask, dropout_p, scale, is_causal, softmax_mode,
                                                valid_seq_len, seq_padding_type)
        ctx.save_for_backward(q, k, v, probs, dm, out)
        ctx.args = (is_causal, dropout_p, scale)
        ctx.mark_non_differentiable(probs, dm)
        return out, probs, dm

    @staticmethod
    def backward(ctx, grad, _gp, _gdm):
        q, k, v, probs, dm, out = ctx.saved_tensors
        is_causal, dropout_p, scale = ctx.args
        dq, dk, dv = torch.ops.hpu.sdpa_bwd(grad, q, k, v, probs, dm, is_causal, dropout_p, scale, out)
        return dq, dk, dv, None, None, None, None, None, None, None


def _traced_apply(q, k, v, attn_mask, dropout_p, is_causal, scale, softmax_mode, recompute_mode, valid_seq_len,
                  seq_padding_type, return_dropout_mask, return_attn_probs, requires_backward):
    """FusedSDPA.apply while dynamo traces: the eager path's checks and operand layout in
    plain torch code (sizes are static here), then one of the two Functions above."""
    if return_attn_probs:
        assert not requires_backward, "return_attn_probs is supported only for inference mode"
    elif recompute_mode:
        # (the process-wide recompute default is not read here: it only selects assertions)
        assert not return_dropout_mask, "Return_dropout_mask is not supported in recompute mode"
        if requires_backward and softmax_mode == "fast":
            assert is_causal, ("Optimized softmax mode is supported in recompute training mode only in "
                               "causal(triangular) mask case")
    if valid_seq_len is not None:
        assert (not requires_backward) and is_causal and attn_mask is None, (
            "Valid sequence length is supported only in inference with is_causal(triangular) mask case")
    if not (q.dtype == k.dtype == v.dtype and q.dtype in (torch.float32, torch.bfloat16)):
        raise RuntimeError("FusedSDPA: q, k and v must be float32 or bfloat16 hpu tensors of one dtype")
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise RuntimeError(f"FusedSDPA: q, k and v must have one rank of at least 2, got {q.dim()}, {k.dim()}, "
                           f"{v.dim()}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise RuntimeError(f"FusedSDPA: shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} "
                           "do not fit (q and k need one head dim, k and v one sequence length)")
    L, S = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    gqa = q.dim() == 4 and q.shape[1] != k.shape[1]
    if gqa:
        if k.shape[1] != v.shape[1] or q.shape[1] % k.shape[1]:
            raise RuntimeError(f"FusedSDPA: {q.shape[1]} query heads cannot share {k.shape[1]} key and "
                               f"{v.shape[1]} value heads")
        if q.shape[0] != k.shape[0] or k.shape[0] != v.shape[0]:
            raise RuntimeError("FusedSDPA: grouped-query attention needs one batch size")
        q4, k4, v4, lead = q, k, v, None
    else:
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        if q.dim() == 4 and tuple(q.shape[:2]) == tuple(k.shape[:2]) == tuple(v.shape[:2]):
            q4, k4, v4, lead = q, k, v, None
        else:
            q4 = q.expand(*lead, L, q.shape[-1]).reshape(1, -1, L, q.shape[-1])
            k4 = k.expand(*lead, S, k.shape[-1]).reshape(1, -1, S, k.shape[-1])
            v4 = v.expand(*lead, S, v.shape[-1]).reshape(1, -1, S, v.shape[-1])
    mask = attn_mask
    if mask is not None:
        if mask.dim() == 4 and gqa and mask.shape[1] not in (1, q.shape[1]):
            raise RuntimeError(f"FusedSDPA: mask heads {mask.shape[1]} match neither 1 nor {q.shape[1]}")
        if lead is not None:
            mask = mask.expand(*lead, L, S).reshape(1, -1, L, S)
        mask = mask.to(q.device).detach()
    if valid_seq_len is not None and lead is not None:
        raise RuntimeError("FusedSDPA: valid_seq_len needs 4-D q, k and v")
    args = (mask, float(dropout_p), float(scale), bool(is_causal), softmax_mode, valid_seq_len, seq_padding_type)
    if return_attn_probs or return_dropout_mask:
        out, probs, dm = _ProbsSDPA.apply(q4, k4, v4, *args)
    else:
        out = _RecomputeSDPA.apply(q4, k4, v4, *args)
    if lead is not None:
        out = out.reshape(*lead, L, v.shape[-1])
    if not (return_attn_probs or return_dropout_mask):
        return out
    extras = []
    if return_attn_probs:
        extras.append(probs if lead is None else probs.reshape(*lead, L, S))
    if return_dropout_mask:
        dm = dm if dm.numel() else torch.ones(probs.shape, dtype=torch.bool, device=q.device)
        extras.append(dm if lead is None else dm.reshape(*lead, L, S))
    return (out, *extras)


# Grouped-query attention helpers, module-level as in the bridge: vLLM's Gaudi path imports
# them (`from habana_frameworks.torch.hpex.kernels.FusedSDPA import is_gqa, ...`) and calls
# FusedSDPA on the 5-D [batch, groups, heads per group, seq, dim] views they make.
def is_gqa(q: torch.Tensor, k: torch.Tensor) -> bool:
    """True for 4-D [batch, heads, seq, dim] inputs whose key/value heads are fewer than the
    query heads but more than one (one shared head is plain multi-query broadcasting)."""
    if q.dim() != 4:
        return False
    return q.shape[1] != k.shape[1] and k.shape[1] != 1


def gqa_input_reshape_fwd(q, k, v, attention_mask):
    """Split the query heads into k's head groups; k and v get a size-1 heads-per-group axis
    that broadcasts. A per-query-head mask is split like q, a shared one gains a group axis."""
    b, hq, sq, d = q.shape
    groups = k.shape[1]
    per_group = hq // groups
    q5 = q.reshape(b, groups, per_group, sq, d)
    k5 = k.reshape(k.shape[0], groups, 1, k.shape[2], k.shape[3])
    v5 = v.reshape(v.shape[0], groups, 1, v.shape[2], v.shape[3])
    if attention_mask is not None:
        mb, mh, mt, ms = attention_mask.shape
        if mh == hq:
            attention_mask = attention_mask.reshape(mb, groups, per_group, mt, ms)
        else:
            attention_mask = attention_mask.unsqueeze(1)
    return q5, k5, v5, attention_mask


def gqa_input_reshape_bwd(q, v, grad_in):
    """A gradient shaped like the 4-D output, viewed as the 5-D grouped query."""
    return grad_in.reshape(q.shape[0], q.shape[1], q.shape[2], q.shape[3], v.shape[-1])


def gqa_output_reshape(tensor):
    """Merge the [groups, heads per group] axes of a 5-D result back into heads."""
    b, groups, per_group, s, d = tensor.shape
    return tensor.reshape(b, groups * per_group, s, d)
