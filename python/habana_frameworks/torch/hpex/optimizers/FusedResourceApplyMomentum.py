"""FusedResourceApplyMomentum: TensorFlow's momentum update on gradients already scaled by
the learning rate (FusedLars's output). As the bridge publishes it: a parameter's first
step adds the gradient and keeps it as the buffer; later steps run
hpu::optimizer_resource_apply_momentum (buf = momentum*buf - d_p; p = p + buf)."""
from __future__ import annotations

import torch
from torch.optim.optimizer import Optimizer, required

from habana_frameworks.torch.core import step_closure
from habana_frameworks.torch._ops import hpex_ops  # noqa: F401


class FusedResourceApplyMomentum(Optimizer):
    def __init__(self, params, lr=required, momentum=0, weight_decay=0, nesterov=False):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov}
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum requires a momentum")
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
            momentum = group["momentum"]
            params = [p for p in group["params"] if p.grad is not None]
            step_closure._mark_step_if_lazy()
            fresh = [p for p in params if self.state[p].get("momentum_buffer") is None]
            cont = [p for p in params if self.state[p].get("momentum_buffer") is not None]
            for p in fresh:
                d_p = p.grad
                if momentum != 0:
                    d_p = torch.clone(d_p).detach()
                    self.state[p]["momentum_buffer"] = d_p
                p.add_(d_p)
            if cont:
                pm = []
                for p in cont:
                    pm += [p.data, self.state[p]["momentum_buffer"]]
                torch.ops.hpu.optimizer_resource_apply_momentum(pm, [p.grad for p in cont], momentum)
            step_closure._mark_step_if_lazy()
        return loss
