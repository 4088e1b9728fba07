"""The run time of a compiled region without AOT autograd's generic runtime wrappers.

AOT autograd wraps every compiled forward in layers that handle, at each call, what a
region might need (duplicate or aliased inputs, input mutations applied after the graph,
outputs that alias inputs, effect tokens, RNG functionalization, tensor subclasses, lazy
backward compilation). Each layer is a Python call or more per step, and small models are
host-bound. Here those decisions are taken once, when the region compiles: a region that
needs none of them runs as ONE torch.autograd.Function (training: its forward launches the
forward graph, its backward the backward graph) or as one call of the inference graph.
Any region that needs one of AOT's wrappers keeps AOT's runtime unchanged, and so does a
call made with autograd off when the region was compiled for training.

The handled cases do exactly what AOT's wrappers do for them: inputs that never get a
gradient but require one are detached, inputs the graph mutates get their version
counters bumped before the call (autograd then sees the in-place write), outputs that
need no gradient are marked non-differentiable, saved views are saved detached, and the
region runs with autocast off when autocast was traced into it.

`use_fast_runtime` (PT_HPU_COMPILE_FAST_RUNTIME=0 turns it off: AOT's runtime everywhere).
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch._dynamo import disable as _dynamo_disable

from .logger import logger

_state = threading.local()
_counts = {"fast_regions": 0, "aot_regions": 0}


def counts() -> dict[str, int]:
    """fast_regions: regions running without AOT's wrappers; aot_regions: regions that
    kept them (see the PT_COMPILE log for why)."""
    return dict(_counts)


@dataclass
class _Record:
    """What one hpu_backend compilation produced, noted by the compilers AOT calls."""
    example_inputs: list[Any]
    # The graph module's parameters and buffers, which AOT passes before the inputs
    # (tensors dynamo installed as attributes: an optimizer's state, for one).
    params_flat: list[torch.Tensor]
    bw_compiler: Callable[..., Any]
    disable_amp: bool
    fw_module: torch.fx.GraphModule | None = None
    bw_module: torch.fx.GraphModule | None = None
    compiled: list[tuple[str, Any, Any]] = field(default_factory=list)  # (kind, boxed fn, metadata)


class recording:
    """Context of one hpu_backend call: the compilers and partitioner note into it."""

    def __init__(self, graph_module: torch.fx.GraphModule, example_inputs: list[Any],
                 bw_compiler: Callable[..., Any]):
        # As aot_module_simplified lifts them.
        params = {**dict(graph_module.named_parameters(remove_duplicate=False)),
                  **dict(graph_module.named_buffers(remove_duplicate=False))}
        self.record = _Record(list(example_inputs), list(params.values()), bw_compiler,
                              torch._C._is_any_autocast_enabled())

    def __enter__(self) -> _Record:
        self._prev = getattr(_state, "record", None)
        _state.record = self.record
        return self.record

    def __exit__(self, *exc: Any) -> None:
        _state.record = self._prev


def note_partition(fw_module: torch.fx.GraphModule, bw_module: torch.fx.GraphModule) -> None:
    record = getattr(_state, "record", None)
    if record is not None:
        record.fw_module, record.bw_module = fw_module, bw_module


def note_compiled(kind: str, compiled: Any) -> None:
    """kind: "fw", "bw" or "inference"; called by the compilers with what they return."""
    record = getattr(_state, "record", None)
    if record is None:
        return
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    fakify = bool(getattr(ctx, "fakify_first_call", False)) if ctx is not None else False
    record.compiled.append((kind, compiled, None if fakify else meta))


def _plain_inputs(example_inputs: list[Any]) -> str | None:
    """Why AOT's dedupe/synthetic-base/subclass wrappers could be active, or None."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.multiprocessing.reductions import StorageWeakRef

    storages = set()
    for x in example_inputs:
        if isinstance(x, torch.SymInt) or isinstance(x, (torch.SymFloat, torch.SymBool)):
            return "symbolic input"
        if not isinstance(x, torch.Tensor):
            if isinstance(x, (int, float, bool)) or x is None:
                continue
            return f"input of type {type(x).__name__}"
        if type(x) not in (torch.Tensor, FakeTensor, torch.nn.Parameter):
            return f"tensor subclass input {type(x).__name__}"
        if any(isinstance(s, torch.SymInt) for s in (*x.shape, *x.stride())):
            return "symbolic shape"
        ref = StorageWeakRef(x.untyped_storage())
        if ref in storages:
            return "inputs share a storage"
        storages.add(ref)
    return None


