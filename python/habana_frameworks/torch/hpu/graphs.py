"""HPU graphs: capture the hpu work of a piece of code once, replay it with one call.

As on the bridge, HPU graphs belong to lazy mode: in eager mode `HPUGraph()` and `graph()`
raise the bridge's RuntimeErrors (and so does `wrap_in_hpu_graph` at its first capture).

A capture records every op run on hpu between capture_begin and capture_end into a
recipe (habana_frameworks.torch._recipe) over the storages it touched; as on the bridge,
each mark_step inside the capture (or host read, or synchronize) ends a segment that is a
recipe of its own, and a replay launches the segments back to back. The ops still run
during the capture (unless dry_run), so its results are real. replay() runs the recipe
again with one call into Go, on the same storages: it reads what the program copied into
the static inputs and writes the static outputs, parameters, gradients and optimizer
state in place.
Intermediates live in the recipe's scratch. Random ops draw fresh numbers at each replay.
A CPU fallback during a capture raises the bridge's error; a host read (.item(), .cpu())
runs and is not part of the graph, as the bridge's capture splits there.

Also here: the bridge's helpers built on HPUGraph (`graph`, `make_graphed_callables`,
`wrap_in_hpu_graph`, `ModuleCacher`, `input_hash`, `copy_to`, `CachedParams`, ...).
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import gc
import inspect
import os
from collections import UserDict
from functools import wraps
from typing import Callable, Sequence

import torch

from .. import _native, _recipe
from ..utils.internal import is_lazy

__all__ = [
    "HPUGraph", "graph", "make_graphed_callables", "ModuleCacher", "wrap_in_hpu_graph",
    "wrap_in_hpu_graph_func", "input_hash", "CachedParams", "copy_to", "is_current_stream_capturing",
    "get_user_input_tensor_list", "extract_tensors", "TensorPacker", "GraphModel",
]

# The graph being captured (one capture at a time per process, as on the bridge).
_capturing: "HPUGraph | None" = None


def _no_cpu_fallback(op) -> None:
    # The capture is over: it cannot be replayed, and the next one may begin.
    if _capturing is not None:
        _capturing._abort()
    raise RuntimeError("cpu fallback is not supported during hpu graph capturing")


def _hpu():
    import habana_frameworks.torch.hpu as hpu  # the package imports this module
    return hpu


class HPUGraph:
    """A captured HPU graph (lazy mode only)."""

    def __init__(self):
        if not is_lazy():
            raise RuntimeError("HPUGraph class is available in lazy mode only.")
        self._session: _recipe.Session | None = None
        self._recipe: _recipe.Recipe | None = None
        self._stream = None
        self._user_inputs: tuple[torch.Tensor, ...] = ()   # marked during the capture
        self._user_outputs: tuple[torch.Tensor, ...] = ()
        self._static_inputs: tuple[torch.Tensor, ...] = ()  # the marked inputs, kept for replay()
        self._match: list[int] = []
        self._n_marked = 0

    def capture_begin(self, dry_run: bool = False) -> None:
        """Begin capturing the hpu work on the current stream (pending lazy ops run first)."""
        global _capturing
        if _capturing is not None:
            raise RuntimeError("GRAPH:: graph Capture already in progress")
        self.reset()
        # As the bridge's capture_begin: refined dynamic shapes go off (a graph holds
        # static shapes) and stay off after the capture.
        from ._runtime_flags import disable_dynamic_shape
        disable_dynamic_shape()
        self._stream = _hpu().current_stream()
        session = _recipe.Session(on_fallback=_no_cpu_fallback, dry_run=dry_run, host_reads=True)
        session.begin()
        self._session = session
        _capturing = self

    def capture_end(self) -> None:
        """End the capture; replay() may then be called."""
        global _capturing
        if self._session is None or _capturing is not self:
            raise RuntimeError("GRAPH:: capture_end called without capture_begin")
        if _hpu().current_stream() != self._stream:
            raise RuntimeError("GRAPH:: Capture must end on the same stream it began on.")
        session, self._session, _capturing = self._session, None, None
        inputs = list(self._user_inputs)
        try:
            self._recipe = session.end(inputs, ())
        except _recipe.NotCapturable as e:
            raise RuntimeError(f"GRAPH:: capture failed: {e.reason}") from None
        self._static_inputs = tuple(inputs)
        self._n_marked = len(inputs)
        self._match = list(self._recipe.used_inputs)
        self._user_inputs = ()

    def _abort(self) -> None:
        global _capturing
        if self._session is not None:
            session, self._session = self._session, None
            if _capturing is self:
                _capturing = None
            session.abort()

    def _run(self, inputs: Sequence[torch.Tensor]) -> None:
        if _capturing is not None:
            raise RuntimeError("GRAPH:: Capture in progress")
        if self._recipe is None:
            # As the bridge: a replay is a step marker, then a run of every captured part;
            # with nothing captured yet only the pending lazy work runs (clients replay
            # before capturing, e.g. lightning-habana's validation at its sanity check).
            from .. import core
            core.mark_step()
            return
        # Queued on the lazy worker after the pending ops: the host goes on at once, and
        # reads of the graph's outputs wait for it as for any lazy graph.
        if torch.autograd._profiler_enabled():
            # Under the profiler the replay is a host range (its device run is a "recipe
            # replay" span on the device's graph-launch lane).
            with torch.autograd.profiler.record_function("HPUGraph::replay"):
                self._recipe.launch(inputs)
            return
        self._recipe.launch(inputs)

    def replay(self, asynchronous: bool = False) -> None:
        """Replay the captured work on the captured storages, after the pending lazy ops.
        The replay is queued on the lazy worker either way (`asynchronous` is accepted):
        reading its results waits for it."""
        if len(self._static_inputs) != self._n_marked:
            raise RuntimeError("GRAPH:: the graph's user inputs were cleared (clear_inputs): replay with replayV3")
        self._run(self._static_inputs)

    def _copy_in(self, statics: Sequence[torch.Tensor]) -> None:
        """Declare the static tensors _replay_copy fills (wrap_in_hpu_graph's inputs)."""
        if self._recipe is None:
            raise RuntimeError("GRAPH:: replay called on a graph that was not captured")
        self._recipe.set_copy_in(statics)

    def _replay_copy(self, srcs: Sequence[torch.Tensor]) -> bool:
        """copy_ each source into its static tensor (_copy_in) and replay, in one call into
        the core. False, having done nothing, when a source is not an hpu tensor of its
        static tensor's dtype, shape and strides, or under the profiler (the caller then
        copies with copy_ and replays)."""
        if _capturing is not None:
            raise RuntimeError("GRAPH:: Capture in progress")
        if self._recipe is None:
            raise RuntimeError("GRAPH:: replay called on a graph that was not captured")
        if len(self._static_inputs) != self._n_marked:
            raise RuntimeError("GRAPH:: the graph's user inputs were cleared (clear_inputs): replay with replayV3")
        if torch.autograd._profiler_enabled():
            return False  # profiled: copy_ and replay() show as the bridge's ranges
        return self._recipe.copy_launch(srcs, self._static_inputs) is not None

    def replayV2(self, static_tlist: list[torch.Tensor], tlist: list[torch.Tensor], asynchronous: bool = False) -> None:
        """Replay with tlist standing in for static_tlist: marked inputs are rebound to
        their new tensors, other static tensors receive a copy first."""
        inputs = list(self._static_inputs)
        for s, t in zip(static_tlist, tlist):
            for k, x in enumerate(self._static_inputs):
                if x is s:
                    inputs[k] = t
                    break
            else:
                s.copy_(t)
        self._run(inputs)

    def replayV3(self, tlistI: list[torch.Tensor], asynchronous: bool = False) -> None:
        """Replay with new tensors for the inputs marked with mark_user_inputs (same
        shapes, dtypes and strides; anything else raises ValueError)."""
        if len(tlistI) != self._n_marked:
            raise RuntimeError(f"GRAPH:: replayV3 expects {self._n_marked} input tensors "
                               f"(the marked user inputs), got {len(tlistI)}")
        self._run(list(tlistI))

    def mark_user_outputs(self, static_tlist: list[torch.Tensor]) -> None:
        """Mark the outputs the user needs (they stay valid and are rewritten by each replay)."""
        self._user_outputs = tuple(static_tlist)

    def mark_user_inputs(self, static_tlist: list[torch.Tensor]) -> None:
        """During a capture: mark the user's input tensors, to be rebound by replayV3."""
        self._user_inputs = tuple(t for t in static_tlist if isinstance(t, torch.Tensor))

    def get_user_input_match_indices(self) -> list[int]:
        """Indices of the marked user inputs the graph reads or writes."""
        return list(self._match)

    def clear_inputs(self) -> None:
        """Drop the references to the marked inputs (replayV3 supplies them again)."""
        self._static_inputs = ()

    def reset(self) -> None:
        """Destroy the captured graph and free its memory."""
        self._abort()
        self._recipe = None
        self._static_inputs = ()
        self._user_outputs = ()
        self._match = []

    def __del__(self):
        try:
            self.reset()
        except Exception:  # interpreter shutdown
            pass


class graph:
    """Context manager capturing the hpu work inside it into an HPUGraph (lazy mode only)."""

    default_capture_stream = None

    def __init__(self, hpu_graph: HPUGraph, stream=None, dry_run: bool = False):
        if not is_lazy():
            raise RuntimeError("Context-manager for HPUGraph is available in lazy mode only.")
        hpu = _hpu()
        if self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = hpu.Stream()
        self.capture_stream = stream if stream is not None else self.__class__.default_capture_stream
        self.stream_ctx = hpu.stream(self.capture_stream)
        self.hpu_graph = hpu_graph
        self.dry_run = dry_run

    def __enter__(self):
        _hpu().synchronize()
        gc.collect()  # free what we can before the graph keeps memory
        self.stream_ctx.__enter__()
        self.capture_stream.is_capture = True
        try:
            self.hpu_graph.capture_begin(self.dry_run)
        except BaseException:
            self.capture_stream.is_capture = False
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc_value, traceback):
        try:
            if exc_type is not None:
                self.hpu_graph._abort()
            else:
                self.hpu_graph.capture_end()
        finally:
            self.capture_stream.is_capture = False
            self.stream_ctx.__exit__(exc_type, exc_value, traceback)


