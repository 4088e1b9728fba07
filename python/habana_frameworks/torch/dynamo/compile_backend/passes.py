"""hpu_backend's FX pass pipeline, in the bridge's four stages:

PRE_PLACEMENT     fake propagation (output metadata), placement of every node
PRE_PARTITIONER   views feeding only eager nodes become eager (`eagerize_leaf_views`)
PARTITIONER       CapabilityBasedPartitioner over `hpu_cluster` nodes, fused into submodules
POST_PARTITIONER  summary, the eager-fallback check, each cluster turned into a recipe runner

Any pass can be skipped with PT_HPU_DISABLE_<pass function name>=1 (e.g.
PT_HPU_DISABLE_pass_eagerize_leaf_views=1), as on Gaudi."""
from __future__ import annotations

import enum
import operator
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .._env_flags import truthy
from . import config
from .logger import fx_graph_logger, logger
from .recipe_compiler import ClusterRunner
from .shared_layer import EAGER, HPU_CLUSTER, mark_placement


class OptimizationPassPlacement(enum.Enum):
    PRE_PLACEMENT = 1
    PRE_PARTITIONER = 2
    PARTITIONER = 3
    POST_PARTITIONER = 4


@dataclass
class PassContext:
    graph_module: torch.fx.GraphModule
    example_inputs: list[Any]
    graph_name: str
    is_training: bool
    is_backward: bool
    is_dynamic: bool
    stage: OptimizationPassPlacement | None = None
    partitions: list[Any] = field(default_factory=list)
    clusters: list[ClusterRunner] = field(default_factory=list)
    placement_counts: dict[str, int] = field(default_factory=dict)


Pass = Callable[[PassContext], bool]


def pass_graph_print(ctx: PassContext) -> bool:
    if fx_graph_logger.enabled(1):
        fx_graph_logger.debug("%s at stage %s:\n%s", ctx.graph_name, ctx.stage.name if ctx.stage else "",
                              ctx.graph_module.print_readable(print_output=False))
    return False


def pass_fake_propagation(ctx: PassContext) -> bool:
    """Output device/shape/dtype/stride of every node, from the fake values AOT traced."""
    for node in ctx.graph_module.graph.nodes:
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else [val]
        tensors = [v for v in vals if isinstance(v, torch.Tensor)]
        if tensors:
            node.meta["output_device"] = [t.device for t in tensors]
            node.meta["output_shapes"] = [tuple(t.shape) for t in tensors]
            node.meta["output_dtypes"] = [t.dtype for t in tensors]
            node.meta["output_strides"] = [t.stride() for t in tensors]
    return False


def pass_mark_placement(ctx: PassContext) -> bool:
    ctx.placement_counts = mark_placement(ctx.graph_module, ctx.is_dynamic)
    return True


def _is_view(node: torch.fx.Node) -> bool:
    return isinstance(node.target, torch._ops.OpOverload) and node.target.is_view


def pass_eagerize_leaf_views(ctx: PassContext) -> bool:
    """A view whose users all run eagerly (or are graph outputs) is taken out of the
    cluster: it costs nothing eagerly and would only make the recipe return an alias."""
    changed = False
    for node in reversed(list(ctx.graph_module.graph.nodes)):
        if node.meta.get("placement") != HPU_CLUSTER or not _is_view(node):
            continue
        if all(u.op == "output" or u.meta.get("placement") == EAGER for u in node.users):
            node.meta["placement"] = EAGER
            node.meta["eager_reason"] = "view feeding only eager nodes"
            changed = True
    return changed


class _ClusterSupport(OperatorSupportBase):
    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and node.meta.get("placement") == HPU_CLUSTER


def _partitioner(gm: torch.fx.GraphModule) -> CapabilityBasedPartitioner:
    return CapabilityBasedPartitioner(gm, _ClusterSupport(), allows_single_node_partition=True)


def pass_propose_partitions(ctx: PassContext) -> bool:
    ctx.partitions = _partitioner(ctx.graph_module).propose_partitions()
    return bool(ctx.partitions)


def pass_fuse_partitions(ctx: PassContext) -> bool:
    if not ctx.partitions:
        return False
    ctx.graph_module = _partitioner(ctx.graph_module).fuse_partitions(ctx.partitions, prefix="fused_")
    return True


