"""FusedEMA: a YOLO-style exponential moving average of a model's state, updated with one
Go call (hpu::optimizer_ema) over its floating-point state_dict entries."""
from __future__ import annotations

import math
from copy import deepcopy

import torch

from habana_frameworks.torch._ops import hpex_ops  # noqa: F401


def _is_parallel(model) -> bool:
    return type(model) in (torch.nn.parallel.DataParallel, torch.nn.parallel.DistributedDataParallel)


class FusedEMA:
    def __init__(self, model, decay=0.9999, updates=0):
        self.ema = deepcopy(model.module if _is_parallel(model) else model).eval()
        self.updates = updates
        self.decay = lambda x: decay * (1 - math.exp(-x / 2000))
        for p in self.ema.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        self.updates += 1
        d = self.decay(self.updates)
        msd = (model.module if _is_parallel(model) else model).state_dict()
        esd = self.ema.state_dict()
        ema, src = [], []
        for k, v in esd.items():
            if v.dtype.is_floating_point:
                ema.append(v)
                src.append(msd[k].detach())
        if ema:
            decay_t = torch.tensor([d], dtype=torch.float32).to(ema[0].device)
            torch.ops.hpu.optimizer_ema(src, ema, decay_t)

    def update_attr(self, model, include=(), exclude=("process_group", "reducer")):
        for k, v in model.__dict__.items():
            if (len(include) and k not in include) or k.startswith("_") or k in exclude:
                continue
            setattr(self.ema, k, v)