def is_current_stream_capturing() -> bool:
    return bool(getattr(_hpu().current_stream(), "is_capture", False))


# ---------------------------------------------------------------------------------------
# make_graphed_callables


def _check_graphable(c, args) -> None:
    if isinstance(c, torch.nn.Module):
        assert not (c._backward_hooks or c._forward_hooks or c._forward_pre_hooks), (
            "Modules must not have hooks registered at the time they are passed. However, registering hooks "
            "on modules after passing them through make_graphed_callables is allowed.")
        assert all(not b.requires_grad for b in c.buffers()), (
            "In any :class:`~torch.nn.Module` passed to :func:`~make_graphed_callables`, only parameters may be "
            "trainable. All buffers must have ``requires_grad=False``.")
    assert all(isinstance(a, torch.Tensor) for a in args), (
        "In the beta API, sample_args for each callable must be a tuple of Tensors. Other types and "
        "keywordargs are not allowed.")


class _Graphed:
    """The forward and backward graphs of one callable and their static tensors."""

    def __init__(self, func, args: tuple, allow_unused_input: bool, asynchronous: bool,
                 disable_tensor_cache: bool, dry_run: bool):
        self.n_args = len(args)
        self.params = tuple(func.parameters()) if isinstance(func, torch.nn.Module) else ()
        self.surface = tuple(args) + self.params  # static inputs: user args, then parameters
        self.asynchronous = asynchronous
        self.no_cache = disable_tensor_cache
        self.fwd, self.bwd = HPUGraph(), HPUGraph()
        dry = True if disable_tensor_cache else dry_run
        with graph(self.fwd, dry_run=dry):
            if disable_tensor_cache:
                self.fwd.mark_user_inputs(list(args))
            outs = func(*args)
        self.output_was_tensor = isinstance(outs, torch.Tensor)
        self.outputs = (outs,) if self.output_was_tensor else tuple(outs)
        if dry:
            self.fwd.replay()  # the captured outputs get their values
        self.grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None for o in self.outputs)
        diff_inputs = tuple(i for i in self.surface if i.requires_grad)
        with graph(self.bwd, dry_run=dry):
            if disable_tensor_cache:
                self.bwd.mark_user_inputs([g for g in self.grad_outputs if g is not None] + list(args))
            grads = torch.autograd.grad(outputs=tuple(o for o in self.outputs if o.requires_grad),
                                        inputs=diff_inputs,
                                        grad_outputs=tuple(g for g in self.grad_outputs if g is not None),
                                        only_inputs=True, allow_unused=allow_unused_input,
                                        materialize_grads=allow_unused_input)
        it = iter(grads)
        self.grad_inputs = tuple(next(it) if i.requires_grad else None for i in self.surface)

    def forward(self, inputs: tuple) -> tuple:
        if self.no_cache:
            self.fwd.replayV3(list(inputs[:self.n_args]), self.asynchronous)
        else:
            for s, x in zip(self.surface[:self.n_args], inputs):
                if s.data_ptr() != x.data_ptr():
                    s.copy_(x)
            self.fwd.replay(self.asynchronous)
        return tuple(o.detach() for o in self.outputs)

    def backward(self, grads: tuple, saved: tuple) -> tuple:
        if self.no_cache:
            marked = [g for s, g in zip(self.grad_outputs, grads) if s is not None]
            self.bwd.replayV3(marked + list(saved), self.asynchronous)
        else:
            for s, g in zip(self.grad_outputs, grads):
                if s is not None and g is not None and s.data_ptr() != g.data_ptr():
                    s.copy_(g)
            self.bwd.replay(self.asynchronous)
        return tuple(g.detach() if g is not None else None for g in self.grad_inputs)


