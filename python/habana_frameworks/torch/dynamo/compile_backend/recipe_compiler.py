"""Run time of one `hpu_cluster`: the fused FX submodule the partitioner made, lowered once
into a Go recipe and then launched with one crossing into Go per call.

The lowering is `habana_frameworks.torch._recipe` (the Go recipe runtime lazy mode's graphs
use): the first call with real inputs captures the cluster into a recipe and returns its
outputs; later calls with inputs of the same shapes, dtypes and strides run the recipe.
New shapes/strides (dynamic graphs, force_static_compile) capture a recipe per input
signature. A cluster that cannot be captured (a CPU fallback inside, a host read, a
data-dependent shape) runs op by op through its FX submodule from then on, and says so in
the PT_COMPILE log. So does every cluster when the runtime is missing or recipes are off
(`use_compiled_recipes` / PT_HPU_COMPILE_USE_RECIPES=0)."""
from __future__ import annotations

import collections
import os
import threading
import time
import weakref
from typing import Any, Sequence

import torch

from ... import _native
from ...utils import internal as _internal
from .logger import logger

try:
    from ... import _recipe  # type: ignore[attr-defined]
except ImportError:  # the Go recipe runtime is not in this build
    _recipe = None

_stats_lock = threading.Lock()
# Counters of the compile path (see stats()).
_stats: collections.Counter[str] = collections.Counter()


# Recipe hits are counted per runner without the lock (the hot path; an int += under the
# GIL), and summed by stats(), with those of runners already freed.
_runners: "weakref.WeakSet[ClusterRunner]" = weakref.WeakSet()


def stats() -> dict[str, int]:
    """clusters: clusters built; recipe_compilations: recipes captured; recipe_hits: calls
    served by a cached recipe; eager_clusters: clusters (per input signature) running op by
    op; eager_cluster_calls: calls that did."""
    with _stats_lock:
        out = dict(_stats)
        hits = out.get("recipe_hits", 0) + sum(r.hits for r in list(_runners))
    if hits:
        out["recipe_hits"] = hits
    return out


def _count(key: str, n: int = 1) -> None:
    with _stats_lock:
        _stats[key] += n


def recipes_available() -> bool:
    return _recipe is not None


def signature(inputs: Sequence[Any]) -> tuple:
    """What a recipe is specialised on: each tensor's shape, strides, offset, dtype and
    device; other inputs (symbolic sizes, scalars) by value."""
    sig = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            sig.append((tuple(x.shape), x.stride(), x.storage_offset(), x.dtype, x.device))
        else:
            sig.append(x)
    return tuple(sig)


class ClusterError(RuntimeError):
    """A failure inside a compiled cluster, naming the op (the original error is chained)."""


_EAGER = object()  # marks a signature whose cluster runs op by op