def pass_summarize_graph(ctx: PassContext) -> bool:
    gm = ctx.graph_module
    lines = []
    for node in gm.graph.nodes:
        if node.op == "call_module" and str(node.target).startswith("fused_"):
            sub = gm.get_submodule(node.target)
            ops = [str(n.target) for n in sub.graph.nodes if n.op == "call_function"]
            lines.append(f"{node.target}: {len(ops)} ops: {', '.join(ops)}")
    eager = [f"{n.name} ({n.target}: {n.meta.get('eager_reason', '')})" for n in gm.graph.nodes
             if n.op == "call_function" and n.meta.get("placement") == EAGER
             and n.target is not operator.getitem]
    if eager:
        lines.append(f"eager: {len(eager)} ops: {', '.join(eager)}")
    logger.info("INFO: Number of subgraphs created:\n%s", "\n".join(lines) or "none")
    return False


def eager_compute_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """Nodes that run eagerly and compute something (not views, tuple reads or copies)."""
    return [n for n in gm.graph.nodes
            if n.op == "call_function" and n.meta.get("placement") == EAGER
            and n.target is not operator.getitem and not _is_view(n)]


def pass_check_eager_fallbacks(ctx: PassContext) -> bool:
    if config.use_eager_fallback:
        return False
    nodes = eager_compute_nodes(ctx.graph_module)
    assert not nodes, f"Eager fallback in nodes: {[f'{n.name}: {n.target}' for n in nodes]}"
    return False


def pass_compile_clusters(ctx: PassContext) -> bool:
    """Each fused submodule becomes a ClusterRunner called directly from the graph (a plain
    function call: no nn.Module call overhead per launch)."""
    gm = ctx.graph_module
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith("fused_"):
            continue
        sub = gm.get_submodule(node.target)
        runner = ClusterRunner(str(node.target), ctx.graph_name, sub, config.use_compiled_recipes)
        with gm.graph.inserting_before(node):
            call = gm.graph.call_function(runner, node.args, node.kwargs)
        call.meta.update(node.meta)
        call.meta["placement"] = HPU_CLUSTER
        node.replace_all_uses_with(call)
        gm.graph.erase_node(node)
        delattr(gm, node.target)
        ctx.clusters.append(runner)
        changed = True
    if changed:
        gm.recompile()
    return changed


_PASSES: dict[OptimizationPassPlacement, list[Pass]] = {
    OptimizationPassPlacement.PRE_PLACEMENT: [pass_graph_print, pass_fake_propagation, pass_mark_placement,
                                              pass_graph_print],
    OptimizationPassPlacement.PRE_PARTITIONER: [pass_graph_print, pass_eagerize_leaf_views],
    OptimizationPassPlacement.PARTITIONER: [pass_graph_print, pass_propose_partitions, pass_fuse_partitions,
                                            pass_graph_print],
    OptimizationPassPlacement.POST_PARTITIONER: [pass_graph_print, pass_summarize_graph,
                                                 pass_check_eager_fallbacks, pass_compile_clusters],
}


def get_passes(stage: OptimizationPassPlacement) -> list[Pass]:
    return list(_PASSES[stage])


def register_pass_at_optimization_pass(fn: Pass, stage: OptimizationPassPlacement) -> None:
    """Add a user pass at the end of a stage (it gets the PassContext, returns whether it
    changed the graph)."""
    logger.info("adding %s pass at stage %s", fn.__name__, stage.name)
    _PASSES[stage].append(fn)


def disabled_by_env(fn: Pass) -> bool:
    return truthy(os.getenv(f"PT_HPU_DISABLE_{fn.__name__}"))


def run_passes(ctx: PassContext) -> None:
    for stage in OptimizationPassPlacement:
        ctx.stage = stage
        for fn in get_passes(stage):
            if disabled_by_env(fn):
                logger.debug("pass %s was disabled by env at stage %s", fn.__name__, stage.name)
                continue
            logger.debug("running %s pass at stage %s", fn.__name__, stage.name)
            t0 = time.perf_counter()
            fn(ctx)
            logger.debug("pass %s at stage %s took: %.3f [s]", fn.__name__, stage.name, time.perf_counter() - t0)
