"""Recorded graphs ("recipes"): capture a function's hpu ops once, run them again with one
call into Go (bridge/capture.go).

    rec, outs = capture(fn, inputs)   # runs fn(*inputs) once, recording every op
    outs = rec.run(inputs)            # the same ops over new inputs, no per-op Python

The runtime shared by the torch.compile backend (each compiled FX partition) and HPU
graphs. A capture works in eager and in lazy mode: the ops run at once while they are
recorded, so capture returns fn's real outputs. The recorded graph is compiled with the
lazy engine's passes (dead-code removal, elementwise fusion, in-place buffer reuse) and
cached by its canonical hash in the recipe cache (the graph_compilation and recipe_cache
metrics count it). A step marker during the capture (mark_step, a host read, synchronize)
ends a segment, compiled on its own; a run runs the segments back to back in one call.

At a run, inputs are rebound (in-place writes land in the new inputs), outputs get fresh
storages (views of inputs or of other outputs come back as the same views of the new
storages), intermediates live in the recipe's own scratch, and memory that is none of
these (a constant made outside fn, a parameter it closes over) stays bound to the captured
storage, which the recipe keeps alive. Random ops draw fresh (seed, offset) pairs from the
hpu generator at every run, as the same ops run eagerly would.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from array import array
from typing import Any, Callable, Sequence

import torch

from . import _native
from ._ops import fallback as _fallback
from ._ops import random_ops as _random_ops
from .hpu import random as _hpu_random

__all__ = ["NotCapturable", "Recipe", "Session", "capture"]


class NotCapturable(RuntimeError):
    """fn did something a recipe cannot hold (a CPU fallback, a host read such as .item()
    or .cpu(), a data-dependent output shape, an op without a native kernel).

    fn has run to completion (its side effects happened once); its results are in
    `outputs`, so a caller need not run it again."""

    def __init__(self, reason: str, outputs: Any = None):
        super().__init__(reason)
        self.reason = reason
        self.outputs = outputs


_capture_lock = threading.Lock()


@functools.cache
def _lib() -> ctypes.CDLL:
    """The Go core with the capture entry points' signatures set (once)."""
    lib = _native.load()
    i64p = ctypes.POINTER(ctypes.c_int64)
    sigs = {
        "hpusim_capture_begin": ([ctypes.c_int, ctypes.c_int], ctypes.c_int),
        "hpusim_capture_abort": ([], ctypes.c_int),
        "hpusim_capture_poison": ([ctypes.c_char_p], ctypes.c_int),
        "hpusim_capture_end": ([ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_int, ctypes.c_void_p, i64p, i64p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_char_p, ctypes.c_int], ctypes.c_int),
        "hpusim_recipe_free": ([ctypes.c_int64], ctypes.c_int),
        "hpusim_recipe_set_solo": ([ctypes.c_int64, ctypes.c_int], ctypes.c_int),
        "hpusim_stream_pending": ([], ctypes.c_int),
        "hpusim_stream_runs": ([], ctypes.c_int64),
        "hpusim_async_min_us": ([ctypes.c_int64], ctypes.c_int64),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def stream_pending() -> bool:
    """Whether recipes launched on the eager-mode device stream have not finished
    (bridge/stream.go): device memory they use must not be touched but through an op."""
    return bool(_lib().hpusim_stream_pending())


def stream_runs() -> int:
    """How many asynchronous recipe runs the device stream has completed."""
    return int(_lib().hpusim_stream_runs())


def set_async_min_us(us: int) -> int:
    """The shortest run (in us, timed over a recipe's first runs) that makes a recipe
    launched on the device stream (HPUSIM_ASYNC_MIN_US, default 30; recipes decided
    afterwards). Returns the previous value."""
    return int(_lib().hpusim_async_min_us(int(us)))


def _recipe_c():
    """The C++ half of a recipe run (csrc/hpu_recipe.cpp)."""
    return _native.glue_module("habana_frameworks.torch._recipe_C")


def _addr(a: array) -> int | None:
    return a.buffer_info()[0] if len(a) else None


def _view_span(t: torch.Tensor) -> tuple[int, int]:
    """The byte range [lo, hi) of memory a strided view can touch."""
    es = t.element_size()
    lo = hi = t.data_ptr()
    if t.numel() == 0:
        return lo, hi
    for n, s in zip(t.shape, t.stride()):
        if s >= 0:
            hi += (n - 1) * s * es
        else:
            lo += (n - 1) * s * es
    return lo, hi + es


class Session:
    """An open capture: between begin() and end() (or abort()), every hpu op is recorded.

    CPU fallbacks make the capture unusable (on_fallback, if given, is called first and
    may raise); random draws are logged so that runs draw alike. dry_run records without
    running; host_reads lets host reads run unrecorded (HPU graphs) instead of making the
    capture unusable. One session at a time per process."""

    def __init__(self, on_fallback: Callable[[Any], None] | None = None, dry_run: bool = False,
                 host_reads: bool = False):
        self.generators: list[torch.Generator] = []
        self.on_fallback = on_fallback
        self.dry_run = dry_run
        self.host_reads = host_reads
        self._open = False

    def begin(self) -> None:
        if not _capture_lock.acquire(blocking=False):
            raise RuntimeError("a capture is already in progress")
        try:
            _native.check(_lib().hpusim_capture_begin(int(self.dry_run), int(self.host_reads)))
        except BaseException:
            _capture_lock.release()
            raise
        self._open = True
        _fallback.capture_hook = self._fallback
        _random_ops.capture_hook = self._draw

    def _close(self) -> None:
        _fallback.capture_hook = None
        _random_ops.capture_hook = None
        self._open = False
        _capture_lock.release()

    def abort(self) -> None:
        """Stop recording and drop the capture."""
        if self._open:
            try:
                _native.check(_lib().hpusim_capture_abort())
            finally:
                self._close()

    def end(self, inputs: Sequence[Any], outs: Any) -> Recipe:
        """Stop recording and compile: inputs are rebound at each run, the hpu tensors in
        outs (a tensor or a list/tuple) get fresh storages. Raises NotCapturable."""
        if not self._open:
            raise RuntimeError("no capture in progress")
        self._close()
        return _finish(_lib(), self, list(inputs), outs)

    def _fallback(self, op) -> None:
        if self.on_fallback is not None:
            self.on_fallback(op)
        reason = f"CPU fallback of {op._schema.name} during capture"
        _native.check(_lib().hpusim_capture_poison(reason.encode()))

    def _draw(self, generator) -> None:
        self.generators.append(generator if generator is not None else _hpu_random.default_generators[0])


class Recipe:
    """A captured graph, runnable over new inputs with `run` (one call into Go)."""

    def __init__(self, handle: int, stats: dict[str, Any]):
        self._handle = handle
        self.stats = stats
        self._inputs: list[tuple] = []          # per input: check data (see _check_inputs)
        self._alias_checks: list[tuple[int, int, int]] = []  # (i, j, byte distance)
        self._unconfined: list[tuple[int, int]] = []  # (input, storage offset) that must match
        self._structure: Any = None             # list / tuple / single tensor
        self._fast: Any = None                  # the C++ runner (_recipe_C.RecipeCall)
        self._generators: list[tuple[torch.Generator, int]] = []  # runs of draws per generator
        self.used_inputs: list[int] = []  # indices of the inputs whose storage the graph touches

    def __del__(self):
        h, self._handle = getattr(self, "_handle", 0), 0
        fast = getattr(self, "_fast", None)
        if fast is not None:
            fast.release()  # a ReplayCache may still hold it: its calls then return None
        if h:
            try:
                _lib().hpusim_recipe_free(h)
            except Exception:  # interpreter shutdown
                pass

    def _check_inputs(self, inputs: Sequence[Any]) -> None:
        if len(inputs) != len(self._inputs):
            raise ValueError(f"recipe expects {len(self._inputs)} inputs, got {len(inputs)}")
        for i, (spec, x) in enumerate(zip(self._inputs, inputs)):
            if spec[0] is None:
                if isinstance(x, torch.Tensor) or x != spec[1]:
                    raise ValueError(f"recipe input {i}: expected the value {spec[1]!r} it was captured with, got {x!r}")
                continue
            dtype, shape, stride = spec
            if (not isinstance(x, torch.Tensor) or x.dtype != dtype or x.shape != shape or x.stride() != stride
                    or x.device.type != "hpu"):
                got = (f"{x.dtype} {tuple(x.shape)} stride {x.stride()} on {x.device}"
                       if isinstance(x, torch.Tensor) else type(x).__name__)
                raise ValueError(f"recipe input {i}: expected an hpu tensor {dtype} {tuple(shape)} "
                                 f"stride {stride} as at capture, got {got}")
        for i, off in self._unconfined:
            if inputs[i].storage_offset() != off:
                raise ValueError(f"recipe input {i}: expected storage offset {off} as at capture, "
                                 f"got {inputs[i].storage_offset()}")
        for i, j, dist in self._alias_checks:
            if inputs[j].data_ptr() - inputs[i].data_ptr() != dist:
                raise ValueError(f"recipe inputs {i} and {j} shared a storage at capture; they must again")

    def set_solo(self, on: bool) -> None:
        """Run this recipe's kernels on the calling thread only (on) or let large ones
        split over the kernel worker pool (off, the default). Results are the same."""
        if not self._handle:
            raise RuntimeError("recipe was released")
        _native.check(_lib().hpusim_recipe_set_solo(self._handle, int(bool(on))))

    def run(self, inputs: Sequence[Any]) -> Any:
        """Run the recipe over new inputs (same dtypes, shapes and strides as at capture;
        anything else raises ValueError naming the input). Returns fresh outputs, shaped as
        fn's return value. A failing op raises RuntimeError here, naming it."""
        return self._call(inputs, False)

    def launch(self, inputs: Sequence[Any]) -> Any:
        """As run, but in lazy mode the run is queued on the lazy worker after the pending
        graph and the call returns at once (a failure is raised at the next mark_step or
        host read); in eager mode it is run."""
        return self._call(inputs, True)

    def set_copy_in(self, statics: Sequence[torch.Tensor]) -> None:
        """Declare the tensors copy_launch fills before a launch (an HPU graph's static
        inputs, which the recipe runs over as bound memory)."""
        copy_op = _native.op_id("copy")
        for t in statics:
            self._fast.add_copy_in(t, copy_op)

    def copy_launch(self, srcs: Sequence[torch.Tensor], inputs: Sequence[Any]) -> Any:
        """Copy srcs[k] into the k-th tensor of set_copy_in, then launch over inputs: one
        call. Returns None, having done nothing, when a source is not an hpu tensor of its
        static tensor's dtype, shape and strides (copy_ then launch instead)."""
        flat = self._in_cpp(self._fast.copy_launch, srcs, inputs)
        return None if flat is None else _restructure(self._structure, flat)

    def _in_cpp(self, method: Callable[..., Any], *args: Any) -> Any:
        """Call a RecipeCall method with args and, when the recipe draws random numbers, a
        fresh (seed, offset) pair per random op from the ops' generators."""
        if not self._handle:
            raise RuntimeError("recipe was released")
        if not self._generators:
            return method(*args)
        parts = [torch.empty(2 * k, dtype=torch.int64).random_(generator=g) for g, k in self._generators]
        rnd = torch.cat(parts) if len(parts) > 1 else parts[0]
        return method(*args, rnd.data_ptr(), rnd.numel())

    def _call(self, inputs: Sequence[Any], launch: bool) -> Any:
        # The checks, output allocation and the call into Go happen in C++ (csrc/hpu_recipe.cpp).
        flat = self._in_cpp(self._fast.run, inputs, launch)
        if flat is None:
            self._check_inputs(inputs)  # raises the ValueError that says what differs
            raise ValueError("recipe inputs do not match the capture")
        return _restructure(self._structure, flat)


def _flatten(outs: Any) -> tuple[Any, list[Any]]:
    if isinstance(outs, (list, tuple)):
        return type(outs), list(outs)
    return None, [outs]


def _restructure(structure: Any, flat: list[Any]) -> Any:
    if structure is None:
        return flat[0]
    if structure is list:
        return flat
    if structure is tuple:
        return tuple(flat)
    if hasattr(structure, "_fields"):  # a namedtuple takes its fields as arguments
        return structure._make(flat)
    return structure(flat)


def capture(fn: Callable[..., Any], inputs: Sequence[Any], *,
            on_fallback: Callable[[Any], None] | None = None) -> tuple[Recipe, Any]:
    """Run fn(*inputs) once on hpu, recording every op, and compile the recording.

    Returns (recipe, fn's outputs). Raises NotCapturable(reason) if fn did something a
    recipe cannot hold; fn has then run to completion and its outputs are in the
    exception's `outputs`. on_fallback(op), if given, is called at a CPU fallback during
    the capture."""
    inputs = list(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.device.type != "hpu":
            raise ValueError(f"recipe input {i} is on {x.device}, not hpu")
    session = Session(on_fallback)
    session.begin()
    try:
        outs = fn(*inputs)
    except BaseException:
        session.abort()
        raise
    return session.end(inputs, outs), outs


def _finish(lib: ctypes.CDLL, hooks: Session, inputs: list[Any], outs: Any) -> Recipe:
    structure, flat = _flatten(outs)
    tensors_in = [(i, x) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    in_base = array("q", [x.untyped_storage().data_ptr() for _, x in tensors_in])
    in_ptr = array("q", [x.data_ptr() for _, x in tensors_in])
    spans = [_view_span(x) for _, x in tensors_in]
    in_lo = array("q", [s[0] for s in spans])
    in_hi = array("q", [s[1] for s in spans])
    in_storage = {}
    for k, (i, x) in enumerate(tensors_in):
        in_storage.setdefault(in_base[k], i)
    out_bases: list[int] = []
    for o in flat:
        if isinstance(o, torch.Tensor) and o.device.type == "hpu":
            b = o.untyped_storage().data_ptr()
            if b and b not in in_storage and b not in out_bases:
                out_bases.append(b)
    out_base = array("q", out_bases)
    handle = ctypes.c_int64(0)
    info = (ctypes.c_int64 * 8)()
    confined = array("q", [0] * len(tensors_in))
    bound = array("q", [0] * len(out_bases))
    rid = ctypes.create_string_buffer(64)
    rc = lib.hpusim_capture_end(len(tensors_in), _addr(in_base), _addr(in_ptr), _addr(in_lo), _addr(in_hi),
                                len(out_base), _addr(out_base), ctypes.byref(handle), info,
                                _addr(confined), _addr(bound), rid, len(rid))
    if rc != 0:
        raise NotCapturable(_native.last_error(), outs)
    keys = ("nodes", "steps", "fused", "removed_dead", "virtual_intermediates", "reused_buffers", "random_ops",
            "segments")
    stats = dict(zip(keys, (int(v) for v in info)))
    stats["recipe_id"] = rid.value.decode()
    rec = Recipe(handle.value, stats)
    if stats["random_ops"] != len(hooks.generators):
        raise NotCapturable(f"{stats['random_ops']} random ops recorded but {len(hooks.generators)} "
                            "random draws made", outs)
    for g in hooks.generators:
        if rec._generators and rec._generators[-1][0] is g:
            rec._generators[-1] = (g, rec._generators[-1][1] + 1)
        else:
            rec._generators.append((g, 1))
    device = next((x.device for _, x in tensors_in), None) or next(
        (o.device for o in flat if isinstance(o, torch.Tensor) and o.device.type == "hpu"), torch.device("hpu"))
    fast = _recipe_c().RecipeCall(handle.value, device.index or 0)
    rec._fast = fast
    unconfined = {i for k, (i, _) in enumerate(tensors_in) if not confined[k] & 1}
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            rec._inputs.append((x.dtype, x.shape, x.stride()))
            fast.add_tensor_input(x, i in unconfined)
        else:
            rec._inputs.append((None, x))
            fast.add_value_input(x)
    seen: dict[int, int] = {}
    rec.used_inputs = [i for k, (i, _) in enumerate(tensors_in) if confined[k] & 2]
    for k, (i, x) in enumerate(tensors_in):
        if i in unconfined:
            rec._unconfined.append((i, x.storage_offset()))
        first = seen.setdefault(in_base[k], k)
        if first != k:
            j0 = tensors_in[first][0]
            rec._alias_checks.append((j0, i, in_ptr[k] - in_ptr[first]))
            fast.add_alias_check(j0, i, in_ptr[k] - in_ptr[first])
    # Outputs: fresh storages are allocated per run; a tensor that fills its storage
    # exactly is allocated as itself (one call), anything else as a byte buffer it views.
    slot_users: dict[int, list[torch.Tensor]] = {}
    for o in flat:
        if isinstance(o, torch.Tensor) and o.device.type == "hpu":
            b = o.untyped_storage().data_ptr()
            if b in out_bases and not bound[out_bases.index(b)]:
                slot_users.setdefault(b, []).append(o)
    slot_index: dict[int, int] = {}
    slot_tensor: list[torch.Tensor | None] = []  # per slot: the output allocated as itself
    for k, b in enumerate(out_bases):
        slot_tensor.append(None)
        if bound[k]:
            # Pre-existing memory the recipe writes in place: it is not rebound, so the
            # slot's pointer is the captured one.
            fast.add_slot_bound()
            continue
        users = slot_users[b]
        nbytes = users[0].untyped_storage().nbytes()
        whole = [u for u in users if _fills(u, nbytes)]
        if whole:
            slot_tensor[k] = whole[0]
            fast.add_slot_like(whole[0])
        else:
            fast.add_slot_bytes(nbytes)
        slot_index[b] = k
    by_id: dict[int, int] = {}
    for n, o in enumerate(flat):
        if not isinstance(o, torch.Tensor) or o.device.type != "hpu":
            fast.add_out_const(o)
            continue
        if id(o) in by_id:
            fast.add_out_same(by_id[id(o)])
            continue
        by_id[id(o)] = n
        b = o.untyped_storage().data_ptr()
        if b in in_storage:
            i = in_storage[b]
            x = inputs[i]
            delta = (o.storage_offset() * o.element_size() - x.storage_offset() * x.element_size()) // o.element_size()
            fast.add_out_input_view(i, o, delta)
        elif b in slot_index:
            k = slot_index[b]
            u = slot_tensor[k]
            whole = u is not None and o.dtype == u.dtype and o.shape == u.shape and o.stride() == u.stride() \
                and o.storage_offset() == 0
            fast.add_out_fresh(k, whole, o)
        else:
            fast.add_out_const(o)  # bound memory (or empty): the captured tensor itself
    rec._structure = structure
    return rec


def _fills(t: torch.Tensor, nbytes: int) -> bool:
    """Whether t, allocated with empty_strided(shape, stride), has exactly this storage."""
    if t.storage_offset() != 0:
        return False
    if t.numel() == 0:
        return nbytes == 0
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s > 0)
    return span * t.element_size() == nbytes and all(s >= 0 for s in t.stride())