class ClusterRunner:
    """Callable that replaces a `fused_N` call in the compiled graph."""

    is_hpu_cluster = True

    def __init__(self, name: str, graph_name: str, submodule: torch.fx.GraphModule, use_recipes: bool,
                 tune_threads: bool = False, launch_checks: list[tuple[int, int, int]] | None = None):
        self.name = name
        self.graph_name = graph_name
        self.__name__ = f"{graph_name}_{name}"  # how FX names it in the generated code
        self.submodule = submodule
        self.use_recipes = use_recipes and _recipe is not None
        self.num_ops = sum(1 for n in submodule.graph.nodes if n.op == "call_function")
        # The last recipe used, tried first: (recipe, tensor positions or None, positions
        # of baked-in non-tensor inputs, their values).
        self._entry: tuple | None = None
        self._sig: tuple | None = None
        self._by_sig: dict[tuple, Any] = {}
        self.hits = 0
        # How the recipe runs: 0 at once, 2 launched on the eager-mode device stream
        # (async_launchable; its kernels keep to the stream's thread, so no tuning), after
        # the host scans launch_checks' class targets (hpu_recipe.cpp's checked_launch).
        self.launch = 0 if launch_checks is None else 2
        self.launch_checks = tuple(launch_checks or ())
        self.tune_threads = tune_threads and launch_checks is None
        self._tuner: _ThreadTuner | None = None  # set while a new recipe is being timed
        _runners.add(self)
        _count("clusters")

    def __del__(self):
        if self.hits:
            try:
                _count("recipe_hits", self.hits)
            except TypeError:  # interpreter shutdown: the module's globals are already None
                pass

    def ops_summary(self) -> str:
        return ", ".join(str(n.target) for n in self.submodule.graph.nodes if n.op == "call_function")

    def __repr__(self) -> str:
        return f"ClusterRunner({self.graph_name}.{self.name}, {self.num_ops} ops)"

    def __call__(self, *inputs):
        entry = self._entry
        if entry is not None:
            rec, tensor_pos, const_pos, consts, host_pos = entry
            args = inputs
            if tensor_pos is not None:
                if tuple(inputs[i] for i in const_pos) != consts:
                    return self._dispatch(inputs)
                args = [inputs[i] for i in tensor_pos]
                if host_pos:
                    try:
                        args.append(_pack_host_scalars(inputs, host_pos))
                    except (RuntimeError, TypeError):
                        return self._dispatch(inputs)
            try:
                out = rec._call(args, self.launch) if self._tuner is None else self._tuned_run(rec, args)
            except ValueError:
                if signature(inputs) == self._sig:
                    raise
            except (RuntimeError, IndexError) as e:
                raise _located_error(e, self) from e
            else:
                self.hits += 1
                return out
        return self._dispatch(inputs)

    def _dispatch(self, inputs: tuple):
        if not self.use_recipes:
            return self.run_fx(inputs)
        sig = signature(inputs)
        cached = self._by_sig.get(sig)
        if cached is _EAGER:
            return self.run_fx(inputs)
        if cached is not None:
            self._entry, self._sig = cached, sig
            return self(*inputs)
        return self._capture(sig, inputs)

    def _capture(self, sig: tuple, inputs: tuple):
        # Recipes take hpu tensors only. Other inputs (sizes, scalars) are baked in, as the
        # signature they are part of says. Host 0-dim tensors (an optimizer's step counts)
        # are packed into one hpu tensor per call (one copy), which the recipe unbinds.
        host_pos = tuple(i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.device.type != "hpu")
        if host_pos and not _packable(inputs, host_pos):
            return self._run_eagerly_from_now(sig, inputs, f"inputs {list(host_pos)} are host tensors")
        tensor_pos = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and i not in host_pos]
        fn, args, const_pos, consts = self.submodule, list(inputs), (), ()
        baked = len(tensor_pos) != len(inputs)
        if baked:
            const_pos = tuple(i for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor))
            consts = tuple(inputs[i] for i in const_pos)
            args = [inputs[i] for i in tensor_pos]
            if host_pos:
                args.append(_pack_host_scalars(inputs, host_pos))
            fn = _bake_constants(self.submodule, inputs, tensor_pos, host_pos)
        try:
            rec, outs = _recipe.capture(fn, args)
        except _recipe.NotCapturable as e:
            # The cluster ran to completion during the capture: keep its outputs.
            self._mark_eager(sig, str(e))
            return plain_outputs(e.outputs, inputs)
        except Exception as e:
            raise _located_error(e, self) from e
        for pos, classes, ignore in self.launch_checks:
            rec._fast.add_index_check(tensor_pos.index(pos) if baked else pos, classes, ignore)
        entry = (rec, tensor_pos if baked else None, const_pos, consts, host_pos)
        self._by_sig[sig] = entry
        self._entry, self._sig = entry, sig
        self._start_tuning(rec)
        _count("recipe_compilations")
        logger.debug("%s %s: recipe %s for %d ops: %s", self.graph_name, self.name,
                     rec.stats.get("recipe_id"), self.num_ops, rec.stats)
        return plain_outputs(outs, inputs)

    def _tuned_run(self, rec: Any, args: Any):
        tuner = self._tuner
        if tuner.rec is not rec:  # another signature's recipe: it keeps the pool
            return rec.run(args)
        out = tuner.run(args)
        if tuner.solo is not None:
            self._tuner = None
            logger.debug("%s %s: recipe %s runs %s (median %.1f us solo, %.1f us on the worker pool)",
                         self.graph_name, self.name, rec.stats.get("recipe_id"),
                         "on the calling thread" if tuner.solo else "on the worker pool", *tuner.medians_us())
        return out

    def _start_tuning(self, rec: Any) -> None:
        if self._tuner is not None:
            self._tuner.finish()
        self._tuner = _ThreadTuner(rec) if self.tune_threads and _tunable() else None

    def _mark_eager(self, sig: tuple, reason: str) -> None:
        logger.info("%s %s: not captured into a recipe (%s); its %d ops run eagerly",
                    self.graph_name, self.name, reason, self.num_ops)
        self._by_sig[sig] = _EAGER
        _count("eager_clusters")

    def _run_eagerly_from_now(self, sig: tuple, inputs: tuple, reason: str):
        self._mark_eager(sig, reason)
        return self.run_fx(inputs)

    def run_fx(self, inputs: Sequence[Any]):
        """Run the cluster op by op; a failure is re-raised naming the op that failed."""
        _count("eager_cluster_calls")
        env: dict[torch.fx.Node, Any] = {}
        it = iter(inputs)
        result = None
        for node in self.submodule.graph.nodes:
            if node.op == "placeholder":
                env[node] = next(it)
            elif node.op == "call_function":
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), env.__getitem__)
                try:
                    env[node] = node.target(*args, **kwargs)
                except Exception as e:
                    raise _named_error(e, node, self) from e
            elif node.op == "output":
                result = torch.fx.node.map_arg(node.args[0], env.__getitem__)
            else:  # get_attr (constants lifted into the submodule)
                env[node] = _fetch_attr(self.submodule, node.target)
        return plain_outputs(result, inputs)