def _graphed_function(gr: _Graphed) -> Callable:
    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            if gr.no_cache:
                ctx.save_for_backward(*inputs[:gr.n_args])
            return gr.forward(inputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grads):
            return gr.backward(grads, tuple(ctx.saved_tensors) if gr.no_cache else ())

    def functionalized(*user_args):
        out = Graphed.apply(*(tuple(user_args) + gr.params))
        return out[0] if gr.output_was_tensor else out
    return functionalized


def make_graphed_callables(callables, sample_args, warmups: int = 0, allow_unused_input: bool = False,
                           asynchronous: bool = False, disable_tensor_cache: bool = False, dry_run: bool = False):
    """Graph callables (modules or functions) for training: a forward graph and a backward
    graph each, replayed inside an autograd Function. A module gets a new forward that uses
    the graphs while its `training` flag is what it was at capture."""
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    for c, args in zip(callables, sample_args):
        _check_graphable(c, args)
    hpu = _hpu()
    if warmups > 0:
        hpu.synchronize()
        for func, args in zip(callables, sample_args):
            surface = tuple(args) + (tuple(func.parameters()) if isinstance(func, torch.nn.Module) else ())
            for _ in range(warmups):
                outs = func(*args)
                outs = (outs,) if isinstance(outs, torch.Tensor) else outs
                torch.autograd.grad(outputs=outs, inputs=tuple(i for i in surface if i.requires_grad),
                                    grad_outputs=tuple(torch.empty_like(o) for o in outs),
                                    only_inputs=True, allow_unused=allow_unused_input)
            del outs
    hpu.synchronize()
    result = []
    for func, args in zip(callables, sample_args):
        gr = _Graphed(func, tuple(args), allow_unused_input, asynchronous, disable_tensor_cache, dry_run)
        graphed = _graphed_function(gr)
        if isinstance(func, torch.nn.Module):
            func.forward = _graphed_forward(func, func.training, graphed, func.forward)
            result.append(func)
        else:
            result.append(graphed)
    return result[0] if just_one else tuple(result)


