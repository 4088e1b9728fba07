"""`transformer_engine.FusedAttention`: fused scaled dot-product attention whose q, k and v are
cast to fp8 (E4M3) with delayed per-tensor scales inside an enabled `fp8_autocast`, as
optimum-habana's fp8 attention uses it (`FusedAttention(scale, attention_dropout,
enable_recompute)(q, k, v, attn_mask, is_causal, softmax_mode)`). The attention itself is
torch.ops.hpu.fp8_sdpa_recomp_fwd on the fp8 operands with their inverse scales (grouped heads as
hpex.kernels' fp8_fused_sdpa); the output is bfloat16. The scales follow the fp8_autocast
recipe's delayed scaling (the amax history of each operand, as TE's Linear). Outside
fp8_autocast it is FusedSDPA in the operands' dtype. Training in fp8 needs is_causal, as the
bridge's fp8 attention; its backward recomputes the attention in float32 from the fp8 operands."""
from __future__ import annotations

from typing import Optional

import torch

from .fp8 import get_fp8_recipe, is_fp8_enabled
from .module import _ScalingState


class FusedAttention(torch.nn.Module):
    def __init__(self, scale: Optional[float] = None, attention_dropout: float = 0.0, enable_recompute: bool = True):
        super().__init__()
        self.scale = scale
        self.attention_dropout = float(attention_dropout)
        self.enable_recompute = bool(enable_recompute)
        self._scaling: Optional[_ScalingState] = None

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
                is_causal: bool = False, softmax_mode: str = "None") -> torch.Tensor:
        p = self.attention_dropout if self.training else 0.0
        if not is_fp8_enabled():
            from ...kernels import FusedSDPA
            return FusedSDPA.apply(q, k, v, attn_mask, p, is_causal, self.scale, softmax_mode, self.enable_recompute)
        recipe = get_fp8_recipe()
        if self._scaling is None or self._scaling.device != q.device:
            self._scaling = _ScalingState(3, q.device)
        st = self._scaling
        st.update_scale(recipe, torch.float8_e4m3fn)
        st.record(recipe, [t.detach().abs().amax().float() for t in (q, k, v)])
        training = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
        if training and not is_causal:
            raise AssertionError("Fp8 FusedSDPA in training only supports Triangular mask")
        return _Fp8Attention.apply(q, k, v, st.scale.clone(), attn_mask, p, is_causal, self.scale, softmax_mode)


class _Fp8Attention(torch.autograd.Function):
    """Attention on q, k, v cast to E4M3 with `scales` (one per operand); the backward
    recomputes causal attention in float32 from the dequantised fp8 operands and passes the
    gradients straight through the casts, in the operands' dtypes."""

    @staticmethod
    def forward(ctx, q, k, v, scales, attn_mask, p, is_causal, scale, softmax_mode):
        import math

        from ...kernels import Fp8Ops
        from ...kernels.Fp8FusedSDPA import gqa_input_reshape_fwd, gqa_output_reshape, is_gqa
        ops = [Fp8Ops._cast_to_fp8_v2(t, scales[i:i + 1], False, False, torch.float8_e4m3fn)[0]
               for i, t in enumerate((q, k, v))]
        inv = [1.0 / scales[i:i + 1] for i in range(3)]
        sc = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
        gqa = is_gqa(q, k)
        q5, k5, v5, m5 = gqa_input_reshape_fwd(*ops, attn_mask) if gqa else (*ops, attn_mask)
        out, _, _, seed, _, _ = torch.ops.hpu.fp8_sdpa_recomp_fwd(q5, k5, v5, m5, p, sc, is_causal, True,
                                                                 str(softmax_mode).lower(), *inv, None, None, None,
                                                                 False, False, None, "left")
        if gqa:
            out = gqa_output_reshape(out)
        ctx.save_for_backward(*ops, attn_mask, seed, *inv)
        ctx.args = (p, sc, q.dtype, k.dtype, v.dtype)
        return out

    @staticmethod
    def backward(ctx, dout):
        from ...kernels.Fp8FusedSDPA import recompute_grads
        q8, k8, v8, attn_mask, seed, iq, ik, iv = ctx.saved_tensors
        p, sc, dq, dk, dv = ctx.args
        gq, gk, gv = recompute_grads(q8, k8, v8, (iq, ik, iv), attn_mask, seed, p, sc, dout)
        return gq.to(dq), gk.to(dk), gv.to(dv), None, None, None, None, None, None
