"""FusedLars: wraps another optimizer; before its step, each group's gradients are
rewritten in place with the LARS trust ratio and the learning rate (hpu::optimizer_lars),
the group's weight decay folded in (the inner optimizer sees weight_decay 0)."""
from __future__ import annotations

import torch

from habana_frameworks.torch.core import step_closure
from habana_frameworks.torch._ops import hpex_ops  # noqa: F401

from ._fused import run_closure


class FusedLars:
    def __init__(self, optimizer, skip_mask, eeta=0.001, eps=1e-8):
        self.optim = optimizer
        self.eeta = eeta
        self.eps = eps
        self.skip_mask = skip_mask

    def __getstate__(self):
        return self.optim.__getstate__()

    def __setstate__(self, state):
        self.optim.__setstate__(state)

    @property
    def state(self):
        return self.optim.state

    @property
    def param_groups(self):
        return self.optim.param_groups

    @param_groups.setter
    def param_groups(self, value):
        self.optim.param_groups = value

    @property
    def defaults(self):
        return self.optim.defaults

    def __repr__(self):
        return self.optim.__repr__()

    def state_dict(self):
        return self.optim.state_dict()

    def load_state_dict(self, state_dict):
        self.optim.load_state_dict(state_dict)

    def zero_grad(self, set_to_none: bool = True):
        self.optim.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group):
        self.optim.add_param_group(param_group)

    @torch.no_grad()
    def step(self, closure=None):
        loss = run_closure(closure)
        weight_decays = []
        for group in self.optim.param_groups:
            wd = group.get("weight_decay", 0)
            weight_decays.append(wd)
            group["weight_decay"] = 0
            params, grads, masks = [], [], []
            for i, p in enumerate(group["params"]):
                if p.grad is None:
                    continue
                params.append(p.data)
                grads.append(p.grad)
                masks.append(int(self.skip_mask[i]))
            if not params:
                continue
            lr_t = torch.tensor([group["lr"]], dtype=torch.float32).to(params[0].device)
            step_closure._mark_step_if_lazy()
            torch.ops.hpu.optimizer_lars(params, grads, masks, self.eeta, wd, self.eps, lr_t)
        self.optim.step()
        for group, wd in zip(self.optim.param_groups, weight_decays):
            group["weight_decay"] = wd
        return loss