def _common_reason(meta: Any) -> str | None:
    from torch._functorch._aot_autograd.schemas import MutationType, OutputType

    if meta is None:
        return "no metadata"
    if meta.tokens or getattr(meta, "num_backward_tokens", 0):
        return "effect tokens"
    if meta.is_rng_op_functionalized or getattr(meta, "num_graphsafe_rng_states", 0):
        return "functionalized RNG"
    if getattr(meta, "subclass_inp_meta", None) and any(not isinstance(m, int) and type(m).__name__ != "PlainTensorMeta"
                                                         for m in meta.subclass_inp_meta):
        return "subclass inputs"
    if meta.num_intermediate_bases or meta.num_outputs_aliased or meta.num_unsafe_view_outputs:
        return "outputs alias inputs or intermediates"
    if meta.num_mutated_inp_runtime_indices:
        return "input mutations applied after the graph"
    if any(i.mutation_type == MutationType.MUTATED_IN_GRAPH and (i.mutates_metadata or i.mutates_storage_metadata)
           for i in meta.input_info):
        return "metadata mutation of an input"
    if meta.dynamic_outputs or meta.grad_enabled_mutation is not None:
        return "dynamic outputs or grad-mode mutation"
    for o in meta.output_info:
        if o.output_type != OutputType.non_alias or not issubclass(o.raw_type, torch.Tensor):
            return "a non-tensor or aliased output"
    return None


def build(record: _Record, aot_fn: Callable[..., Any]) -> Callable[..., Any]:
    """The callable dynamo gets: a fast runtime when the region allows it, else aot_fn."""
    graph_name = "+".join(getattr(fn, "graph_name", "?") for _, fn, _ in record.compiled) or "region"
    reason = _plain_inputs([*record.params_flat, *record.example_inputs])
    kinds = [k for k, _, _ in record.compiled]
    fast = None
    if reason is None:
        if kinds == ["inference"]:
            _, fn, meta = record.compiled[0]
            reason = _common_reason(meta) or _arity(meta, record)
            if reason is None:
                fast = _inference_runtime(fn, meta, record.disable_amp, record.params_flat)
        elif kinds == ["fw"] and record.bw_module is not None:
            _, fn, meta = record.compiled[0]
            reason = _common_reason(meta) or _arity(meta, record) or _training_reason(meta)
            if reason is None:
                fast = _training_runtime(fn, meta, record, aot_fn)
        else:
            reason = f"compiled graphs {kinds}"
    if fast is None:
        _counts["aot_regions"] += 1
        logger.info("%s keeps AOT autograd's runtime wrappers (%s)", graph_name, reason)
        return aot_fn
    _counts["fast_regions"] += 1
    logger.debug("%s runs without AOT autograd's runtime wrappers", graph_name)
    return fast


def _arity(meta: Any, record: _Record) -> str | None:
    given = len(record.params_flat) + len(record.example_inputs)
    if len(meta.input_info) != given:
        return f"inputs deduplicated ({len(meta.input_info)} graph inputs, {given} given)"
    return None


def _training_reason(meta: Any) -> str | None:
    if meta.num_symints_saved_for_bw:
        return "symbolic sizes saved for backward"
    if meta.num_forward_returns != meta.num_outputs:
        return "mutated inputs returned by the forward"
    return None


def _mutated_in_graph(meta: Any) -> tuple[int, ...]:
    return tuple(meta.mutated_graph_handled_indices_seen_by_autograd)


def _unboxed(fn: Any) -> Callable[..., Any]:
    """fn (a boxed compiled graph) as a callable of the graph's inputs, returning its
    outputs as a sequence, with the fewest Python calls between: a graph that is one
    cluster over its inputs (_cluster_plan) calls the cluster's recipe itself, a graph from
    compilers.py its forward (no input list to build and clear: the runtime keeps its
    inputs alive for the call anyway), any other boxed callable through its list."""
    forward = getattr(fn, "unboxed", None)
    if forward is None:
        return lambda *args: fn(list(args))
    plan = _plan_of(forward)
    return forward if plan is None else _direct_cluster(plan)


