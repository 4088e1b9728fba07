"""FusedSGD: torch.optim.SGD's update (L2 weight decay, momentum with dampening, Nesterov),
one Go call per parameter group (hpu::optimizer_sgd / optimizer_sgd_momentum)."""
from __future__ import annotations

import torch
from torch.optim.optimizer import Optimizer, required

from habana_frameworks.torch.core import step_closure
from habana_frameworks.torch._ops import hpex_ops  # noqa: F401


class FusedSGD(Optimizer):
    def __init__(self, params, lr=required, momentum=0, weight_decay=0, dampening=0, nesterov=False):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if dampening < 0.0:
            raise ValueError(f"Invalid dampening value: {dampening}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            step_closure._mark_step_if_lazy()
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                if p.grad.is_sparse:
                    raise RuntimeError("SGD does not support sparse gradients, please consider SparseSGD")
            dev = params[0].device
            lr_t = torch.tensor([group["lr"]], dtype=torch.float32).to(dev)
            wd, mom, damp, nesterov = group["weight_decay"], group["momentum"], group["dampening"], group["nesterov"]
            if mom == 0:
                torch.ops.hpu.optimizer_sgd([p.grad for p in params], [p.data for p in params], lr_t, wd, mom,
                                            damp, nesterov)
                continue
            # A new buffer starts at zero and its first step takes the gradient as it is
            # (epoch 0), as torch.optim.SGD's first step does; the others continue (epoch 1).
            mom_t = torch.tensor([mom], dtype=torch.float32).to(dev)
            fresh, cont = [], []
            for p in params:
                state = self.state[p]
                if state.get("momentum_buffer") is None:
                    state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
                    fresh.append(p)
                else:
                    cont.append(p)
            for ps, epoch in ((fresh, 0), (cont, 1)):
                if ps:
                    torch.ops.hpu.optimizer_sgd_momentum(
                        [p.grad for p in ps], [p.data for p in ps], [self.state[p]["momentum_buffer"] for p in ps],
                        torch.tensor([epoch], dtype=torch.int32).to(dev), lr_t, mom_t, wd, damp, nesterov)
        step_closure._mark_step_if_lazy()
        return loss