def _graphed_forward(module, training: bool, graphed, orig_fwd):
    def forward(*user_args):
        if module.training == training:
            return graphed(*user_args)
        return orig_fwd(*user_args)
    return forward


# ---------------------------------------------------------------------------------------
# Caches keyed by the inputs: wrap_in_hpu_graph (inference) and ModuleCacher (training)


class CachedParams:
    """A cached graph with its static inputs and outputs."""

    def __init__(self, graph_inputs, graph_outputs, graph, out_tinfo_list=None, asynchronous=False):
        self.graph_inputs = graph_inputs
        self.graph_outputs = graph_outputs
        self.graph = graph
        self.out_tinfo_list = out_tinfo_list
        self.asynchronous = asynchronous
        # wrap_in_hpu_graph's replays copy the new inputs into these in one call with the
        # launch (HPUGraph._replay_copy); None: the bridge's copy_to, then replay().
        self.static_tensors: tuple[torch.Tensor, ...] | None = None


def _view_hash(t: torch.Tensor) -> int:
    """0 for a tensor that is not a view; else a hash of how it views its base."""
    if not t._is_view():
        return 0
    return hash((tuple(t.stride()), t.storage_offset(), t._base.shape if t._base is not None else None))


def input_hash(obj) -> int:
    """The cache key of a call's inputs: shapes (and view layouts) of tensors, values of
    everything else, and the autocast state. Dtypes and devices are not part of it."""
    return _input_hash(obj, torch.is_autocast_enabled("hpu"))


def _input_hash(obj, autocast: bool) -> int:
    # Tested in order of frequency (a call's inputs are mostly tuples of tensors); the
    # bridge's order (dict, list/tuple, tensor, dataclass, value) decides nothing here, as
    # no object is two of these.
    if isinstance(obj, torch.Tensor):
        return hash((obj.shape, _view_hash(obj), autocast))
    if isinstance(obj, (list, tuple)) and not isinstance(obj, torch.Size):
        return hash((tuple([_input_hash(el, autocast) for el in obj]), autocast))
    if isinstance(obj, (dict, UserDict)):
        return _input_hash(tuple(obj.items()), autocast)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _input_hash(tuple(getattr(obj, f.name) for f in dataclasses.fields(obj)), autocast)
    return hash((obj, autocast))


def copy_to(dst, src) -> None:
    """Copy src into the static tensors of dst (same structure), recursively."""
    assert type(dst) is type(src)
    if isinstance(dst, dict):
        for (dk, dv), (sk, sv) in zip(dst.items(), src.items()):
            assert dk == sk
            copy_to(dv, sv)
    elif isinstance(dst, (list, tuple)):
        for d, s in zip(dst, src):
            copy_to(d, s)
    elif dataclasses.is_dataclass(dst) and not isinstance(dst, type):
        for f in dataclasses.fields(dst):
            copy_to(getattr(dst, f.name), getattr(src, f.name))
    elif torch.is_tensor(dst):
        dst.copy_(src, non_blocking=True)


def get_user_input_tensor_list(inputs, tlist: tuple) -> tuple:
    """The tensors of a nested structure of inputs, in order, appended to tlist."""
    if isinstance(inputs, dict):
        for item in inputs.items():
            tlist = get_user_input_tensor_list(item, tlist)
    elif isinstance(inputs, (list, tuple)):
        for item in inputs:
            tlist = get_user_input_tensor_list(item, tlist)
    elif torch.is_tensor(inputs):
        tlist = tlist + (inputs,)
    return tlist


