"""FusedAdagrad: torch.optim.Adagrad's update, one Go call per parameter group. As in the
bridge, each group's learning rate is taken once (later changes of group["lr"] are
ignored) and the group counts its own steps."""
from __future__ import annotations

import torch

from habana_frameworks.torch._ops import hpex_ops

from ._fused import FusedGroupOptimizer, check_non_negative


class FusedAdagrad(FusedGroupOptimizer):
    sparse_message = "FusedAdagrad does not support sparse gradients"

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10):
        check_non_negative(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                           initial_accumulator_value=initial_accumulator_value, eps=eps)
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._sum(p, group)
        # The bridge keeps each group's lr as a device tensor made here (lr_t).
        self._lr_fixed = [group["lr"] for group in self.param_groups]

    def _sum(self, p: torch.Tensor, group: dict) -> torch.Tensor:
        st = self.state[p]
        if "sum" not in st:
            st["sum"] = torch.full_like(p, group["initial_accumulator_value"], memory_format=torch.contiguous_format)
        return st["sum"]

    def update_group(self, group: dict, params: list[torch.Tensor]) -> None:
        gi = next(i for i, g in enumerate(self.param_groups) if g is group)
        group["step"] = group.get("step", 0) + 1
        lr = self._lr_fixed[gi] if gi < len(self._lr_fixed) else group["lr"]
        clr = lr / (1 + (group["step"] - 1) * group["lr_decay"])
        hpex_ops.adagrad_step([p.data for p in params], [p.grad for p in params],
                              [self._sum(p, group) for p in params], clr=clr,
                              weight_decay=group["weight_decay"], eps=group["eps"])
