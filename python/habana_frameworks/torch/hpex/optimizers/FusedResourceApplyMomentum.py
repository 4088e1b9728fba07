"""FusedResourceApplyMomentum: TensorFlow's momentum update on gradients already scaled by
the learning rate (FusedLars's output). As the bridge publishes it: a parameter's first
step adds the gradient and keeps it as the buffer; later steps run
hpu::optimizer_resource_apply_momentum (buf = momentum*buf - d_p; p = p + buf)."""
from __future__ import annotations

import torch
from torch.optim.optimizer import required

from habana_frameworks.torch.core import step_closure
from habana_frameworks.torch._ops import hpex_ops  # noqa: F401

from ._fused import FusedGroupOptimizer, NesterovDefault, check_non_negative


class FusedResourceApplyMomentum(NesterovDefault, FusedGroupOptimizer):
    sparse_message = "{} does not support sparse gradients"

    def __init__(self, params, lr=required, momentum=0, weight_decay=0, nesterov=False):
        check_non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum requires a momentum")
        defaults = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov}
        super().__init__(params, defaults)

    def update_group(self, group: dict, params: list[torch.Tensor]) -> None:
        momentum = group["momentum"]
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