def extract_tensors(data) -> list[torch.Tensor]:
    """Every tensor inside data (tensors, lists, tuples, dicts, object attributes)."""
    if isinstance(data, torch.Tensor):
        return [data]
    out: list[torch.Tensor] = []
    if isinstance(data, (list, tuple)):
        for item in data:
            out.extend(extract_tensors(item))
    elif isinstance(data, dict):
        for v in data.values():
            out.extend(extract_tensors(v))
    elif hasattr(data, "__dict__"):
        for v in vars(data).values():
            out.extend(extract_tensors(v))
    return out


def get_tensor_info(tensor: torch.Tensor) -> dict:
    return {"shape": tensor.shape, "dtype": tensor.dtype, "device": tensor.device}


def _env_flag(name: str, default):
    v = os.environ.get(name)
    return default if v is None else v == "1"


def wrapped_hpugraph_forward(cache, stream, orig_fwd, args, kwargs, disable_tensor_cache, asynchronous,
                             dry_run, max_graphs, fast=None):
    """A wrapped forward: replay the graph cached for these inputs, or capture one. fast, a
    ReplayCache, learns the graphs of calls its C++ hit path can replay."""
    warmup_mode = kwargs.pop("warmup_mode", False) if kwargs else False
    if kwargs and kwargs.pop("bypass_hpu_graphs", False):
        return orig_fwd(*args, **kwargs)
    cache_tensors = kwargs.pop("cache_tensors_list", []) if kwargs else []
    inputs = (args, kwargs)
    h = input_hash(inputs)
    cached = cache.get(h)
    disable_tensor_cache = _env_flag("PT_HPUGRAPH_DISABLE_TENSOR_CACHE", disable_tensor_cache)
    if cached is None:
        if max_graphs is not None and len(cache) >= max_graphs:
            return orig_fwd(*args, **kwargs)
        cached = cache[h] = _capture_forward(stream, orig_fwd, args, kwargs, inputs, extract_tensors(cache_tensors),
                                             disable_tensor_cache, asynchronous,
                                             bool(disable_tensor_cache) if dry_run is None else dry_run)
        if fast is not None and not disable_tensor_cache:
            _remember(fast, cached, args, kwargs)
        return cached.graph_outputs
    if warmup_mode:
        from .. import core
        core.mark_step()
        return cached.graph_outputs
    if not disable_tensor_cache:
        # copy_to(graph_inputs, inputs) and replay, in one call when every tensor input
        # matches its static tensor (the same tensors in the same order: the key held).
        srcs = args if not kwargs and _all_tensors(args) else get_user_input_tensor_list(inputs, ())
        if cached.static_tensors is None or not cached.graph._replay_copy(srcs):
            copy_to(cached.graph_inputs, inputs)
            cached.graph.replay(cached.asynchronous)
        elif fast is not None:
            _remember(fast, cached, args, kwargs)
    else:
        tensors = get_user_input_tensor_list(inputs, ())
        matched = set(cached.graph.get_user_input_match_indices())
        copy_to(cached.graph_inputs, tuple(t for i, t in enumerate(tensors) if i not in matched))
        cached.graph.replayV3(list(tensors), cached.asynchronous)
    return cached.graph_outputs


def _remember(fast, cached: CachedParams, args: tuple, kwargs: dict) -> None:
    """Let the C++ hit path replay cached for calls like this one, when it can: positional
    hpu tensors that are not views (the key is then their shapes), a graph copying them
    into its static inputs, no random ops (whose draws Python makes)."""
    g = cached.graph
    rec = g._recipe
    if (kwargs or cached.static_tensors is None or rec is None or rec._generators or not _all_tensors(args)
            or any(a._is_view() or a.device.type != "hpu" for a in args)
            or len(g._static_inputs) != g._n_marked):
        return
    fast.remember(args, rec._fast, g._static_inputs, cached.graph_outputs)


def _all_tensors(args: tuple) -> bool:
    for a in args:
        if not isinstance(a, torch.Tensor):
            return False
    return True


