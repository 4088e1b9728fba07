"""CTCLoss: torch.nn.functional.ctc_loss's semantics on the Go CTC kernel
(hpu::ctc_loss_custom, its backward hpu::ctc_loss_custom_backward)."""
from __future__ import annotations

import torch
from torch.nn._reduction import get_enum

from habana_frameworks.torch._ops import hpex_ctc  # noqa: F401  (defines the ops)


class CTCLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
                zero_infinity=False):
        loss, alpha = torch.ops.hpu.ctc_loss_custom(log_probs, targets, input_lengths, target_lengths, blank,
                                                    get_enum(reduction), zero_infinity)
        ctx.save_for_backward(log_probs, targets, input_lengths, target_lengths, loss, alpha)
        ctx.blank, ctx.reduction, ctx.zero_infinity = blank, get_enum(reduction), zero_infinity
        return loss

    @staticmethod
    def backward(ctx, loss_grad_in):
        log_probs, targets, input_lengths, target_lengths, loss, alpha = ctx.saved_tensors
        grad = torch.ops.hpu.ctc_loss_custom_backward(loss_grad_in, log_probs, targets, input_lengths,
                                                      target_lengths, loss, alpha, ctx.blank, ctx.reduction,
                                                      ctx.zero_infinity)
        return grad, None, None, None, None, None, None
