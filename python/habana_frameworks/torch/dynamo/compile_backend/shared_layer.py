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


# Native multi-tensor ops that update their inputs in place and return nothing: recipes
# hold them like the write-backs (`copy_`) they replace (optimizer_pattern.py).
_IN_PLACE_NATIVE = frozenset({"hpu::adam_torch_"})


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
    if not outs and name in _IN_PLACE_NATIVE:
        return None if all(t.device.type == "hpu" or t.dim() == 0 for t in _arg_tensors(node)) else "input not on hpu"
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


def _is_host_scalar(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() == 0


def _host_scalar_math(node: torch.fx.Node) -> bool:
    """A functional native op computing a host 0-dim tensor from host 0-dim tensors and
    numbers: an optimizer's step count and bias corrections (AdamW without `capturable`)."""
    op = node.target
    if node.op != "call_function" or not isinstance(op, OpOverload) or op._schema.is_mutable:
        return False
    if _schema_name(op) in _FORCED_EAGER or is_random(op) or not _is_host_scalar(node.meta.get("val")):
        return False
    return all(_is_host_scalar(t) for t in _arg_tensors(node)) and serves_natively(op)


def _writes_host_input(node: torch.fx.Node) -> bool:
    return (node.target is torch.ops.aten.copy_.default and isinstance(node.args[0], torch.fx.Node)
            and node.args[0].op == "placeholder" and _is_host_scalar(node.args[0].meta.get("val")))


def place_host_scalar_math(gm: torch.fx.GraphModule) -> int:
    """Host scalar math that only feeds recipe clusters (or the write-back of a step count)
    joins the clusters: a cluster runner moves its host 0-dim inputs to the device in one
    packed copy, so the math runs inside the recipe instead of as ~10 host ops per
    parameter per step. Its results then live on hpu; a write-back into a host input
    (`copy_`) copies them back. Nodes whose values leave the graph or reach an eager op
    keep running on the host. Returns how many nodes moved."""
    moved = 0
    for node in reversed(list(gm.graph.nodes)):
        if node.meta.get("placement") != EAGER or not _host_scalar_math(node):
            continue
        if all(u.meta.get("placement") == HPU_CLUSTER or _writes_host_input(u) for u in node.users):
            node.meta["placement"] = HPU_CLUSTER
            node.meta.pop("eager_reason", None)
            node.meta["host_scalar_math"] = True
            moved += 1
            _keep_write_back_on_host(gm, node)
    return moved


def _keep_write_back_on_host(gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    """`step.copy_(step + 1)`: the write-back gets a host twin of `step + 1` (when its
    inputs are graph inputs or numbers), so it stays a host op instead of a device-to-host
    copy of the recipe's result."""
    writes = [u for u in node.users if _writes_host_input(u)]
    if not writes or any(isinstance(a, torch.fx.Node) and a.op != "placeholder" for a in node.all_input_nodes):
        return
    with gm.graph.inserting_after(node):
        twin = gm.graph.call_function(node.target, node.args, node.kwargs)
    twin.meta.update({k: v for k, v in node.meta.items() if k != "host_scalar_math"})
    twin.meta["placement"] = EAGER
    twin.meta["eager_reason"] = "host write-back of host scalar math"
    for w in writes:
        w.replace_input_with(node, twin)