def _capture_forward(stream, orig_fwd, args, kwargs, inputs, cache_tensors, disable_tensor_cache, asynchronous,
                     dry_run) -> CachedParams:
    """A cache miss of wrapped_hpugraph_forward: capture orig_fwd(*args, **kwargs) into a
    new graph; the outputs are the capture run's."""
    with _hpu().stream(stream):
        g = HPUGraph()
        g.capture_begin(dry_run=dry_run)
        tensors = get_user_input_tensor_list(inputs, ())
        try:
            if disable_tensor_cache:
                g.mark_user_inputs(list(tensors))
            outputs = orig_fwd(*args, **kwargs)
        except BaseException:
            g._abort()
            raise
        g.capture_end()
        if not disable_tensor_cache:
            cached = CachedParams(inputs, outputs, g, None, asynchronous)
            if all(t.device.type == "hpu" and t.dtype in _native.DTYPE_CODE for t in tensors):
                # The static tensors a hit copies into, in the order hits list their sources.
                cached.static_tensors = tensors
                g._copy_in(tensors)
            if dry_run:
                g.replay(asynchronous)
            return cached
        out_tensors = extract_tensors(outputs)
        g.mark_user_outputs(cache_tensors + out_tensors)
        matched = set(g.get_user_input_match_indices())
        graph_inputs = tuple(t for i, t in enumerate(tensors) if i not in matched)
        if dry_run:
            g.replayV3(list(tensors), asynchronous)
        return CachedParams(graph_inputs, outputs, g, [get_tensor_info(t) for t in out_tensors], asynchronous)


def _replay_cache():
    """The C++ hit path of a wrap_in_hpu_graph cache (csrc/hpu_recipe.cpp ReplayCache)."""
    return _recipe._recipe_c().ReplayCache()


def _clear(cache: dict, fast) -> Callable[[], None]:
    def clear_cache() -> None:
        fast.clear()
        cache.clear()
    return clear_cache


def wrap_in_hpu_graph_func(func, asynchronous=False, disable_tensor_cache=False, dry_run=None, max_graphs=None):
    """A function that captures an HPU graph per distinct input hash on first call and
    replays it afterwards (static outputs: each call overwrites the previous results)."""
    stream = _hpu().default_stream()
    cache: dict[int, CachedParams] = {}
    fast = _replay_cache()

    def forward(*args, **kwargs):
        out = fast.replay(args, kwargs)
        if out is None:
            out = wrapped_hpugraph_forward(cache, stream, func, args, kwargs, disable_tensor_cache,
                                           asynchronous, dry_run, max_graphs, fast)
        return out
    forward.clear_cache = _clear(cache, fast)
    return forward


def wrap_in_hpu_graph(module, asynchronous=False, disable_tensor_cache=False, dry_run=None, max_graphs=None):
    """Replace module.forward by one that captures an HPU graph per distinct input hash and
    replays it afterwards; adds module.clear_cache() and module.clear_inputs(). Returns the
    module. At most max_graphs graphs are kept; other inputs run the original forward."""
    stream = _hpu().default_stream()
    cache: dict[int, CachedParams] = {}
    fast = _replay_cache()
    orig_fwd = module.forward

    @wraps(orig_fwd)
    def forward(*args, **kwargs):
        # A call seen before replays in C++ (one call, the static outputs back); anything
        # else (a miss, keyword arguments, other dtypes, ...) takes the bridge's path.
        out = fast.replay(args, kwargs)
        if out is None:
            out = wrapped_hpugraph_forward(cache, stream, orig_fwd, args, kwargs, disable_tensor_cache,
                                           asynchronous, dry_run, max_graphs, fast)
        return out

    def clear_inputs():
        for c in cache.values():
            c.graph.clear_inputs()

    module.forward = forward
    module.clear_cache = _clear(cache, fast)
    module.clear_inputs = clear_inputs
    return module


class TensorPacker:
    """Packs a nested structure into a flat tuple of tensors plus metadata, and back."""

    def __init__(self, is_out_pack: bool = False, verbose: bool = False):
        self._is_out_pack = is_out_pack
        self._verbose = verbose

    class Index:
        def __init__(self, value: int):
            self.value = value

        def __repr__(self):
            return f"#{self.value:d}"

    def pack(self, outs):
        tensors: list[torch.Tensor] = []
        meta = self._pack(outs, tensors)
        return tuple(tensors), meta

    def _pack(self, obj, tensors):
        if torch.is_tensor(obj):
            tensors.append(obj)
            return self.Index(len(tensors) - 1)
        if isinstance(obj, (tuple, list, dict)):
            return _rebuild(obj, lambda x: self._pack(x, tensors))
        if self._verbose:
            print(f"[WARNING] Variable of type {type(obj)} will not be dynamic")
        return obj

    def unpack(self, tensors, metadata):
        return self._unpack(tensors, metadata)

    def _unpack(self, tensors, meta):
        if isinstance(meta, self.Index):
            return tensors[meta.value]
        if isinstance(meta, (tuple, list, dict)):
            return _rebuild(meta, lambda x: self._unpack(tensors, x))
        return meta


def _rebuild(obj, fn):
    """A tuple, list or dict with fn applied to each element (lists and dicts are copied,
    so their own type is kept)."""
    if isinstance(obj, tuple):
        return tuple(fn(x) for x in obj)
    out = copy.copy(obj)
    for k in (range(len(obj)) if isinstance(obj, list) else obj):
        out[k] = fn(obj[k])
    return out


