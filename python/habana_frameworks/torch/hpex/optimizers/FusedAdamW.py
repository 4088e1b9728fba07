"""FusedAdamW: the bridge's AdamW (eps 1e-6 added to the raw sqrt(v), decoupled weight
decay on the old weight, a per-group step counter), one Go call per parameter group.
Moments may be kept in another dtype (moments_dtype: bfloat16, or float8 with a
power-of-two scale per tensor)."""
from __future__ import annotations

from collections.abc import Iterable

import torch

from . import _adamw
from ._fused import FusedGroupOptimizer


class FusedAdamW(FusedGroupOptimizer):
    sparse_message = "Adam does not support sparse gradients, please consider SparseAdam"

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

    def get_moment_dtypes(self, param_dtype: torch.dtype) -> tuple[torch.dtype, torch.dtype]:
        return _adamw.moment_dtypes(self.moments_dtype, param_dtype)

    def check_moments_in_fp8(self) -> bool:
        return _adamw.moments_in_fp8(self.moments_dtype)

    @staticmethod
    def is_bias_correction(group: dict) -> bool:
        if "bias_correction" in group:
            return group["bias_correction"]
        if "correct_bias" in group:
            print("FusedAdamW: key 'bias_correction' not found. using 'correct_bias' instead")
            print("This might occur when loading old checkpoints.")
            return group["correct_bias"]
        return True  # a state dict of torch.optim.AdamW

    def update_group(self, group: dict, params: list[torch.Tensor]) -> None:
        states = []
        for p in params:
            state = self.state[p]
            if len(state) == 0:
                _adamw.init_state(state, p, self.moments_dtype, 0)  # per-param step stays 0, as in the bridge
            states.append(state)
        beta1, beta2 = group["betas"]
        group["step"] = group.get("step", 0) + 1
        _adamw.adamw_update([p.data for p in params], [p.grad for p in params], states, lr=group["lr"],
                            beta1=beta1, beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
                            step=group["step"], bias_correction=self.is_bias_correction(group))
