"""FusedAdamW: the bridge's AdamW (eps 1e-6 added to the raw sqrt(v), decoupled weight
decay on the old weight, a per-group step counter), one Go call per parameter group."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch.optim import Optimizer

from habana_frameworks.torch.core import step_closure
from habana_frameworks.torch._ops import hpex_ops  # noqa: F401  (defines torch.ops.hpu.optimizer_adamw)

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


class FusedAdamW(Optimizer):
    def __init__(
        self,
        params: Iterable[torch.nn.parameter.Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        bias_correction: bool = True,
        moments_dtype: torch.dtype | tuple[torch.dtype, torch.dtype] | None = None,
    ):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr} - should be >= 0.0")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter: {betas[0]} - should be in [0.0, 1.0[")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter: {betas[1]} - should be in [0.0, 1.0[")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps} - should be >= 0.0")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "bias_correction": bias_correction}
        super().__init__(params, defaults)
        self.moments_dtype = moments_dtype
        for d in self.get_moment_dtypes(torch.float32):
            if d in _FP8:
                raise NotImplementedError("FusedAdamW: float8 moments are not supported by hpusim")

    def get_moment_dtypes(self, param_dtype: torch.dtype) -> tuple[torch.dtype, torch.dtype]:
        if self.moments_dtype is None:
            return param_dtype, param_dtype
        if isinstance(self.moments_dtype, tuple):
            return self.moments_dtype
        return self.moments_dtype, self.moments_dtype

    @staticmethod
    def is_bias_correction(group: dict) -> bool:
        if "bias_correction" in group:
            return group["bias_correction"]
        if "correct_bias" in group:
            print("FusedAdamW: key 'bias_correction' not found. using 'correct_bias' instead")
            print("This might occur when loading old checkpoints.")
            return group["correct_bias"]
        return True  # a state dict of torch.optim.AdamW

    @torch.no_grad()
    def step(self, closure: Callable | None = None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            step_closure._mark_step_if_lazy()
            grads, weights, exp_avgs, exp_avg_sqs = [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    m_dtype, v_dtype = self.get_moment_dtypes(p.dtype)
                    state["exp_avg"] = torch.zeros(p.shape, dtype=m_dtype, device=p.device)
                    state["exp_avg_sq"] = torch.zeros(p.shape, dtype=v_dtype, device=p.device)
                grads.append(p.grad)
                weights.append(p.data)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
            if not weights:
                continue
            beta1, beta2 = group["betas"]
            group["step"] = group.get("step", 0) + 1
            step_size = group["lr"]
            if self.is_bias_correction(group):
                bc1 = 1.0 - beta1 ** group["step"]
                bc2 = 1.0 - beta2 ** group["step"]
                step_size = step_size * math.sqrt(bc2) / bc1
            # The bridge passes both as tensors of the weights' dtype (rounded to it).
            wdtype = weights[0].dtype
            neg_step_t = torch.tensor([-step_size], dtype=torch.float32).to(wdtype).to(weights[0].device)
            modified_wd = 1.0 - group["weight_decay"] * group["lr"]
            wd_t = torch.tensor([modified_wd], dtype=torch.float32).to(wdtype).to(weights[0].device)
            torch.ops.hpu.optimizer_adamw(grads, weights, exp_avgs, exp_avg_sqs, neg_step_t, beta1, beta2,
                                          group["eps"], wd_t, modified_wd != 1.0)
        step_closure._mark_step_if_lazy()
        return loss
