"""FusedAdagrad: torch.optim.Adagrad's update, one Go call per parameter group. As in the
bridge, each group's learning rate is taken once (later changes of group["lr"] are
ignored) and the group counts its own steps."""
from __future__ import annotations

import torch
from torch.optim import Optimizer

from habana_frameworks.torch.core import step_closure
from habana_frameworks.torch._ops import hpex_ops


class FusedAdagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"] = torch.full_like(p, initial_accumulator_value,
                                                       memory_format=torch.contiguous_format)
        # The bridge keeps each group's lr as a device tensor made here (lr_t).
        self._lr_fixed = [group["lr"] for group in self.param_groups]

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for gi, group in enumerate(self.param_groups):
            step_closure._mark_step_if_lazy()
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                if p.grad.is_sparse:
                    raise RuntimeError("FusedAdagrad does not support sparse gradients")
            group["step"] = group.get("step", 0) + 1
            lr = self._lr_fixed[gi] if gi < len(self._lr_fixed) else group["lr"]
            clr = lr / (1 + (group["step"] - 1) * group["lr_decay"])
            sums = []
            for p in params:
                st = self.state[p]
                if "sum" not in st:
                    st["sum"] = torch.full_like(p, group["initial_accumulator_value"],
                                                memory_format=torch.contiguous_format)
                sums.append(st["sum"])
            hpex_ops.adagrad_step([p.data for p in params], [p.grad for p in params], sums, clr=clr,
                                  weight_decay=group["weight_decay"], eps=group["eps"])
        step_closure._mark_step_if_lazy()
        return loss
