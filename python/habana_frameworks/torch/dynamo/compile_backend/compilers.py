"""The compilers AOT autograd calls for hpu_backend: forward and backward of training
graphs, and inference graphs. Each runs the pass pipeline over the aten FX graph (placement,
partitioning, one recipe runner per cluster) and returns a boxed callable (one list
argument, `_boxed_call = True`), as the bridge does, so AOT can free inputs early."""
from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Callable

import torch

from ...utils import internal as _internal
from . import graph_dump
from . import fast_runtime
from .host_scalars import fold_host_step_increments
from .logger import logger
from .passes import PassContext, pass_restride_view_inputs, pass_views_follow_runtime_layout, run_passes
from .recipe_compiler import _count

_graph_ids = itertools.count()
_lazy_warned = threading.Event()


def _is_dynamic(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt):
            return True
        if isinstance(val, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in val.shape):
            return True
    return False


def _boxed(fn: Callable[..., Any]) -> Callable[[list], Any]:
    def run(args: list):
        inputs = tuple(args)
        args.clear()  # the graph owns its inputs now; AOT's list no longer keeps them alive
        return fn(*inputs)

    run._boxed_call = True  # type: ignore[attr-defined]
    run.unboxed = fn  # type: ignore[attr-defined]  # what fast_runtime calls (no list to build and clear)
    return run


def hpu_compiler_inner(gm: torch.fx.GraphModule, example_inputs: list[Any], is_training: bool,
                       is_backward: bool) -> Callable[[list], Any]:
    graph_name = f"fx_graph_{next(_graph_ids):04d}"
    if _internal.is_lazy():
        # hpu_backend is not supported in lazy mode (the bridge's support matrix): the
        # aten graph runs as recorded lazy ops, without placement or recipes.
        if not _lazy_warned.is_set():
            _lazy_warned.set()
            logger.warn("torch.compile with hpu_backend is not supported in lazy mode (PT_HPU_LAZY_MODE=1); "
                        "%s runs as lazy ops", graph_name)
        # Lazy ops keep their inputs' layout too: views still need the traced strides.
        lazy_ctx = PassContext(gm, example_inputs, graph_name, is_training, is_backward, _is_dynamic(gm))
        pass_restride_view_inputs(lazy_ctx)
        pass_views_follow_runtime_layout(lazy_ctx)
        compiled = _boxed(_plain_view_outputs(gm, gm.forward))
        compiled.graph_name = graph_name  # type: ignore[attr-defined]
        return compiled
    t0 = time.perf_counter()
    ctx = PassContext(gm, list(example_inputs), graph_name, is_training, is_backward, _is_dynamic(gm))
    graph_dump.dump(gm, graph_name, "PrePasses")
    run_passes(ctx)
    fold_host_step_increments(ctx.graph_module)
    graph_dump.dump(ctx.graph_module, graph_name, "PostPasses")
    _count("graphs")
    logger.info("%s compiled (%s%s): %d clusters, %s, %.3f s", graph_name,
                "training" if is_training else "inference", " backward" if is_backward else "",
                len(ctx.clusters), ctx.placement_counts, time.perf_counter() - t0)
    compiled = _boxed(_plain_view_outputs(ctx.graph_module, _direct_forward(ctx.graph_module)))
    compiled.graph_name = graph_name  # type: ignore[attr-defined]
    return compiled


_VIEW_LIKE = (torch.ops.aten.reshape.default, torch.ops.aten._unsafe_view.default)


def _view_like(node: Any) -> bool:
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    op = node.target
    return op in _VIEW_LIKE or (isinstance(op, torch._ops.OpOverload) and op.is_view)


def _plain_view_outputs(gm: torch.fx.GraphModule, forward: Callable[..., Any]) -> Callable[..., Any]:
    """forward, or forward with its outputs made plain tensors (recipe_compiler.plain_outputs)
    when a graph output is a view op the graph runs itself (not in a cluster: lazy mode, a
    view of an eager node's result) over a value it computed. AOT traced such an output as
    a fresh tensor (a `_unsafe_view` decomposed into `view`); as an autograd view made
    inside its autograd.Function, an in-place write into it later is refused. Views of
    graph inputs stay views; clusters make their own outputs plain."""
    out = next(iter(gm.graph.find_nodes(op="output"))).args[0]
    needed = False
    for node in out if isinstance(out, (list, tuple)) else (out,):
        if not _view_like(node):
            continue
        root = node
        while _view_like(root):
            root = root.args[0]
        if isinstance(root, torch.fx.Node) and root.op != "placeholder":
            needed = True
            break
    if not needed:
        return forward
    from .recipe_compiler import plain_outputs

    def run(*args: Any) -> Any:
        return plain_outputs(forward(*args), args)

    return run


def _direct_forward(gm: torch.fx.GraphModule) -> Callable[..., Any]:
    """The graph's generated forward, called without nn.Module's __call__ (hooks, the lazy
    recompile check): a cached graph's launch then costs one Python function call."""
    real_recompile = getattr(gm, "real_recompile", None)
    if real_recompile is not None:  # a _LazyGraphModule generates its code at the first call
        real_recompile()
    return gm.forward


def hpu_training_compiler_fw(gm: torch.fx.GraphModule, example_inputs: list[Any]):
    compiled = hpu_compiler_inner(gm, example_inputs, is_training=True, is_backward=False)
    fast_runtime.note_compiled("fw", compiled)
    return compiled


def hpu_training_compiler_bw(gm: torch.fx.GraphModule, example_inputs: list[Any]):
    compiled = hpu_compiler_inner(gm, example_inputs, is_training=True, is_backward=True)
    fast_runtime.note_compiled("bw", compiled)
    return compiled


def hpu_inference_compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]):
    compiled = hpu_compiler_inner(gm, example_inputs, is_training=False, is_backward=False)
    fast_runtime.note_compiled("inference", compiled)
    return compiled