def _plan_of(forward: Callable[..., Any]) -> "_Plan | None":
    gm = getattr(forward, "__self__", None)
    if isinstance(gm, torch.fx.GraphModule) and forward == gm.forward:
        return _cluster_plan(gm)
    return None


@dataclass
class _Plan:
    """How a graph that is one cluster call maps its inputs and outputs. argmap: the graph
    input each cluster input is (None: all of them, in order); outmap: per graph output,
    (0, k) the cluster's k-th output, (1, j) graph input j itself, (2, 0) None (None: the
    outputs are the cluster's, in order); forward: the graph's own forward (the fallback).
    pick_args / pick_out apply the maps in C (operator.itemgetter): pick_args(args) is the
    cluster's inputs, pick_out((*args, None, *flat)) the graph's outputs (a tuple)."""
    runner: Any
    argmap: tuple[int, ...] | None
    outmap: tuple[tuple[int, int], ...] | None
    structures: tuple[Any, ...]
    forward: Callable[..., Any]
    num_inputs: int = 0
    pick_args: Callable[..., Any] | None = None
    pick_out: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if self.argmap is not None:
            self.pick_args = _picker(self.argmap)
        if self.outmap is not None:
            n = self.num_inputs
            self.pick_out = _picker(tuple(n + 1 + i if k == 0 else i if k == 1 else n for k, i in self.outmap))


def _picker(idx: tuple[int, ...]) -> Callable[[Any], tuple]:
    """seq -> tuple(seq[i] for i in idx), in C."""
    import operator

    if len(idx) > 1:
        return operator.itemgetter(*idx)
    if len(idx) == 1:
        (i,) = idx
        return lambda seq: (seq[i],)
    return lambda seq: ()


def _cluster_plan(gm: torch.fx.GraphModule) -> _Plan | None:
    """The plan of a graph `outs = cluster(*some inputs); return (outs[i]..., input..., None...)`
    (the cluster called over graph inputs in any order, its outputs taken by getitem, or
    the one it returns bare), or None for any other graph."""
    import operator

    from .recipe_compiler import ClusterRunner

    nodes = list(gm.graph.nodes)
    inputs = [n for n in nodes if n.op == "placeholder"]
    rest = nodes[len(inputs):]
    if not rest or any(n.op == "placeholder" for n in rest) or rest[-1].op != "output":
        return None
    call, tail, out = rest[0], rest[1:-1], rest[-1].args[0]
    runner = call.target
    if (call.op != "call_function" or not isinstance(runner, ClusterRunner) or call.kwargs
            or not all(isinstance(a, torch.fx.Node) and a.op == "placeholder" for a in call.args)
            or not isinstance(out, (tuple, list))):
        return None
    count = _output_count(runner.submodule)
    position = {n: j for j, n in enumerate(inputs)}
    picked: dict[torch.fx.Node, int] = {}
    for n in tail:
        if (n.op != "call_function" or n.target is not operator.getitem or n.kwargs or len(n.args) != 2
                or n.args[0] is not call or not isinstance(n.args[1], int) or count is None
                or not 0 <= n.args[1] < count):
            return None
        picked[n] = n.args[1]
    if count is None and tail:
        return None
    outmap = []
    for o in out:
        if o is None:
            outmap.append((2, 0))
        elif o is call and count is None:
            outmap.append((0, 0))  # the cluster returns its one output bare
        elif o in picked:
            outmap.append((0, picked[o]))
        elif o in position:
            outmap.append((1, position[o]))
        else:
            return None
    argmap = tuple(position[a] for a in call.args)
    if argmap == tuple(range(len(inputs))):
        argmap = None
    flat_map = tuple(outmap) == tuple((0, k) for k in range(len(outmap))) and (count is None or count == len(outmap))
    return _Plan(runner, argmap, None if flat_map else tuple(outmap),
                 (None,) if count is None else (list, tuple), gm.forward, len(inputs))


