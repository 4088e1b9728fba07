"""Decompositions AOT autograd applies while tracing for hpu_backend.

`PT_HPU_COMPILE_DECOMPOSITION_MODE` (option `decomposition_mode`):
- `habana` (default): torch's core-aten decompositions, but only for ops hpusim has no
  native kernel for (they would take the CPU fallback; decomposed, they become native ops
  that can join a recipe). Ops with a native kernel stay whole (one kernel beats several),
  and random ops stay whole so they draw from the generator exactly as eager mode does;
  only dropout's backward (one elementwise pass) becomes the pointwise ops the recipe
  fuses with their neighbours.
- `core_aten`: all of torch's core-aten decompositions.
- `none`: no decompositions.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._ops import OpOverload

from . import config
from .shared_layer import is_random, serves_natively

MODES = ("habana", "core_aten", "none")

# Always decomposed: torch >= 2.5 traces softmax through it, and it has no kernel here.
_ALWAYS = (torch.ops.aten._safe_softmax.default,)


def _needs_decomposition(op: OpOverload) -> bool:
    return op in _ALWAYS or not (is_random(op) or _native_without_composite(op))


def _native_without_composite(op: OpOverload) -> bool:
    """Native by its own kernel, not merely by being composite."""
    from ..._ops import registry

    if registry.is_native(op):
        return True
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "HPU") and serves_natively(op)


@functools.lru_cache(maxsize=None)
def _table(mode: str) -> dict[OpOverload, Callable]:
    if mode == "none":
        return {}
    core = core_aten_decompositions()
    if mode == "core_aten":
        return dict(core)
    if mode != "habana":
        raise ValueError(f"Unsupported decomposition mode {mode!r}; expected one of {MODES}")
    table = {op: fn for op, fn in core.items() if isinstance(op, OpOverload) and _needs_decomposition(op)}
    table.update(get_decompositions(list(_ALWAYS)))
    table.update(_FUSABLE)
    return table


def _dropout_backward_as_pointwise(grad: torch.Tensor, mask: torch.Tensor, scale: float):
    """native_dropout_backward as (grad * mask) * scale: two pointwise ops the recipe fuses
    into the elementwise chain around them, instead of a kernel and a pass over memory of
    its own. The kernel computes the same two products in the same order, so the results
    are bitwise the same; other dtypes than float32 keep the kernel."""
    if grad.dtype != torch.float32 or mask.dtype != torch.bool:
        return NotImplemented
    aten = torch.ops.aten
    return aten.mul.Tensor(aten.mul.Tensor(grad, mask), scale)


# Native ops whose kernel is a single elementwise pass: decomposed into ops the recipe's
# elementwise fusion takes (habana mode).
_FUSABLE: dict[OpOverload, Callable] = {
    torch.ops.aten.native_dropout_backward.default: _dropout_backward_as_pointwise,
}


def get_hpu_decompositions() -> dict[OpOverload, Callable]:
    return _table(config.decomposition_mode)