def _plain(o: Any, input_storages: set[int]) -> Any:
    if not isinstance(o, torch.Tensor) or o._base is None or o.untyped_storage().data_ptr() in input_storages:
        return o
    return torch.ops.aten._unsafe_view(o, o.shape)


def plain_outputs(outs: Any, inputs: Sequence[Any]) -> Any:
    """outs with every tensor that is an autograd view of storage the graph made itself
    (`reshape` of a `clone`: a `_unsafe_view` AOT traced, decomposed into `view`) turned
    into a plain tensor over the same memory, as AOT's `_unsafe_view` hides it and as a
    recipe's replay builds it (hpu_recipe.cpp's kOutFresh). AOT traced such an output as
    a fresh tensor: returned as a view made inside its autograd.Function, an in-place
    write into it later (a frame resumed after a graph break mutating it: Longformer's
    global attention) raises "Output 0 of CompiledFunctionBackward is a view and is
    being modified inplace". Views of the inputs' storage stay views (AOT regenerates
    those from the input). The capture and op-by-op paths only: replays are plain."""
    if isinstance(outs, torch.Tensor):
        if outs._base is None:
            return outs
    elif isinstance(outs, (list, tuple)):
        if not any(isinstance(o, torch.Tensor) and o._base is not None for o in outs):
            return outs
    else:
        return outs
    storages = {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
    storages.discard(0)
    if isinstance(outs, torch.Tensor):
        return _plain(outs, storages)
    vals = [_plain(o, storages) for o in outs]
    if isinstance(outs, list):
        return vals
    if type(outs) is tuple:
        return tuple(vals)
    return outs._make(vals) if hasattr(outs, "_make") else type(outs)(vals)  # namedtuple, structseq


def _tunable() -> bool:
    """Whether kernels can split at all (more than one worker); else solo is moot."""
    return torch.get_num_threads() >= 2 and (os.cpu_count() or 1) >= 2


class _ThreadTuner:
    """Times a new recipe's first runs alternately on the kernel worker pool and solo (all
    kernels on the calling thread), then keeps the faster. Tiny kernels (the MLP's 64-wide
    GEMMs) lose more to handing half their parts to a helper than the helper saves them,
    a transformer's larger ones gain; the kernels split the same parts either way, so the
    choice never changes a result."""

    WARM = 2     # runs not timed (first touches of the recipe's memory)
    TIMED = 10   # timed runs per side

    def __init__(self, rec: Any):
        self.rec = rec
        self.n = 0
        self.times: tuple[list[int], list[int]] = ([], [])  # (pool, solo) in ns
        self.solo: bool | None = None

    def run(self, args: Any):
        side = self.n & 1
        self.rec.set_solo(bool(side))
        t0 = time.perf_counter_ns()
        out = self.rec.run(args)
        if self.n >= self.WARM:
            self.times[side].append(time.perf_counter_ns() - t0)
        self.n += 1
        if len(self.times[0]) >= self.TIMED and len(self.times[1]) >= self.TIMED:
            self.finish()
        return out

    def medians_us(self) -> tuple[float, float]:
        return (_median(self.times[1]) / 1e3, _median(self.times[0]) / 1e3)

    def finish(self) -> None:
        """Decide with what was timed (the pool when too little was)."""
        pool, solo = self.times
        self.solo = bool(pool and solo and _median(solo) <= _median(pool))
        self.rec.set_solo(self.solo)


def _median(xs: list[int]) -> float:
    if not xs:
        return float("nan")
    ys = sorted(xs)
    return float(ys[len(ys) // 2])


def _packable(inputs: Sequence[Any], host_pos: tuple[int, ...]) -> bool:
    xs = [inputs[i] for i in host_pos]
    return all(x.dim() == 0 and x.device.type == "cpu" and x.dtype == xs[0].dtype for x in xs)


def _pack_host_scalars(inputs: Sequence[Any], host_pos: tuple[int, ...]) -> torch.Tensor:
    return torch.stack([inputs[i] for i in host_pos]).to("hpu")


def _bake_constants(fn: Any, inputs: Sequence[Any], tensor_pos: list[int], host_pos: tuple[int, ...]):
    """fn over (hpu tensors..., [packed host scalars]) with the other inputs fixed."""
    full = list(inputs)

    def with_constants(*tensors):
        args = list(full)
        for i, t in zip(tensor_pos, tensors):
            args[i] = t
        if host_pos:
            for i, t in zip(host_pos, tensors[len(tensor_pos)].unbind(0)):
                args[i] = t
        return fn(*args)

    return with_constants


def _fetch_attr(mod: torch.nn.Module, target: str):
    for part in target.split("."):
        mod = getattr(mod, part)
    return mod


def _eager_class(e: Exception) -> tuple[type, str]:
    """The exception class eager hpu raises for e, and its message. A recipe's replay (C++,
    hpu_recipe.cpp) raises a plain RuntimeError with the Go error, whose labelled node names
    the class CPU raises first ("IndexError: index_select: index out of range in self ...",
    bridge/nodeerr.go): an out-of-range embedding index is an IndexError, as in eager mode."""
    msg = str(e)
    if type(e) in (RuntimeError, _native.NativeError):
        kind, sep, rest = msg.partition(": ")
        cls = _native._ERROR_CLASSES.get(kind) if sep else None
        if cls is not None:
            return cls, rest
    return type(e), msg


def _rebuilt(e: Exception, where: str) -> Exception:
    cls, msg = _eager_class(e)
    msg = f"{msg}\n(hpu_backend: while running {where})"
    try:
        return cls(msg)
    except Exception:
        return ClusterError(msg)


def _located_error(e: Exception, runner: ClusterRunner) -> Exception:
    return _rebuilt(e, f"{runner.graph_name}.{runner.name}: {runner.ops_summary()}")


def _named_error(e: Exception, node: torch.fx.Node, runner: ClusterRunner) -> Exception:
    return _rebuilt(e, f"{node.target} (node {node.name}) in {runner.graph_name}.{runner.name}")


# Ops whose kernels can fail on the data they read (an index out of range, a class target,
# an assertion): a graph with one runs at once, so that the failure is raised at the call
# that ran it. A backward graph's such ops read what its forward already checked (saved
# tensors, which autograd refuses to use once modified), so backward graphs launch anyway.
_DATA_CHECKED = ("index", "gather", "scatter", "embedding", "nll_loss", "cross_entropy", "take", "put_", ".put.",
                 "one_hot", "bincount", "searchsorted", "bucketize", "multinomial", "histc", "histogram",
                 "unique", "nonzero", "_local_scalar", "ctc_loss", "margin", "grid_sampler", "unpool",
                 "assert", "masked_select", "repeat_interleave", "segment_reduce", "sparse")


_NLL_FORWARD = (torch.ops.aten.nll_loss_forward.default, torch.ops.aten.nll_loss2d_forward.default)


def async_launchable(sub: torch.fx.GraphModule, is_backward: bool) -> list[tuple[int, int, int]] | None:
    """The checks to make at each launch when the cluster's recipe may be launched on the
    device stream (config.async_launch), else None. A check (input position, classes,
    ignore_index) is a class target the graph reads from one of its inputs
    (nll_loss_forward: cross_entropy's), verified on the host before the launch (one scan,
    hpusim_index_range_check), so that a bad target raises at the call as CPU raises it."""
    from . import config

    if not config.async_launch or _internal.is_lazy():
        return None
    if is_backward:
        return []
    inputs = {n: i for i, n in enumerate(sub.graph.find_nodes(op="placeholder"))}
    checks = []
    for n in sub.graph.nodes:
        if n.op != "call_function" or not any(w in str(n.target) for w in _DATA_CHECKED):
            continue
        check = _target_check(n, inputs) if n.target in _NLL_FORWARD else None
        if check is None:
            return None
        checks.append(check)
    return checks


def _target_check(n: torch.fx.Node, inputs: dict[torch.fx.Node, int]) -> tuple[int, int, int] | None:
    args = list(n.args) + [None] * (5 - len(n.args))
    self_, target, ignore = args[0], args[1], n.kwargs.get("ignore_index", args[4] if args[4] is not None else -100)
    val = self_.meta.get("val") if isinstance(self_, torch.fx.Node) else None
    if target not in inputs or val is None or not isinstance(ignore, int):
        return None
    classes = val.shape[1] if val.dim() >= 2 else val.shape[0]
    if not isinstance(classes, int):
        return None  # symbolic: checked by the kernel, at the call
    return inputs[target], classes, ignore



