"""The AdamW step both FusedAdamW classes make (the hpex optimizer and the functional one
torch.distributed's ZeRO uses): moment state in the chosen dtypes, and one
hpu::optimizer_adamw call over a list of parameters."""
from __future__ import annotations

import math

import torch

from habana_frameworks.torch._ops import hpex_ops  # noqa: F401  (defines torch.ops.hpu.optimizer_adamw)

FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
MomentsDtype = "torch.dtype | tuple[torch.dtype, torch.dtype] | None"


def moment_dtypes(moments_dtype, param_dtype: torch.dtype) -> tuple[torch.dtype, torch.dtype]:
    """(exp_avg dtype, exp_avg_sq dtype): the parameter's dtype by default, one dtype for
    both, or a pair."""
    if moments_dtype is None:
        return param_dtype, param_dtype
    if isinstance(moments_dtype, tuple):
        return moments_dtype
    return moments_dtype, moments_dtype


def moments_in_fp8(moments_dtype) -> bool:
    dts = moments_dtype if isinstance(moments_dtype, tuple) else (moments_dtype,)
    return any(d in FP8 for d in dts)


def init_state(state: dict, p: torch.Tensor, moments_dtype, step) -> None:
    """Zero moments (and, for float8 moments, their scales, 1 in the parameter's dtype)."""
    m_dtype, v_dtype = moment_dtypes(moments_dtype, p.dtype)
    state["step"] = step
    state["exp_avg"] = torch.zeros(p.shape, dtype=m_dtype, device=p.device)
    state["exp_avg_sq"] = torch.zeros(p.shape, dtype=v_dtype, device=p.device)
    if moments_in_fp8(moments_dtype):
        state["exp_avg_scale"] = torch.tensor([1], dtype=p.dtype).to(p.device)
        state["exp_avg_sq_scale"] = torch.tensor([1], dtype=p.dtype).to(p.device)


def adamw_update(weights: list[torch.Tensor], grads: list[torch.Tensor], states: list[dict], *, lr: float,
                 beta1: float, beta2: float, eps: float, weight_decay: float, step: int, bias_correction: bool,
                 scalar_dtype: torch.dtype | None = None) -> None:
    """One hpu::optimizer_adamw call: step size lr*sqrt(1-b2^t)/(1-b1^t) (lr without bias
    correction) passed negated, weight decay as the factor 1 - lr*wd. scalar_dtype is the
    dtype of those two tensors (the weights' dtype in FusedAdamW, float32 in the functional
    optimizer)."""
    step_size = lr
    if bias_correction:
        step_size = lr * math.sqrt(1.0 - beta2 ** step) / (1.0 - beta1 ** step)
    dev = weights[0].device
    sdt = scalar_dtype or weights[0].dtype
    neg_step_t = torch.tensor([-step_size], dtype=torch.float32).to(sdt).to(dev)
    modified_wd = 1.0 - weight_decay * lr
    wd_t = torch.tensor([modified_wd], dtype=torch.float32).to(sdt).to(dev)
    scales = sq_scales = None
    if "exp_avg_scale" in states[0]:
        scales = [st["exp_avg_scale"] for st in states]
        sq_scales = [st["exp_avg_sq_scale"] for st in states]
    torch.ops.hpu.optimizer_adamw(grads, weights, [st["exp_avg"] for st in states],
                                  [st["exp_avg_sq"] for st in states], neg_step_t, beta1, beta2, eps, wd_t,
                                  modified_wd != 1.0, scales, sq_scales)
