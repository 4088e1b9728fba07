"""FusedRMSNorm: RMS normalisation over the last dim with its backward, both native
(hpu::rms_norm, hpu::rms_norm_backward)."""
from __future__ import annotations

from enum import Enum

import torch

from habana_frameworks.torch._ops import hpex_ops  # noqa: F401


class RmsNormBwdMode(Enum):
    DEFAULT = 0
    STATIC_CASE_WIDTH_PARTITIONING = 1


class FusedRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, data_in, gamma, eps, use_stages=True, bwd_mode=0, fast_math=False):
        op = torch.ops.hpu.rms_norm_fast if fast_math else torch.ops.hpu.rms_norm
        out, inverse_rms = op(data_in, gamma, eps)
        ctx.save_for_backward(inverse_rms, data_in, gamma)
        ctx.use_stages = use_stages
        ctx.bwd_mode = bwd_mode.value if isinstance(bwd_mode, RmsNormBwdMode) else int(bwd_mode)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        inverse_rms, data_in, gamma = ctx.saved_tensors
        grad_in, grad_gamma = torch.ops.hpu.rms_norm_backward(grad_out, data_in, gamma, inverse_rms,
                                                              ctx.use_stages, ctx.bwd_mode)
        return grad_in, grad_gamma, None, None, None, None