class GraphModel(torch.nn.Module):
    """One training graph of ModuleCacher: the model's forward over packed tensor inputs,
    graphed with make_graphed_callables."""

    def __init__(self, model, allow_unused_input=False, asynchronous=False, disable_tensor_cache=False,
                 dry_run=False):
        super().__init__()
        self.model = model
        self.input_packer = TensorPacker()
        self.input_meta = None
        self.output_packer = TensorPacker(is_out_pack=True)
        self.output_meta = None
        self.assert_not_dataparallel()
        self.func_parameters = self.process_function_signature(self.model.forward)
        self.allow_unused_input = allow_unused_input
        self.asynchronous = asynchronous
        self.disable_tensor_cache = disable_tensor_cache
        self.dry_run = dry_run

    def forward(self, *args):
        full_args = self.input_packer.unpack(args, self.input_meta)
        outs = self.model(**full_args)
        out_tensors, self.output_meta = self.output_packer.pack(outs)
        return out_tensors

    def graph_forward(self, *args, **kwargs):
        full_args = GraphModel.get_full_args(self.func_parameters, *args, **kwargs)
        tensor_args, _ = self.input_packer.pack(full_args)
        out_tensors = self.hpu_graph(*tensor_args)
        return self.output_packer.unpack(out_tensors, self.output_meta)

    def init_hpu_graph(self, *args, **kwargs):
        full_args = GraphModel.get_full_args(self.func_parameters, *args, **kwargs)
        self.input_id = input_hash(full_args)
        tensor_args, self.input_meta = self.input_packer.pack(full_args)
        self.allow_unused_input = True
        self.hpu_graph = make_graphed_callables(self, tensor_args, allow_unused_input=self.allow_unused_input,
                                                asynchronous=self.asynchronous,
                                                disable_tensor_cache=self.disable_tensor_cache, dry_run=self.dry_run)

    def assert_not_dataparallel(self):
        assert not isinstance(self.model, (torch.nn.parallel.DataParallel,
                                           torch.nn.parallel.DistributedDataParallel)), (
            "Use DataParallel/DistributedDataParallel only after wrapping with ModuleCacher")

    @staticmethod
    def process_function_signature(function):
        params = collections.OrderedDict(inspect.signature(function).parameters)
        for key in list(params):
            kind = params[key].kind
            assert kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL), \
                f"Unsupported argument type : {kind}"
            if kind == inspect.Parameter.VAR_KEYWORD:
                print("[WARNING] Variable keyword arguments will not be supported.")
                del params[key]
                continue
            params[key] = params[key].default
        return params

    @staticmethod
    def get_full_args(forward_params, *args, **kwargs):
        full = copy.copy(forward_params)
        for i, key in enumerate(full):
            if i == len(args):
                break
            full[key] = args[i]
        full.update(kwargs)
        return full

    @staticmethod
    def full_input_hash(forward_params, *args, **kwargs):
        return input_hash(GraphModel.get_full_args(forward_params, *args, **kwargs))


