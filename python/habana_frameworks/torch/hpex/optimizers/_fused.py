"""What the fused optimizers share: the bridge's torch-style hyperparameter checks, and a
step() that runs the closure, then per parameter group collects the parameters that have
gradients (sparse ones get the optimizer's message) and hands them to one fused update,
with the lazy-mode mark_steps the bridge places around it."""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.optim import Optimizer
from torch.optim.optimizer import required

from habana_frameworks.torch.core import step_closure

_MESSAGES = {
    "lr": "Invalid learning rate: {}",
    "momentum": "Invalid momentum value: {}",
    "weight_decay": "Invalid weight_decay value: {}",
    "dampening": "Invalid dampening value: {}",
    "lr_decay": "Invalid lr_decay value: {}",
    "initial_accumulator_value": "Invalid initial_accumulator_value value: {}",
    "eps": "Invalid epsilon value: {}",
}


def check_non_negative(**values: float) -> None:
    """Raise torch's ValueError for the first negative hyperparameter (`required` skipped)."""
    for name, value in values.items():
        if value is not required and value < 0.0:
            raise ValueError(_MESSAGES[name].format(value))


def run_closure(closure: Callable | None):
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class FusedGroupOptimizer(Optimizer):
    """An optimizer whose step is one fused update per parameter group: subclasses set
    `sparse_message` and implement `update_group(group, params)`."""

    sparse_message = "{} does not support sparse gradients"

    def update_group(self, group: dict, params: list[torch.Tensor]) -> None:
        raise NotImplementedError

    def params_with_grads(self, group: dict) -> list[torch.Tensor]:
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:
            if p.grad.is_sparse:
                raise RuntimeError(self.sparse_message.format(type(self).__name__))
        return params

    @torch.no_grad()
    def step(self, closure: Callable | None = None):
        loss = run_closure(closure)
        for group in self.param_groups:
            step_closure._mark_step_if_lazy()
            params = self.params_with_grads(group)
            if params:
                self.update_group(group, params)
        step_closure._mark_step_if_lazy()
        return loss


class NesterovDefault:
    """Mixin: state dicts saved before "nesterov" existed load with it off (as torch.optim.SGD)."""

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