_UNSET = object()


def _fast_run_of(entry: Any, runner: Any, structures: tuple[Any, ...]) -> Any:
    """The C++ entry (RecipeCall.run) of runner's current recipe entry when
    ClusterRunner.__call__ would do no more than call it: a recipe over the inputs as
    given (no baked constants or packed host scalars), no random draws, flat outputs of
    the structure the plan expects; else None."""
    if entry is None or entry[1] is not None:
        return None
    rec = entry[0]
    if not rec._handle or rec._generators or rec._structure not in structures:
        return None
    from ... import _recipe

    run_fast = getattr(_recipe._recipe_c(), "run_fast", None)  # METH_FASTCALL: no pybind11 dispatch
    return rec._fast.run if run_fast is None else functools.partial(run_fast, rec._fast)


def _direct_cluster(plan: _Plan) -> Callable[..., Any]:
    """Call the plan's recipe straight through its C++ entry (csrc/hpu_recipe.cpp: the
    input checks, output allocation and the run into Go) when ClusterRunner.__call__ would
    do just that (_fast_run_of) and no thread tuning is under way, and map its flat
    outputs to the graph's (the same input objects, None slots). Anything else, and
    inputs the recipe was not captured for (the entry returns None before running), go
    through the graph's forward, as before."""
    from .recipe_compiler import _located_error

    runner, pick_args, pick_out, structures, forward = (plan.runner, plan.pick_args, plan.pick_out, plan.structures,
                                                         plan.forward)
    launch = runner.launch
    memo = [(_UNSET, None)]  # (runner._entry last seen, its fast run or None)

    def call(*args: Any) -> Any:
        entry = runner._entry
        seen = memo[0]
        if seen[0] is entry:
            go = seen[1]
        else:
            go = _fast_run_of(entry, runner, structures)
            memo[0] = (entry, go)  # one store: threads never pair an entry with another's run
        if go is not None and runner._tuner is None:
            try:
                flat = go(args if pick_args is None else pick_args(args), launch)
            except (RuntimeError, IndexError) as e:
                raise _located_error(e, runner) from e
            if flat is not None:
                runner.hits += 1
                return flat if pick_out is None else pick_out((*args, None, *flat))
        return forward(*args)

    call.plan = plan  # type: ignore[attr-defined]
    return call


def _output_count(sub: torch.fx.GraphModule) -> int | None:
    """How many outputs sub returns as a tuple or list (None when it returns one bare)."""
    out = next(iter(sub.graph.find_nodes(op="output"))).args[0]
    return len(out) if isinstance(out, (tuple, list)) else None


def _inference_runtime(fn: Any, meta: Any, disable_amp: bool, params: list[torch.Tensor]):
    mutated = _mutated_in_graph(meta)
    increment = torch.autograd.graph.increment_version
    set_grad = torch._C._set_grad_enabled
    is_grad = torch.is_grad_enabled
    no_autocast = torch._C._DisableAutocast
    call = _unboxed(fn)
    plan = getattr(call, "plan", None)
    if plan is not None:
        call = plan.forward  # what the direct path falls back to

    def slow(args: tuple) -> Any:
        if not is_grad():
            if disable_amp:
                with no_autocast():
                    return call(*args)
            return call(*args)
        set_grad(False)
        try:
            if disable_amp:
                with no_autocast():
                    return call(*args)
            return call(*args)
        finally:
            set_grad(True)

    if plan is None:
        def run(*args: Any) -> Any:
            if params:
                args = (*params, *args)
            if mutated:
                increment([args[i] for i in mutated])
            return slow(args)

        return _dynamo_disable(run)

    # A graph that is one cluster: its recipe's C++ entry is taken first, in the same
    # frame, without grad-mode or autocast toggling. The entry runs no dispatcher op that
    # either could change (it builds fresh tensors without autograd history; outputs that
    # alias inputs keep the region on AOT's runtime, _common_reason), so the result is the
    # one the graph gives under no_grad. Anything else goes through slow, as before.
    from .recipe_compiler import _located_error

    runner, pick_args, pick_out, structures = plan.runner, plan.pick_args, plan.pick_out, plan.structures
    launch = runner.launch
    memo = [(_UNSET, None)]

    def run(*args: Any) -> Any:
        if params:
            args = (*params, *args)
        if mutated:
            increment([args[i] for i in mutated])
        entry = runner._entry
        seen = memo[0]
        if seen[0] is entry:
            go = seen[1]
        else:
            go = _fast_run_of(entry, runner, structures)
            memo[0] = (entry, go)  # one store: threads never pair an entry with another's run
        if go is not None and runner._tuner is None:
            try:
                flat = go(args if pick_args is None else pick_args(args), launch)
            except (RuntimeError, IndexError) as e:
                raise _located_error(e, runner) from e
            if flat is not None:
                runner.hits += 1
                return flat if pick_out is None else pick_out((*args, None, *flat))
        return slow(args)

    return _dynamo_disable(run)


