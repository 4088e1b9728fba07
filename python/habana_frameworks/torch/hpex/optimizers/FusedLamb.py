"""FusedLamb: apex-style LAMB (global gradient-norm clipping, decoupled weight decay, the
per-tensor trust ratio), one Go call per parameter group for both phases."""
from __future__ import annotations

import torch

from habana_frameworks.torch._ops import hpex_ops

from ._fused import FusedGroupOptimizer, run_closure


class FusedLamb(FusedGroupOptimizer):
    sparse_message = "FusedLamb does not support sparse gradients, please consider SparseAdam instead"

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                 amsgrad=False, adam_w_mode=True, grad_averaging=True, set_grad_none=True, max_grad_norm=1.0,
                 use_lamb=False, fused=False, dtype=None):
        if amsgrad:
            raise RuntimeError("FusedLamb does not support the AMSGrad variant.")
        defaults = {"lr": lr, "bias_correction": bias_correction, "betas": betas, "eps": eps,
                    "weight_decay": weight_decay, "grad_averaging": grad_averaging,
                    "max_grad_norm": max_grad_norm}
        super().__init__(params, defaults)
        self.adam_w_mode = 1 if adam_w_mode else 0
        self.set_grad_none = set_grad_none
        self.use_lamb = use_lamb
        self.fused = fused
        self.dtype = dtype
        self._clip: torch.Tensor | None = None

    def zero_grad(self, set_to_none: bool = True):
        if self.set_grad_none:
            for group in self.param_groups:
                for p in group["params"]:
                    p.grad = None
        else:
            super().zero_grad(set_to_none=False)

    @torch.compiler.disable()
    @torch.no_grad()
    def step(self, closure=None):
        loss = run_closure(closure)
        # The clip divisor comes from the gradients of all groups together.
        grads = [p.grad if self.dtype is None else p.grad.to(self.dtype)
                 for group in self.param_groups for p in self.params_with_grads(group)]
        if not grads:
            return loss
        max_norm = self.defaults["max_grad_norm"]
        if max_norm is None:
            self._clip = torch.ones(1, dtype=torch.float32).to(grads[0].device)
        else:
            self._clip = torch.ops.hpu.optimizer_lamb_fused_norm(grads, max_norm)
        super().step()
        return loss

    def update_group(self, group: dict, params: list[torch.Tensor]) -> None:
        beta1, beta2 = group["betas"]
        beta3 = 1 - beta1 if group["grad_averaging"] else 1.0
        group["step"] = group.get("step", 0) + 1
        bc1, bc2 = 1.0, 1.0
        if group["bias_correction"]:
            bc1 = 1 - beta1 ** group["step"]
            bc2 = 1 - beta2 ** group["step"]
        ms, vs = [], []
        for p in params:
            st = self.state[p]
            if len(st) == 0:
                st["exp_avg"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
                st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
            ms.append(st["exp_avg"])
            vs.append(st["exp_avg_sq"])
        hpex_ops.lamb_step(self._clip, [p.data for p in params], [p.grad for p in params], ms, vs, lr=group["lr"],
                           beta1=beta1, beta2=beta2, beta3=beta3, eps=group["eps"],
                           weight_decay=group["weight_decay"], bias_correction1=bc1, bias_correction2=bc2,
                           use_lamb=self.use_lamb)
