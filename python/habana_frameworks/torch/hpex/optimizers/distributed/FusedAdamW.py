"""The functional FusedAdamW (torch.distributed.optim's functional-optimizer protocol):
one parameter group of plain tensors, and step(gradients) with the gradients passed in, so
a DDP communication hook can update a bucket's parameters as soon as they are reduced.

Same update as hpex FusedAdamW (eps 1e-6 on the raw sqrt(v), decoupled weight decay,
moments_dtype), with the bridge's differences: the step counter is a float tensor per
parameter (the first parameter's count sets the bias correction, which is always on),
and the validation messages are torch's functional AdamW's."""
from __future__ import annotations

import torch
from torch import Tensor

from .. import _adamw


class FusedAdamW:
    def __init__(
        self,
        params: list[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        _allow_empty_param_list: bool = False,
        moments_dtype: torch.dtype | tuple[torch.dtype, torch.dtype] | None = None,
    ):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        self.defaults = {"lr": lr, "eps": eps, "beta1": betas[0], "beta2": betas[1], "weight_decay": weight_decay}
        self.amsgrad = False  # not supported by the fused kernel
        self.maximize = False
        self.state: dict[Tensor, dict[str, Tensor]] = {}
        if len(params) == 0 and not _allow_empty_param_list:
            raise ValueError("optimizer got an empty parameter list")
        self.param_group = {"params": params}
        self.moments_dtype = moments_dtype
        self.moments_in_fp8 = _adamw.moments_in_fp8(moments_dtype)

    def get_moment_dtypes(self, param_dtype: torch.dtype) -> tuple[torch.dtype, torch.dtype]:
        return _adamw.moment_dtypes(self.moments_dtype, param_dtype)

    def check_moments_in_fp8(self) -> bool:
        return self.moments_in_fp8

    def step_param(self, param: Tensor, grad: Tensor | None):
        raise RuntimeError("This AdamW optimizer does not support step_param() as of now")

    def step(self, gradients: list[Tensor | None]):
        params = self.param_group["params"]
        if len(params) != len(gradients):
            raise ValueError("the gradients passed in does not equal to the size of the parameters!"
                             + f"Params length: {len(params)}. " + f"Gradients length: {len(gradients)}")
        weights, grads, states = [], [], []
        for param, gradient in zip(params, gradients):
            if gradient is None:
                continue
            if param not in self.state:
                self.state[param] = {}
                _adamw.init_state(self.state[param], param, self.moments_dtype, torch.tensor(0.0))
            state = self.state[param]
            state["step"] += 1
            weights.append(param)
            grads.append(gradient)
            states.append(state)
        if not weights:
            return
        d = self.defaults
        with torch.no_grad():
            _adamw.adamw_update(weights, grads, states, lr=d["lr"], beta1=d["beta1"], beta2=d["beta2"],
                                eps=d["eps"], weight_decay=d["weight_decay"], step=int(states[0]["step"].item()),
                                bias_correction=True, scalar_dtype=torch.float32)