def _training_runtime(fw: Any, meta: Any, record: _Record, aot_fn: Callable[..., Any]):
    from torch._functorch._aot_autograd.runtime_wrappers import AOTDispatchAutograd
    from torch._functorch._aot_autograd.utils import normalize_as_list

    bw_module = record.bw_module
    bw_outputs = list(bw_module.graph.find_nodes(op="output"))[0].args[0]
    if len(bw_outputs) != len(meta.input_info):
        return None
    # AOT's "detach inputs that never need gradients": non-leaf inputs requiring grad whose
    # gradient the backward graph never computes.
    detach = tuple(i for i, (o, info) in enumerate(zip(bw_outputs, meta.input_info))
                   if o is None and info.requires_grad and not info.is_leaf)
    mutated = _mutated_in_graph(meta)
    num_out = meta.num_outputs
    saved_slice = meta.tensors_saved_for_backwards_slice
    out_requires_grad = tuple(o.requires_grad for o in meta.output_info)
    tangent_meta = list(meta.subclass_tangent_meta)
    if len(tangent_meta) != sum(out_requires_grad):
        return None
    disable_amp = record.disable_amp
    no_autocast = torch._C._DisableAutocast
    process_tangent = AOTDispatchAutograd.process_runtime_tangent
    placeholders = [n.meta.get("val") for n in bw_module.graph.find_nodes(op="placeholder")]
    with torch._C._DisableAutocast() if disable_amp else _null():
        # Run by the autograd engine, possibly inside a frame dynamo evaluates: kept out
        # of dynamo as AOT keeps its compiled backward.
        bw = _dynamo_disable(_unboxed(record.bw_compiler(bw_module, placeholders)))

    fw_call = _unboxed(fw)

    class CompiledRegion(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            if disable_amp:
                with no_autocast():
                    outs = normalize_as_list(fw_call(*args))
            else:
                outs = normalize_as_list(fw_call(*args))
            ctx.save_for_backward(*(x.detach() if x._is_view() else x for x in outs[saved_slice]))
            ret = outs[:num_out]
            ctx.mark_non_differentiable(*(x for x, rg in zip(ret, out_requires_grad) if not rg))
            ctx._materialize_non_diff_grads = False
            return tuple(ret)

        @staticmethod
        def backward(ctx, *grads):
            tangents = [g for g, rg in zip(grads, out_requires_grad) if rg]
            args = [*ctx.saved_tensors, *(process_tangent(g, m)[0] for g, m in zip(tangents, tangent_meta))]
            ctx.maybe_clear_saved_tensors()
            if disable_amp:
                with no_autocast():
                    return tuple(normalize_as_list(bw(*args)))
            return tuple(normalize_as_list(bw(*args)))

    apply = CompiledRegion.apply
    is_grad = torch.is_grad_enabled
    increment = torch.autograd.graph.increment_version
    params = record.params_flat

    def run(*args: Any) -> list[Any]:
        if not is_grad():  # compiled for training, called with autograd off: AOT decides
            return aot_fn(*args)
        if params:
            args = (*params, *args)
        if detach:
            args = list(args)
            for i in detach:
                args[i] = args[i].detach()
        if mutated:
            increment([args[i] for i in mutated])
        return list(apply(*args))

    return _dynamo_disable(run)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
