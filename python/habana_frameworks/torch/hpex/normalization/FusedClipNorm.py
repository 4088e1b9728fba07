"""FusedClipNorm: clip_grad_norm_ with norm type 2 in one Go call (hpu::fused_clip_norm)."""
from __future__ import annotations

import torch

from habana_frameworks.torch._ops import hpex_ops  # noqa: F401


class FusedClipNorm:
    def __init__(self, parameters, max_norm):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        parameters = list(parameters)
        self.dtype = parameters[0].dtype if parameters else torch.float32
        self.max_norm = float(max_norm)
        self.norm_type = 2.0
        device = parameters[0].device if parameters else torch.device("hpu")
        self.max_norm_t = torch.tensor([self.max_norm], dtype=self.dtype).to(device)

    def clip_norm(self, parameters):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            return torch.tensor(0.0)
        with torch.no_grad():
            max_norm_t = self.max_norm_t
            if max_norm_t.device != grads[0].device:
                max_norm_t = max_norm_t.to(grads[0].device)
            return torch.ops.hpu.fused_clip_norm(grads, max_norm_t, self.norm_type)