class ModuleCacher(torch.nn.Module):
    """Training graphs per input hash: `ModuleCacher(max_graphs)(model=..., inplace=...)`
    returns the model with a forward that replays a graph (forward and backward) for inputs
    it has seen, captures one for new inputs while fewer than max_graphs are cached, and
    runs the original forward otherwise (or when not training, without grad, or in eager
    mode)."""

    def __init__(self, max_graphs: int = 10):
        super().__init__()
        self.max_graphs = max_graphs
        self.model_dict: dict[int, GraphModel] = {}
        self.input_count_dict: dict[int, int] = {}
        self.priority_keys: list[int] = []
        self.is_capturing = False
        self.iteration_cnt = -1
        self.use_lazy_mode = is_lazy()
        self.hpugraph_tracing = False
        self.cached_hits_dict: dict[int, int] = {}
        self.uncached_train_hits = 0
        self.uncached_eval_hits = 0
        self.forward_cnt = 0
        self.set_iterations_call_cnt = 0
        self.disable_tensor_cache = False
        self.dry_run = False
        self.inplace = True

    def set_iteration_count(self, iter_num):
        self.forward_cnt = iter_num
        self.set_iterations_call_cnt += 1

    def is_hpugraph_tracing(self):
        return self.hpugraph_tracing

    def cache_replay(self, input_id, *args, **kwargs):
        self.cached_hits_dict[input_id] = self.cached_hits_dict.get(input_id, 0) + 1
        return self.model_dict[input_id].graph_forward(*args, **kwargs)

    def cache_insert(self, input_id, *args, **kwargs):
        self.hpugraph_tracing = True
        try:
            gm = GraphModel(self.orig_model, self.allow_unused_input, self.asynchronous,
                            self.disable_tensor_cache, self.dry_run)
            gm.init_hpu_graph(*args, **kwargs)
            self.model_dict[input_id] = gm
            return self.cache_replay(input_id, *args, **kwargs)
        finally:
            self.hpugraph_tracing = False

    def _input_id(self, *args, **kwargs):
        input_id = GraphModel.full_input_hash(self.forward_params, *args, **kwargs)
        if self.have_grad_accumulation and self.forward_cnt == 0:
            input_id = input_hash((input_id, self.forward_cnt + 1))
        return input_id

    def _uncached(self, *args, **kwargs):
        if self.model.training:
            self.uncached_train_hits += 1
        else:
            self.uncached_eval_hits += 1
        return self.model.orig_forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        self.iteration_cnt += 1
        input_id = self._input_id(*args, **kwargs)
        use_cache = self.model.training and torch.is_grad_enabled() and self.use_lazy_mode
        if self.verbose and self.iteration_cnt % self.log_frequency == 0:
            self.log_stats()
        if use_cache:
            if input_id in self.model_dict:
                return self.cache_replay(input_id, *args, **kwargs)
            if len(self.model_dict) < self.max_graphs:
                return self.cache_insert(input_id, *args, **kwargs)
        return self._uncached(*args, **kwargs)

    def capture_start(self):
        self.is_capturing = True

    def record(self, input_id):
        self.input_count_dict[input_id] = self.input_count_dict.get(input_id, 0) + 1

    def capture_end(self):
        counts = self.input_count_dict
        self.priority_keys = sorted(counts, key=lambda k: counts[k], reverse=True)[:self.max_graphs]
        self.is_capturing = False
        if self.verbose:
            self.log_stats()
        self.input_count_dict = {}

    def forward_lfs(self, *args, **kwargs):
        self.iteration_cnt += 1
        input_id = self._input_id(*args, **kwargs)
        use_cache = (self.model.training and torch.is_grad_enabled() and self.use_lazy_mode
                     and not self.is_capturing)
        if self.is_capturing:
            self.record(input_id)
        if self.verbose and self.iteration_cnt % self.log_frequency == 0:
            self.log_stats()
        if use_cache:
            if input_id in self.model_dict:
                return self.cache_replay(input_id, *args, **kwargs)
            if input_id in self.priority_keys:
                return self.cache_insert(input_id, *args, **kwargs)
        return self._uncached(*args, **kwargs)

    def __call__(self, model, use_lfu=False, inplace=True, allow_unused_input=False, asynchronous=False,
                 have_grad_accumulation=False, log_frequency=100, verbose=False, disable_tensor_cache=False,
                 dry_run=False):
        model.is_hpugraph_tracing = self.is_hpugraph_tracing
        self.inplace = inplace
        if not inplace:
            model = copy.copy(model)
        self.orig_model = copy.copy(model)
        self.forward_params = GraphModel.process_function_signature(self.orig_model.forward)
        self.model = model
        self.use_lfu = use_lfu
        self.model.orig_forward = self.model.forward
        self.model.forward = self.forward_lfs if use_lfu else self.forward
        self.allow_unused_input = allow_unused_input
        self.asynchronous = asynchronous
        self.have_grad_accumulation = have_grad_accumulation
        self.model.set_iteration_count = self.set_iteration_count
        self.model.capture_start = self.capture_start
        self.model.capture_end = self.capture_end
        self.verbose = verbose
        self.log_frequency = log_frequency
        self.disable_tensor_cache = _env_flag("PT_HPUGRAPH_DISABLE_TENSOR_CACHE", disable_tensor_cache)
        self.dry_run = _env_flag("PT_HPUGRAPH_ENABLE_DRY_RUN", dry_run)
        return self.model

    def log_stats(self):
        total_cached = sum(self.cached_hits_dict.values())
        lines = [
            "HPU Graph Statistics", "  Configs",
            f"    Max graphs                :- {self.max_graphs}",
            f"    LFU Cache                 :- {self.use_lfu}",
            f"    Async execution config    :- {self.asynchronous}",
            f"    Grad accumulation config  :- {self.have_grad_accumulation}",
            f"    Set iteration calls       :- {self.set_iterations_call_cnt}",
            "  Cache info ",
            f"    No. of HPUGraphs cached   :- {len(self.model_dict)}",
            f"    Priority keys             :- {self.priority_keys}",
            f"    Input hash v. cached hits :- {self.cached_hits_dict}",
            f"    Total cached hits         :- {total_cached}",
            f"    Uncached train hits       :- {self.uncached_train_hits}",
            f"    Uncached eval hits        :- {self.uncached_eval_hits}",
            f"    Total forwards executed   :- {total_cached + self.uncached_train_hits + self.uncached_eval_hits}",
        ]
        if self.use_lfu and self.input_count_dict:
            lines.append(f"    Input hash v. count         : {self.input_count_dict}")
        print("\n".join(lines))

    def __del__(self):
        if getattr(self, "verbose", False):
            self.log_stats()
