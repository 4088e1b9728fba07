"""FusedSGD: torch.optim.SGD's update (L2 weight decay, momentum with dampening, Nesterov),
one Go call per parameter group (hpu::optimizer_sgd / optimizer_sgd_momentum)."""
from __future__ import annotations

import torch
from torch.optim.optimizer import required

from habana_frameworks.torch._ops import hpex_ops  # noqa: F401  (defines the hpu::optimizer_* ops)

from ._fused import FusedGroupOptimizer, NesterovDefault, check_non_negative


class FusedSGD(NesterovDefault, FusedGroupOptimizer):
    sparse_message = "SGD does not support sparse gradients, please consider SparseSGD"

    def __init__(self, params, lr=required, momentum=0, weight_decay=0, dampening=0, nesterov=False):
        check_non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay, dampening=dampening)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov}
        super().__init__(params, defaults)

    def update_group(self, group: dict, params: list[torch.Tensor]) -> None:
        dev = params[0].device
        lr_t = torch.tensor([group["lr"]], dtype=torch.float32).to(dev)
        wd, mom, damp, nesterov = group["weight_decay"], group["momentum"], group["dampening"], group["nesterov"]
        if mom == 0:
            torch.ops.hpu.optimizer_sgd([p.grad for p in params], [p.data for p in params], lr_t, wd, mom,
                                        damp, nesterov)
            return
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
