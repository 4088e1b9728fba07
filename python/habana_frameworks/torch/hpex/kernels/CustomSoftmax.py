"""CustomSoftmax: the bridge's bfloat16 softmax over the last dim with a choice of exp
(flavor 0 exact, 1 the non-LUT approximation), on the native softmax kernel."""
from __future__ import annotations

import torch

from habana_frameworks.torch._ops import hpex_ctc  # noqa: F401  (defines hpu::custom_softmax)


class CustomSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, flavor):
        out = torch.ops.hpu.custom_softmax(inp, flavor)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        # d softmax: y * (g - sum(g * y)), in float32
        y32, g32 = y.float(), grad.float()
        return (y32 * (g32 - (g32 * y32).sum(-1, keepdim=True))).to(y.dtype), None
