"""Placement of FX nodes: `hpu_cluster` when hpusim's native kernels serve the op (it can go
into a recipe), `eager` otherwise (it runs through ordinary dispatch at run time, where an
op without a kernel takes the counted CPU fallback).

An op is native exactly when eager mode would run it without the CPU fallback: it has a
lowering in the op registry (`_ops.registry`), or a C++ kernel of the glue at the HPU key
(views, empty, the fast out= kernels), or a composite kernel (it then reaches the HPU key
as ops of its decomposition, which are placed by the same rule when AOT traces them)."""
from __future__ import annotations

import functools
import operator
from typing import Any

import torch
from torch._ops import OpOverload

from ..._ops import registry
from .logger import logger

HPU_CLUSTER = "hpu_cluster"
EAGER = "eager"

# Explicit HPU kernels that route to the Python fallback (and so are native only when the
# registry lowers them), unlike the glue's own C++ kernels.
_ROUTED_TO_FALLBACK = frozenset(f"aten::{n}" for n in registry.EXPLICIT_HPU_OPS)

# Host-side or data-dependent ops the bridge also keeps out of its recipes.
_FORCED_EAGER = frozenset({
    "aten::nonzero", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive",
    "aten::bincount", "aten::masked_select", "aten::_local_scalar_dense", "aten::item",
    "aten::seed", "aten::manual_seed", "aten::initial_seed", "aten::get_rng_state",
    "aten::set_rng_state", "aten::slice_backward",
})


def _schema_name(op: OpOverload) -> str:
    return op._schema.name


@functools.lru_cache(maxsize=None)
def serves_natively(op: OpOverload) -> bool:
    """Whether eager mode runs `op` on hpu without the CPU fallback (see the module doc)."""
    if registry.is_native(op):
        return True
    name = op.name()
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if has(name, "HPU"):
        return name not in _ROUTED_TO_FALLBACK
    if has(name, "CompositeExplicitAutogradNonFunctional"):
        # A structured op's functional/in-place form, which calls its out= form.
        out = getattr(op._overloadpacket, "out", None)
        return out is not None and registry.is_native(out)
    return has(name, "CompositeExplicitAutograd") or has(name, "CompositeImplicitAutograd")


def is_random(op: OpOverload) -> bool:
    return torch.Tag.nondeterministic_seeded in op.tags


def _tensors(value: Any):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def _arg_tensors(node: torch.fx.Node):
    for a in node.all_input_nodes:
        yield from _tensors(a.meta.get("val"))


def eager_fallback_reason(node: torch.fx.Node) -> str | None:
    """Why `node` must run eagerly, or None when it can go into a recipe."""
    op = node.target
    if not isinstance(op, OpOverload):
        return f"not an aten op ({op})"
    name = _schema_name(op)
    if name in _FORCED_EAGER:
        return "forced eager (host-side or data-dependent op)"
    tags = op.tags
    if torch.Tag.dynamic_output_shape in tags or torch.Tag.data_dependent_output in tags:
        return "data-dependent output"
    # Random ops go into recipes: a recipe run draws each op's seed from the hpu generator
    # in program order, as eager mode does, so torch.hpu.manual_seed gives the same masks.
    outs = list(_tensors(node.meta.get("val")))
    if not outs:
        return "no tensor output"
    if any(t.device.type != "hpu" for t in outs):
        return "output not on hpu"
    if any(t.device.type != "hpu" and t.dim() != 0 for t in _arg_tensors(node)):
        return "input not on hpu"
    if not serves_natively(op):
        logger.debug("Fallback required - check_cpu_fallback_op. Target: %s", op)
        return "no native kernel (CPU fallback)"
    return None


def mark_placement(gm: torch.fx.GraphModule, is_dynamic: bool = False) -> dict[str, int]:
    """Set node.meta["placement"] on every node; returns the count per placement."""
    counts = {HPU_CLUSTER: 0, EAGER: 0}
    for node in gm.graph.nodes:
        reason = None
        if node.op != "call_function":
            placement = EAGER
        elif node.target is operator.getitem:
            # A multi-output op's results stay with it.
            src = node.args[0]
            placement = src.meta.get("placement", EAGER) if isinstance(src, torch.fx.Node) else EAGER
        else:
            reason = eager_fallback_reason(node)
            placement = EAGER if reason else HPU_CLUSTER
        node.meta["placement"] = placement
        if reason:
            node.meta["eager_reason"] = reason
        if node.op == "call_function":
            counts[placement] += 1
            logger.info("Node placement. Node: %s op: %s placement: %s target: %s dynamic: %s",
                        node.name, node.op, placement, node.target, is_dynamic)
    return counts
