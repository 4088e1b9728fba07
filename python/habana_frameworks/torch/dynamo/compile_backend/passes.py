"""hpu_backend's FX pass pipeline, in the bridge's four stages:

PRE_PLACEMENT     fake propagation (output metadata), placement of every node, host scalar
                  math (optimizer step counts) moved into the clusters
PRE_PARTITIONER   views feeding only eager nodes become eager (`eagerize_leaf_views`)
PARTITIONER       CapabilityBasedPartitioner over `hpu_cluster` nodes, fused into submodules
POST_PARTITIONER  summary, the eager-fallback check, each cluster's order made fusion-friendly
                  and the cluster turned into a recipe runner

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
from .fusion_order import order_for_fusion, reinplace_input_writes
from .host_scalars import fold_host_scalar_math
from .recipe_compiler import ClusterRunner, async_launchable
from .shared_layer import EAGER, HPU_CLUSTER, mark_placement, place_host_scalar_math


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


def pass_fuse_optimizer_steps(ctx: PassContext) -> bool:
    """A traced Adam/AdamW step becomes one hpu::adam_torch call per group of parameters
    with equal hyper-parameters (optimizer_pattern.py); unmatched ops stay as they are."""
    if ctx.is_backward or not config.fuse_optimizer:
        return False
    from .optimizer_pattern import fuse_adam_steps

    fused = fuse_adam_steps(ctx.graph_module)
    if fused:
        pass_fake_propagation(ctx)
        logger.debug("%s: Adam steps of %d parameters fused", ctx.graph_name, fused)
    return bool(fused)


_STRIDE_SENSITIVE = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default,
                     torch.ops.aten.as_strided.default)


def _fake_contiguous(value: Any) -> bool:
    return not isinstance(value, torch.Tensor) or value.is_contiguous()


def _layout_follows_inputs(node: torch.fx.Node) -> bool:
    """Pointwise ops: hpusim's kernels give their result the inputs' layout (as CPU's
    TensorIterator does) where hpu fake tensors say contiguous. GEMMs, reductions and the
    like write contiguous results on both sides."""
    op = node.target
    if not isinstance(op, torch._ops.OpOverload) or torch.Tag.pointwise not in op.tags:
        return False
    return node.kwargs.get("memory_format") is not torch.contiguous_format


def _first_unsafe_view(graph: torch.fx.Graph, dense: set[torch.fx.Node]) -> torch.fx.Node | None:
    """The first value a stride-sensitive op would read with run-time strides that may differ
    from the traced ones; returns the compute node those strides come from."""
    origin: dict[torch.fx.Node, torch.fx.Node] = {}  # value -> compute node its layout comes from
    multi: set[torch.fx.Node] = set()  # multi-output ops whose results would be origins
    for node in graph.nodes:
        if node.op != "call_function" or node in dense:
            continue
        if node.target in _STRIDE_SENSITIVE and node.args and node.args[0] in origin:
            return origin[node.args[0]]
        tensor_args = [a for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        if not tensor_args:
            continue
        inherited = next((origin[a] for a in tensor_args if a in origin), None)
        val = node.meta.get("val")
        if node.target is operator.getitem and node.args[0] in multi:
            if isinstance(val, torch.Tensor) and val.is_contiguous():
                origin[node] = node
        elif _is_view(node) or node.target is operator.getitem:
            if inherited is not None:
                origin[node] = inherited
        elif not _layout_follows_inputs(node):
            continue
        elif inherited is not None or not all(_fake_contiguous(a.meta.get("val")) for a in tensor_args):
            if isinstance(val, torch.Tensor) and val.is_contiguous():
                origin[node] = node
            elif isinstance(val, (list, tuple)):
                multi.add(node)
    return None


def pass_restride_view_inputs(ctx: PassContext) -> bool:
    """Fake tensors of device type hpu give elementwise results contiguous strides (torch's
    `_refs.handle_noncontiguous_outputs` / fake_impls' `is_noncontiguous_supported`: Gaudi's
    kernels write dense outputs), while hpusim's kernels keep their inputs' layout as CPU
    does. A `view` traced on such a result (`x.permute(...) * 2` then `reshape`: every
    attention block) would then meet strides it cannot view at run time. So a result whose
    run-time layout may differ from the traced one (a pointwise op computing a traced-contiguous
    result from a non-contiguous input, or from such a value) is made contiguous, as traced, when a
    stride-sensitive op reads it or a view of it. Graph inputs keep their real strides, which
    fake tensors copy, so they are left alone."""
    graph = ctx.graph_module.graph
    dense: set[torch.fx.Node] = set()
    while (src := _first_unsafe_view(graph, dense)) is not None:
        with graph.inserting_after(src):
            copy = graph.call_function(torch.ops.aten.clone.default, (src,),
                                       {"memory_format": torch.contiguous_format})
        copy.meta.update({k: v for k, v in src.meta.items()
                          if k in ("val", "tensor_meta", "output_device", "output_shapes", "output_dtypes",
                                   "output_strides", "stack_trace")})
        src.replace_all_uses_with(copy, delete_user_cb=lambda user: user is not copy)
        dense.add(copy)
    if dense:
        graph.lint()
        ctx.graph_module.recompile()
        logger.debug("%s: %d results made contiguous as traced before stride-sensitive views",
                     ctx.graph_name, len(dense))
    return bool(dense)


_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)


def _traced_layout_trusted(node: torch.fx.Node, is_backward: bool) -> bool:
    """Whether node's run-time strides are the traced ones: an input of a forward or
    inference graph (dynamo guards its strides). Computed values are not: torch's meta
    functions do not always give the strides its CPU kernels (and hpusim's) give
    (softplus_backward with a transposed grad: the meta follows self's layout, the kernel
    the grad's), and a backward graph's saved activations carry the forward's run-time
    strides."""
    return node.op == "placeholder" and not is_backward


def pass_views_follow_runtime_layout(ctx: PassContext) -> bool:
    """`view` / `_unsafe_view` of a value whose run-time layout may differ from the traced
    one become `reshape`: the same view where the run-time strides allow it, a dense copy
    where they do not (Mamba's backward: a view of softplus_backward's result, which the
    meta traced contiguous and the kernel makes transposed, "view size is not compatible
    with input tensor's size and stride"; it fails so under aot_eager on CPU too). AOT's
    graphs are functional, so a copy in place of a view of an intermediate changes no
    value; within one input signature a recipe records the one that ran."""
    changed = 0
    for node in ctx.graph_module.graph.nodes:
        if node.op != "call_function" or node.target not in _VIEWS:
            continue
        src = node.args[0]
        if not isinstance(src, torch.fx.Node) or _traced_layout_trusted(src, ctx.is_backward):
            continue
        node.target = torch.ops.aten.reshape.default
        changed += 1
    if changed:
        ctx.graph_module.graph.lint()
        ctx.graph_module.recompile()
        logger.debug("%s: %d views of computed values take their run-time layout (reshape)", ctx.graph_name, changed)
    return bool(changed)


def pass_mark_placement(ctx: PassContext) -> bool:
    ctx.placement_counts = mark_placement(ctx.graph_module, ctx.is_dynamic)
    return True


def pass_wa_mixed_devices(ctx: PassContext) -> bool:
    """The bridge's workaround for Adam's host scalar tensors: host 0-dim math (step counts,
    bias corrections) that feeds only clusters runs inside them (see
    shared_layer.place_host_scalar_math)."""
    moved = place_host_scalar_math(ctx.graph_module)
    if moved:
        ctx.placement_counts[HPU_CLUSTER] += moved
        ctx.placement_counts[EAGER] -= moved
        logger.debug("%s: %d host scalar ops run in clusters", ctx.graph_name, moved)
    return bool(moved)


def pass_fold_host_scalar_math(ctx: PassContext) -> bool:
    """The host scalar math pass_wa_mixed_devices put in clusters is evaluated on the host
    instead, in one step per call, and only its results go to the device (host_scalars.py):
    ~12 one-element Go steps per parameter fewer in an optimizer's recipe."""
    folded = fold_host_scalar_math(ctx.graph_module)
    if folded:
        ctx.placement_counts[HPU_CLUSTER] -= folded
        logger.debug("%s: %d host scalar ops folded on the host", ctx.graph_name, folded)
    return bool(folded)


def _is_view(node: torch.fx.Node) -> bool:
    return isinstance(node.target, torch._ops.OpOverload) and node.target.is_view


def _computed_in_cluster(node: torch.fx.Node) -> bool:
    """Whether node's storage is made by a cluster op (not a graph input), seen through
    views and tuple reads."""
    while _is_view(node) or node.target is operator.getitem:
        src = node.args[0]
        if not isinstance(src, torch.fx.Node):
            return False
        node = src
    return node.op == "call_function" and node.meta.get("placement") == HPU_CLUSTER


def pass_eagerize_leaf_views(ctx: PassContext) -> bool:
    """A view whose users all run eagerly is taken out of the cluster, so the eager
    nodes take the view and the recipe need not return it. A view of a cluster's result
    that is a graph output stays in the cluster: the recipe returns it as a view of its
    fresh output storage (built in C++ at no cost), where an eager view would be one
    dispatcher call per output per step (the transposed weight gradients of a backward)."""
    changed = False
    for node in reversed(list(ctx.graph_module.graph.nodes)):
        if node.meta.get("placement") != HPU_CLUSTER or not _is_view(node):
            continue
        if all(u.op == "output" for u in node.users) and _computed_in_cluster(node):
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


def _writes_input(node: torch.fx.Node) -> bool:
    """An epilogue copy_ of AOT's functionalised graph: writes a graph input in place."""
    return (node.op == "call_function" and node.target is torch.ops.aten.copy_.default
            and isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "placeholder")


def _writes_placeholder(node: torch.fx.Node) -> bool:
    return (node.op == "call_function" and node.target is torch.ops.aten.copy_.default
            and isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "placeholder")


def _unit_order(nodes: list[torch.fx.Node], unit_of: dict[torch.fx.Node, Any], key: dict[Any, int]) -> list[Any]:
    """Units (a partition or a single node) in dependency order, ties broken by `key`
    (the original position; a partition's last member): the order the graph runs them."""
    import heapq

    deps: dict[Any, set] = {u: set() for u in key}
    users: dict[Any, set] = {u: set() for u in key}
    for n in nodes:
        u = unit_of[n]
        before = list(n.all_input_nodes)
        if _writes_placeholder(n):
            # A write into a graph input runs after every read of the old value.
            before += [r for r in _readers(n.args[0]) if r is not n]
        for a in before:
            ua = unit_of[a]
            if ua != u and ua not in deps[u]:
                deps[u].add(ua)
                users[ua].add(u)
    ready = [(key[u], i, u) for i, u in enumerate(key) if not deps[u]]
    heapq.heapify(ready)
    ids = {u: i for i, u in enumerate(key)}
    order = []
    while ready:
        _, _, u = heapq.heappop(ready)
        order.append(u)
        for v in users[u]:
            deps[v].discard(u)
            if not deps[v]:
                heapq.heappush(ready, (key[v], ids[v], v))
    return order


def _units(gm: torch.fx.GraphModule, partitions: list[Any]):
    nodes = list(gm.graph.nodes)
    idx = {n: i for i, n in enumerate(nodes)}
    unit_of: dict[torch.fx.Node, Any] = {n: n for n in nodes}
    key: dict[Any, int] = {n: (len(nodes) if n.op == "output" else idx[n]) for n in nodes}
    for i, p in enumerate(partitions):
        for n in p.nodes:
            unit_of[n] = ("partition", i)
            key.pop(n, None)
        key[("partition", i)] = max(idx[n] for n in p.nodes)
    return nodes, unit_of, key


def _readers(node: torch.fx.Node) -> set[torch.fx.Node]:
    """Nodes reading `node`'s storage: its users, and the users of views of it."""
    seen: set[torch.fx.Node] = set()
    todo = list(node.users)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if _is_view(n) or n.target is operator.getitem:
            todo.extend(n.users)
    return seen


def _input_write_hazards(gm: torch.fx.GraphModule, partitions: list[Any]) -> list[torch.fx.Node]:
    """Input writes (copy_ into a graph input) that a cluster would run before another
    unit still reading that input's old value; such a copy_ must run eagerly."""
    nodes, unit_of, key = _units(gm, partitions)
    pos = {u: i for i, u in enumerate(_unit_order(nodes, unit_of, key))}
    bad = []
    for w in nodes:
        if not _writes_input(w) or not isinstance(unit_of[w], tuple):
            continue
        if any(unit_of[r] != unit_of[w] and pos[unit_of[r]] > pos[unit_of[w]] for r in _readers(w.args[0])):
            bad.append(w)
    return bad


def pass_propose_partitions(ctx: PassContext) -> bool:
    for _ in range(8):
        ctx.partitions = _partitioner(ctx.graph_module).propose_partitions()
        bad = _input_write_hazards(ctx.graph_module, ctx.partitions)
        if not bad:
            break
        for w in bad:
            w.meta["placement"] = EAGER
            w.meta["eager_reason"] = "input write ordered after a reader outside its cluster"
    return bool(ctx.partitions)


def pass_fuse_partitions(ctx: PassContext) -> bool:
    """Fuse each partition into a `fused_N` submodule, then put the graph back in program
    order: torch's fuser only keeps data dependencies, but input writes (copy_ into
    inputs) must stay after every read of the old value, and a cluster with no outputs
    must still run before the graph returns."""
    if not ctx.partitions:
        return False
    gm = ctx.graph_module
    nodes, unit_of, key = _units(gm, ctx.partitions)
    fused_key = {f"fused_{i}": key[("partition", i)] for i in range(len(ctx.partitions))}
    gm = _partitioner(gm).fuse_partitions(ctx.partitions, prefix="fused_")
    new_nodes = list(gm.graph.nodes)
    new_key: dict[Any, int] = {}
    for n in new_nodes:
        if n.op == "call_module" and n.target in fused_key:
            new_key[n] = fused_key[n.target]
        elif n.op == "output":
            new_key[n] = len(nodes)
        else:
            new_key[n] = key.get(n, -1)  # nodes outside partitions are the original Node objects
    order = _unit_order(new_nodes, {n: n for n in new_nodes}, new_key)
    out = next(n for n in new_nodes if n.op == "output")
    for n in order:
        if n is not out:
            out.prepend(n)
    for n in new_nodes:
        if n.op == "call_module" and n.target in fused_key:
            sub = gm.get_submodule(n.target)
            sub_out = next(m for m in sub.graph.nodes if m.op == "output")
            for m in [m for m in sub.graph.nodes if _writes_input(m) and not m.users]:
                sub_out.prepend(m)
            sub.recompile()
    gm.graph.lint()
    gm.recompile()
    ctx.graph_module = gm
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


def _host_increment(node: torch.fx.Node) -> tuple[torch.fx.Node, Any] | None:
    """(x, c) when node is the eager `x.copy_(x + c)` of a host 0-dim input x and a number c
    whose sum keeps x's dtype (an optimizer's step count), else None."""
    if not (_writes_input(node) and node.meta.get("placement") == EAGER):
        return None
    dst, src = node.args[0], node.args[1]
    if not (isinstance(src, torch.fx.Node) and src.target is torch.ops.aten.add.Tensor
            and src.meta.get("placement") == EAGER and list(src.users) == [node]
            and src.args[0] is dst and len(src.args) == 2 and not src.kwargs
            and isinstance(src.args[1], (int, float)) and not isinstance(src.args[1], bool)):
        return None
    x, out = dst.meta.get("val"), src.meta.get("val")
    if not (isinstance(x, torch.Tensor) and isinstance(out, torch.Tensor) and x.device.type == "cpu"
            and x.dim() == 0 and out.dtype == x.dtype):
        return None
    return dst, src.args[1]


def pass_batch_host_increments(ctx: PassContext) -> bool:
    """The per-parameter step-count write-backs of an optimizer (`step.copy_(step + 1)`,
    two host ops each) become one `_foreach_add_` per increment, where the last of them
    ran: the graph's order is final here and every reader of the old counts (the
    clusters) runs before. Skipped for a group if any other node between its first and
    last write touches one of its counts."""
    gm = ctx.graph_module
    nodes = list(gm.graph.nodes)
    groups: dict[Any, list[tuple[int, torch.fx.Node, torch.fx.Node]]] = {}
    for i, node in enumerate(nodes):
        inc = _host_increment(node)
        if inc is not None:
            groups.setdefault((type(inc[1]), inc[1]), []).append((i, node, inc[0]))
    changed = False
    for (_, c), members in groups.items():
        if len(members) < 2:
            continue
        writes = {w for _, w, _ in members}
        dsts = {d for _, _, d in members}
        first, last = members[0][0], members[-1][0]
        if any(n not in writes and any(a in dsts for a in n.all_input_nodes) for n in nodes[first:last + 1]):
            continue
        last_write = members[-1][1]
        with gm.graph.inserting_after(last_write):
            batched = gm.graph.call_function(torch.ops.aten._foreach_add_.Scalar, ([d for _, _, d in members], c))
        batched.meta.update(placement=EAGER, eager_reason="batched host write-back of step counts")
        for _, w, _ in members:
            add = w.args[1]
            gm.graph.erase_node(w)
            gm.graph.erase_node(add)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
    return changed


def pass_order_clusters_for_fusion(ctx: PassContext) -> bool:
    """Same-shape elementwise chains of each cluster made consecutive, so the recipe
    fuses them into single loops, and input writes folded into the chains computing them
    (see fusion_order)."""
    gm = ctx.graph_module
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_module" and str(node.target).startswith("fused_"):
            sub = gm.get_submodule(node.target)
            changed |= order_for_fusion(sub)
            changed |= reinplace_input_writes(sub) > 0
    return changed


def pass_compile_clusters(ctx: PassContext) -> bool:
    """Each fused submodule becomes a ClusterRunner called directly from the graph (a plain
    function call: no nn.Module call overhead per launch)."""
    gm = ctx.graph_module
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith("fused_"):
            continue
        sub = gm.get_submodule(node.target)
        runner = ClusterRunner(str(node.target), ctx.graph_name, sub, config.use_compiled_recipes,
                               config.tune_recipe_threads, launch_checks=async_launchable(sub, ctx.is_backward))
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
    OptimizationPassPlacement.PRE_PLACEMENT: [pass_graph_print, pass_fake_propagation, pass_fuse_optimizer_steps,
                                              pass_restride_view_inputs, pass_views_follow_runtime_layout,
                                              pass_mark_placement,
                                              pass_wa_mixed_devices, pass_fold_host_scalar_math, pass_graph_print],
    OptimizationPassPlacement.PRE_PARTITIONER: [pass_graph_print, pass_eagerize_leaf_views],
    OptimizationPassPlacement.PARTITIONER: [pass_graph_print, pass_propose_partitions, pass_fuse_partitions,
                                            pass_graph_print],
    OptimizationPassPlacement.POST_PARTITIONER: [pass_graph_print, pass_summarize_graph,
                                                 pass_check_eager_fallbacks, pass_batch_host_increments,
                                                 pass_order_clusters_for_fusion, pass_compile_clusters],
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
