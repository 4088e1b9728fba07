"""Transformer Engine modules: `Linear`, a drop-in for torch.nn.Linear that runs its GEMMs in
fp8 inside `fp8_autocast(enabled=True)` and as a plain linear layer outside it."""
from __future__ import annotations

import math
from typing import Any, Optional

import torch
import torch.nn.functional as F

from ...kernels import Fp8Ops
from . import fp8 as _fp8
from .recipe import DelayedScaling

# Indices into the forward scaling state: the input and the weight.
_INPUT, _WEIGHT = 0, 1


class _ScalingState:
    """Scales and amax histories of the tensors one module casts (delayed scaling)."""

    def __init__(self, n: int, device: torch.device):
        self.n = n
        self.device = device
        self.scale = torch.ones(n, dtype=torch.float32, device=device)
        self.history: Optional[torch.Tensor] = None
        self.steps = 0

    def _ensure(self, recipe: DelayedScaling) -> None:
        if self.history is None or self.history.shape[0] != recipe.amax_history_len:
            self.history = torch.zeros(recipe.amax_history_len, self.n, dtype=torch.float32, device=self.device)

    def update_scale(self, recipe: DelayedScaling, dtype: torch.dtype) -> None:
        """Derive the scales for this step from the amaxes of the earlier ones."""
        self._ensure(recipe)
        if self.steps == 0 or self.steps % recipe.interval != 0:
            return
        algo = recipe.amax_compute_algo
        if callable(algo):
            amax = algo(self.history)
        elif algo == "most_recent":
            amax = self.history[0]
        else:
            amax = self.history.amax(dim=0)
        if recipe.scaling_factor_compute_algo is not None:
            self.scale = recipe.scaling_factor_compute_algo(amax, self.scale, Fp8Ops.fp8_max(dtype), recipe)
            return
        new = Fp8Ops.fp8_max(dtype) / amax / (2.0 ** recipe.margin)
        self.scale = torch.where((amax > 0) & torch.isfinite(amax), new, self.scale)

    def record(self, recipe: DelayedScaling, amaxes: list[torch.Tensor]) -> None:
        self._ensure(recipe)
        # Newest first; the oldest falls off the end.
        self.history = torch.cat([torch.stack(amaxes)[None], self.history[:-1]])
        self.steps += 1


class _Fp8LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                module: "Linear", recipe: DelayedScaling) -> torch.Tensor:
        fwd_dtype, bwd_dtype = recipe.fp8_format.fwd_dtype, recipe.fp8_format.bwd_dtype
        state = module._fwd_state(x.device)
        state.update_scale(recipe, fwd_dtype)
        scale = state.scale
        x2 = x.reshape(-1, x.shape[-1])
        x8, amax_x = Fp8Ops.cast_to_fp8_v2(x2, scale[_INPUT], False, True, fwd_dtype)
        w8, amax_w = Fp8Ops.cast_to_fp8_v2(weight, scale[_WEIGHT], False, True, fwd_dtype)
        state.record(recipe, [amax_x, amax_w])
        inv_x, inv_w = 1.0 / scale[_INPUT], 1.0 / scale[_WEIGHT]
        out = Fp8Ops.fp8_gemm_v2(x8, False, w8, True, None, x.dtype, inv_x, inv_w,
                                 bias.to(x.dtype) if bias is not None else None, False)
        ctx.save_for_backward(x8, w8, inv_x, inv_w)
        ctx.module, ctx.recipe, ctx.bwd_dtype = module, recipe, bwd_dtype
        ctx.x_shape, ctx.x_dtype, ctx.w_dtype = x.shape, x.dtype, weight.dtype
        ctx.has_bias = bias is not None
        ctx.bias_dtype = bias.dtype if bias is not None else None
        return out.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor):
        x8, w8, inv_x, inv_w = ctx.saved_tensors
        state = ctx.module._bwd_state(grad_out.device)
        state.update_scale(ctx.recipe, ctx.bwd_dtype)
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        g8, amax_g = Fp8Ops.cast_to_fp8_v2(g2, state.scale[0], False, True, ctx.bwd_dtype)
        state.record(ctx.recipe, [amax_g])
        inv_g = 1.0 / state.scale[0]
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = Fp8Ops.fp8_gemm_v2(g8, False, w8, False, None, ctx.x_dtype, inv_g, inv_w).reshape(ctx.x_shape)
        if ctx.needs_input_grad[1]:
            grad_w = Fp8Ops.fp8_gemm_v2(g8, True, x8, False, None, ctx.w_dtype, inv_g, inv_x)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g2.float().sum(0).to(ctx.bias_dtype)
        return grad_x, grad_w, grad_b, None, None


class Linear(torch.nn.Module):
    """y = x W^T + b, with W of shape (out_features, in_features).

    Inside `fp8_autocast(enabled=True)` the input and weight are cast to the recipe's forward
    fp8 format and the output gradient to its backward format, each with its own delayed
    scale, and the three GEMMs take the fp8 operands. Outside, it is torch.nn.Linear.
    Parameters are made on `device` (the HPU by default, as in the Gaudi TE)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 params_dtype: Optional[torch.dtype] = None, device: Any = "hpu",
                 skip_weight_param_allocation: bool = False, **kwargs: Any) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        dtype = params_dtype if params_dtype is not None else torch.get_default_dtype()
        if skip_weight_param_allocation:
            self.register_parameter("weight", None)
        else:
            self.weight = torch.nn.Parameter(torch.empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self._scaling: dict[str, _ScalingState] = {}
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # The initialisation of torch.nn.Linear, so swapping one for the other keeps the scale.
        if self.weight is not None:
            torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def _fwd_state(self, device: torch.device) -> _ScalingState:
        return self._state("fwd", 2, device)

    def _bwd_state(self, device: torch.device) -> _ScalingState:
        return self._state("bwd", 1, device)

    def _state(self, key: str, n: int, device: torch.device) -> _ScalingState:
        s = self._scaling.get(key)
        if s is None or s.device != device:
            s = self._scaling[key] = _ScalingState(n, device)
        return s

    @property
    def fp8_meta(self) -> dict[str, Any]:
        """Current scales and amax histories (for inspection)."""
        return {k: {"scale": s.scale, "amax_history": s.history, "steps": s.steps} for k, s in self._scaling.items()}

    def forward(self, inp: torch.Tensor, weight: Optional[torch.Tensor] = None,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        w = weight if weight is not None else self.weight
        b = bias if bias is not None else self.bias
        if not _fp8.is_fp8_enabled():
            return F.linear(inp, w, b)
        return _Fp8LinearFn.apply(inp, w, b, self, _fp8.get_fp8_recipe())

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
