"""Host scalar math folded on the host, once per call, into one device tensor.

An optimizer without `capturable` keeps its step counts as host 0-dim tensors, and its
compiled step derives ~12 scalars per parameter from them (AdamW's bias corrections:
pow, rsub, sqrt, reciprocal, mul, neg, div). pass_wa_mixed_devices moves that math into
the recipe, where each 0-dim op is a Go step with its own fixed cost (48 of the MLP
optimizer recipe's 132 steps). Here the whole host-only subgraph is instead evaluated on
the host, and its results, the scalars the recipe actually reads, are copied to the device
in one tensor that the recipe indexes. The program is generated Python over floats, each
result rounded to the graph's dtype as torch's CPU kernels round it (numbers are cast to
that dtype first, as torch casts them): for float32, +, -, *, / and sqrt computed in double
and rounded once are exactly float32's; pow may differ from torch's powf by an ulp. A call
that meets x/0, a domain error or an overflow is evaluated again with numpy scalars of the
dtype, which give IEEE's inf and nan as torch does. A graph with any op outside the table
below, or of another dtype, keeps the recipe path.
"""
from __future__ import annotations

import ctypes
import math
import struct
import threading
from typing import Any, Callable

import numpy as np
import torch

from ... import _recipe
from .logger import logger

aten = torch.ops.aten


def _alpha(kwargs: dict) -> Any:
    return kwargs.get("alpha", 1)


def _add(a: Any, b: Any, alpha: Any) -> Any:
    return a + b if alpha == 1 else a + alpha * b


# aten overload -> f(args, kwargs) over numpy scalars; only kwargs named in _KWARGS allowed.
_OPS: dict[Any, Callable[[tuple, dict], Any]] = {
    aten.add.Tensor: lambda a, k: _add(a[0], a[1], _alpha(k)),
    aten.add.Scalar: lambda a, k: _add(a[0], a[1], _alpha(k)),
    aten.sub.Tensor: lambda a, k: _add(a[0], -a[1], _alpha(k)),
    aten.sub.Scalar: lambda a, k: _add(a[0], -a[1], _alpha(k)),
    aten.rsub.Tensor: lambda a, k: _add(a[1], -a[0], _alpha(k)),
    aten.rsub.Scalar: lambda a, k: _add(a[1], -a[0], _alpha(k)),
    aten.mul.Tensor: lambda a, k: a[0] * a[1],
    aten.mul.Scalar: lambda a, k: a[0] * a[1],
    aten.div.Tensor: lambda a, k: a[0] / a[1],
    aten.div.Scalar: lambda a, k: a[0] / a[1],
    aten.pow.Scalar: lambda a, k: a[0] ** a[1],
    aten.pow.Tensor_Scalar: lambda a, k: a[0] ** a[1],
    aten.pow.Tensor_Tensor: lambda a, k: a[0] ** a[1],
    aten.sqrt.default: lambda a, k: np.sqrt(a[0]),
    aten.reciprocal.default: lambda a, k: a[0].dtype.type(1) / a[0],
    aten.neg.default: lambda a, k: -a[0],
}
_KWARGS = {"alpha"}
# The same ops as Python expressions over floats ({0}, {1}: operands, {al}: alpha).
_SOURCE: dict[Any, str] = {
    aten.add.Tensor: "{0} + {al}{1}", aten.add.Scalar: "{0} + {al}{1}",
    aten.sub.Tensor: "{0} - {al}{1}", aten.sub.Scalar: "{0} - {al}{1}",
    aten.rsub.Tensor: "{1} - {al}{0}", aten.rsub.Scalar: "{1} - {al}{0}",
    aten.mul.Tensor: "{0} * {1}", aten.mul.Scalar: "{0} * {1}",
    aten.div.Tensor: "{0} / {1}", aten.div.Scalar: "{0} / {1}",
    aten.pow.Scalar: "_pow({0}, {1})", aten.pow.Tensor_Scalar: "_pow({0}, {1})",
    aten.pow.Tensor_Tensor: "_pow({0}, {1})",
    aten.sqrt.default: "_sqrt({0})", aten.reciprocal.default: "1.0 / {0}", aten.neg.default: "-{0}",
}
_F32 = struct.Struct("f")
_NUMPY = {torch.float32: np.float32, torch.float64: np.float64}


class HostScalarProgram:
    """Callable graph node: (host 0-dim tensors...) -> 1-D hpu tensor of the program's
    results. Steps are (slot, fn, args, kwargs), args naming input slots or numbers."""

    def __init__(self, num_inputs: int, steps: list[tuple[int, Callable, tuple, dict]], results: list[int],
                 dtype: torch.dtype, device: torch.device, targets: list[Any]):
        self.num_inputs = num_inputs
        self.steps = steps
        self.results = results
        self.dtype = dtype
        self.device = device
        self.__name__ = f"host_scalar_program_{len(steps)}_ops"
        self.targets = targets
        self._program = _generate(num_inputs, steps, results, targets, round_f32=dtype == torch.float32)
        # The results' bytes, packed in one call (float32: the program rounded each value
        # to float32 already, so packing is exact; inf and nan pack as they are).
        self._pack = struct.Struct(f"={len(results)}{'f' if dtype == torch.float32 else 'd'}").pack
        # Set by fold_host_scalar_math when only recipes read the results, and only as
        # values (no view of them can leave a recipe): once no launched recipe may still
        # read it (bridge/stream.go), each call may rewrite one device buffer instead of
        # allocating a tensor (an allocation through the dispatcher costs ~13 us inside a
        # training loop). One buffer per thread that made it; other threads get a new
        # tensor each call.
        self.reuse_output = False
        self._buf: torch.Tensor | None = None
        self._buf_thread = 0
        self._buf_ptr = 0

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        try:
            values = self._program(*[_host_value(t) for t in inputs])
        except (ArithmeticError, ValueError, struct.error):
            values = self._ieee_values(inputs)
        if not values:
            return torch.empty(0, dtype=self.dtype, device=self.device)
        packed = self._pack(*values)
        if self.device.type == "hpu" and not _recipe._capture_lock.locked():
            # Device memory is host memory here: the results are written into device
            # memory in one memmove, with no copy op through the dispatcher. A capture (HPU
            # graph, recipe) must see the copy as an op, so it keeps the copy below.
            buf = self._buf
            # A launched recipe may still read the buffer (bridge/stream.go): a new tensor then.
            if buf is None or self._buf_thread != threading.get_ident() or _recipe.stream_pending():
                buf = torch.empty(len(values), dtype=self.dtype, device=self.device)
                if self.reuse_output:
                    self._buf, self._buf_thread, self._buf_ptr = buf, threading.get_ident(), buf.data_ptr()
                ctypes.memmove(buf.data_ptr(), packed, len(packed))
                return buf
            ctypes.memmove(self._buf_ptr, packed, len(packed))
            return buf
        # One host buffer and one copy to the device: half the host cost of
        # torch.tensor(values).to(device) (list parsing, a dtype conversion per element).
        return torch.frombuffer(bytearray(packed), dtype=self.dtype).to(self.device)

    def _ieee_values(self, inputs: tuple[torch.Tensor, ...]) -> list[float]:
        scalar = _NUMPY[self.dtype]
        env: list[Any] = [scalar(t.item()) for t in inputs] + [None] * len(self.steps)
        with np.errstate(all="ignore"):  # x/0, sqrt(-1): inf and nan, as torch gives them
            for slot, fn, args, kwargs in self.steps:
                env[slot] = fn(tuple(env[a] if isinstance(a, _Slot) else a for a in args), kwargs)
        return [float(env[r]) for r in self.results]

    def __repr__(self) -> str:
        return f"HostScalarProgram({len(self.steps)} ops -> {len(self.results)} scalars)"


def _is_view_op(target: Any) -> bool:
    return not isinstance(target, torch._ops.OpOverload) or target.is_view


def _host_value(t: torch.Tensor) -> float:
    """t's value as item() gives it; a host float32/float64 tensor is read from its memory
    (no dispatcher call: ~0.3 instead of ~2 us each, six per AdamW step of the MLP)."""
    c_type = _C_SCALAR.get(t.dtype) if t.is_cpu and t.dim() == 0 else None
    if c_type is None:
        return t.item()
    return c_type.from_address(t.data_ptr()).value


class _Slot(int):
    """An argument that names an environment slot (a plain int argument is a number)."""


def _operand(a: Any, name: Callable[[int], str]) -> str:
    if isinstance(a, _Slot):
        return name(int(a))
    return repr(float(a)) if math.isfinite(a) else f"float('{float(a)}')"


def _step_line(step: tuple, target: Any, round_f32: bool, name: Callable[[int], str], indent: str) -> str:
    slot, _, args, kwargs = step
    alpha = float(kwargs.get("alpha", 1))
    expr = _SOURCE[target].format(*(_operand(a, name) for a in args), al="" if alpha == 1 else f"{alpha!r} * ")
    return f"{indent}{name(slot)} = _unpack(_pack({expr}))[0]" if round_f32 else f"{indent}{name(slot)} = {expr}"


def _generate(num_inputs: int, steps: list[tuple[int, Callable, tuple, dict]], results: list[int],
              targets: list[Any], round_f32: bool, share: bool = True) -> Callable[..., tuple]:
    """Python for the program: shared chains when it has them, else straight-line code
    (one local per slot, no interpreter loop)."""
    lines = _shared_chains(num_inputs, steps, results, targets, round_f32) if share else None
    if lines is None:
        lines = [f"def program({', '.join(f'v{i}' for i in range(num_inputs))}):"]
        for step, target in zip(steps, targets):
            lines.append(_step_line(step, target, round_f32, lambda k: f"v{k}", "    "))
        lines.append(f"    return ({''.join(f'v{r}, ' for r in results)})")
    scope = {"_pow": math.pow, "_sqrt": math.sqrt, "_pack": _F32.pack, "_unpack": _F32.unpack,
             "_key": _KEY.pack}
    exec(compile("\n".join(lines), "<host_scalar_program>", "exec"), scope)  # noqa: S102 - our own code
    return scope["program"]


_KEY = struct.Struct("d")  # a value's bits: 0.0 and -0.0 (or two NaNs) are different inputs


def _shared_chains(num_inputs: int, steps: list[tuple[int, Callable, tuple, dict]], results: list[int],
                   targets: list[Any], round_f32: bool) -> list[str] | None:
    """An optimizer's scalar math is one chain of ops per parameter, each reading only that
    parameter's step count, the chains alike but for their input (AdamW: 12 ops per
    parameter). Such chains are generated once, as a function of the one input, and the
    program calls it once per distinct input value (compared bit for bit), reusing its
    results for the other parameters, whose steps are normally equal: the same arithmetic
    on the same value, so the same results. None when some op reads no input or several."""
    owner: dict[int, int] = {i: i for i in range(num_inputs)}  # slot -> the input it derives from
    chains: dict[int, list[int]] = {i: [] for i in range(num_inputs)}  # input -> its step indices
    for k, (slot, _, args, _) in enumerate(steps):
        srcs = {owner[int(a)] for a in args if isinstance(a, _Slot)}
        if len(srcs) != 1:
            return None
        owner[slot] = src = srcs.pop()
        chains[src].append(k)
    result_set = set(results)
    # A chain's form: its ops with slots renamed by position (input = 0, k-th op = k + 1).
    forms: dict[tuple, int] = {}
    form_of: dict[int, int] = {}
    bodies: list[tuple[int, list[int]]] = []  # per form: (an input of it, its step indices)
    for i in range(num_inputs):
        local = {i: 0}
        form = []
        for n, k in enumerate(chains[i]):
            slot, _, args, kwargs = steps[k]
            local[slot] = n + 1
            form.append((targets[k], tuple(("s", local[int(a)]) if isinstance(a, _Slot) else ("n", repr(a))
                                           for a in args),
                         tuple(sorted((key, repr(v)) for key, v in kwargs.items())), slot in result_set))
        form_t = tuple(form)
        if form_t not in forms:
            forms[form_t] = len(bodies)
            bodies.append((i, chains[i]))
        form_of[i] = forms[form_t]
    if len(bodies) == num_inputs:  # nothing shared: straight-line code is as cheap
        return None
    lines: list[str] = []
    position: dict[int, tuple[int, int]] = {}  # result slot -> (input, index in its chain's results)
    for f, (i, ks) in enumerate(bodies):
        local = {i: "x"}
        for n, k in enumerate(ks):
            local[steps[k][0]] = f"t{n}"
        lines.append(f"def _chain{f}(x):")
        outs = []
        for k in ks:
            lines.append(_step_line(steps[k], targets[k], round_f32, lambda s: local[s], "    "))
            if steps[k][0] in result_set:
                outs.append(local[steps[k][0]])
        lines.append(f"    return ({''.join(f'{o}, ' for o in outs)})")
    for i in range(num_inputs):
        outs = [steps[k][0] for k in chains[i] if steps[k][0] in result_set]
        for n, r in enumerate(outs):
            position[r] = (i, n)
    lines.append(f"def program({', '.join(f'v{i}' for i in range(num_inputs))}):")
    for f in range(len(bodies)):
        lines.append(f"    m{f} = {{}}")
    for i in range(num_inputs):
        f = form_of[i]
        lines.append(f"    k = _key(v{i})")
        lines.append(f"    c{i} = m{f}.get(k)")
        lines.append(f"    if c{i} is None:")
        lines.append(f"        c{i} = m{f}[k] = _chain{f}(v{i})")
    lines.append(f"    return ({''.join(f'c{position[r][0]}[{position[r][1]}], ' for r in results)})")
    return lines


_C_SCALAR = {torch.float32: ctypes.c_float, torch.float64: ctypes.c_double}


class HostStepIncrement:
    """Callable graph node for `aten._foreach_add_.Scalar(steps, k)` over host 0-dim float
    tensors (a compiled optimizer's step counts without `capturable`): each new value is
    computed on the host and written into the tensor's element, and the version counters
    are bumped, as the in-place op does, without a dispatcher call per tensor (~50 us of
    the MLP's compiled step on the loaded machine, for six counts). float32: the operands
    are float32 numbers, so their sum in double rounded once to float32 is torch's float32
    add. Inference tensors (which in-place ops reject outside inference mode) take the op."""

    def __init__(self, scalar: float, dtype: torch.dtype):
        self.dtype = dtype
        self.c_type = _C_SCALAR[dtype]
        # torch casts the number operand to the tensor's dtype first
        self.scalar = float(np.float32(scalar)) if dtype == torch.float32 else float(scalar)
        self.__name__ = "host_step_increment"

    def __call__(self, tensors: list[torch.Tensor]) -> None:
        # dynamo's guards hold each input's device, dtype and shape (host, 0-dim, self.dtype)
        c_type, k = self.c_type, self.scalar
        for t in tensors:
            if t.is_inference():
                torch.ops.aten._foreach_add_.Scalar(tensors, k)
                return
        for t in tensors:
            c_type.from_address(t.data_ptr()).value += k  # double sum, rounded once to the dtype
        torch._C._increment_version(tensors)

    def __repr__(self) -> str:
        return f"HostStepIncrement(+{self.scalar}, {self.dtype})"


def fold_host_step_increments(gm: torch.fx.GraphModule) -> int:
    """`_foreach_add_.Scalar` over host 0-dim float32/float64 graph inputs that need no
    grad -> one HostStepIncrement node. Run on the final graph (compilers.py): the passes
    make the in-place op from the functional add and copy_ back. Returns the number of
    nodes replaced."""
    replaced = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not aten._foreach_add_.Scalar or n.kwargs or n.users:
            continue
        tensors, scalar = n.args
        if isinstance(scalar, bool) or not isinstance(scalar, (int, float)) or not math.isfinite(scalar):
            continue
        vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in tensors]
        if not vals or not all(isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.dim() == 0
                               and v.dtype == vals[0].dtype and not v.requires_grad for v in vals):
            continue
        if vals[0].dtype not in _C_SCALAR or not all(a.op == "placeholder" for a in tensors):
            continue
        with gm.graph.inserting_before(n):
            new = gm.graph.call_function(HostStepIncrement(scalar, vals[0].dtype), (list(tensors),))
        new.meta.update(n.meta)
        gm.graph.erase_node(n)
        replaced += 1
    if replaced:
        gm.graph.lint()
        gm.recompile()
        logger.debug("host step increments: %d _foreach_add_ nodes done on the host", replaced)
    return replaced


def fold_host_scalar_math(gm: torch.fx.GraphModule) -> int:
    """Replace the host scalar math placed in clusters (meta "host_scalar_math") by one
    HostScalarProgram node and device-side selects of its results. Returns the number
    of ops folded (0: graph unchanged)."""
    nodes = [n for n in gm.graph.nodes if n.meta.get("host_scalar_math")]
    if not nodes:
        return 0
    members = set(nodes)
    inputs: list[torch.fx.Node] = []
    slot_of: dict[torch.fx.Node, int] = {}
    dtype = None
    for n in nodes:
        val = n.meta.get("val")
        if n.target not in _OPS or n.target not in _SOURCE or set(n.kwargs) - _KWARGS or not isinstance(val, torch.Tensor):
            return 0
        if dtype is None:
            dtype = val.dtype
        if val.dtype != dtype or dtype not in _NUMPY:
            return 0
        for a in n.all_input_nodes:
            if a in members:
                continue
            aval = a.meta.get("val")
            if a.op != "placeholder" or not isinstance(aval, torch.Tensor) or aval.dtype != dtype:
                return 0
            if a not in slot_of:
                slot_of[a] = len(inputs)
                inputs.append(a)
    outputs = [n for n in nodes if any(u not in members for u in n.users)]
    if not outputs:
        return 0
    device, fake = None, None
    for o in outputs:
        for u in o.users:
            if u in members:
                continue
            if u.meta.get("placement") != "hpu_cluster":  # only recipe readers are rewired
                return 0
            for a in u.all_input_nodes:
                val = a.meta.get("val")
                if a not in members and isinstance(val, torch.Tensor) and val.device.type == "hpu":
                    device, fake = val.device, val
    if device is None or getattr(fake, "fake_mode", None) is None:
        return 0
    steps = []
    for i, n in enumerate(nodes):
        slot_of[n] = len(inputs) + i

    def arg(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return _Slot(slot_of[a])
        if isinstance(a, (bool, int, float)):
            return _NUMPY[dtype](a)  # torch casts a number operand to the tensor's dtype
        raise TypeError(a)

    try:
        for n in nodes:
            kwargs = {k: _NUMPY[dtype](v) for k, v in n.kwargs.items()}
            steps.append((slot_of[n], _OPS[n.target], tuple(arg(a) for a in n.args), kwargs))
    except (TypeError, KeyError):
        return 0
    program = HostScalarProgram(len(inputs), steps, [slot_of[o] for o in outputs], dtype, device,
                                 [n.target for n in nodes])
    # Its results feed recipes only; a view of them would carry the buffer out of the recipe.
    program.reuse_output = not any(_is_view_op(u.target) for o in outputs for u in o.users if u not in members)
    graph = gm.graph
    with graph.inserting_before(nodes[0]):
        packed = graph.call_function(program, tuple(inputs))
    with fake.fake_mode:
        packed_val = torch.empty(len(outputs), dtype=dtype, device=device)
        scalar_val = torch.empty((), dtype=dtype, device=device)
    packed.meta.update(placement="eager", eager_reason="host scalar math folded on the host", val=packed_val)
    for k, o in enumerate(outputs):
        with graph.inserting_after(packed):
            sel = graph.call_function(aten.select.int, (packed, 0, k))
        sel.meta.update(placement="hpu_cluster", val=scalar_val)
        for u in [u for u in o.users if u not in members]:
            u.replace_input_with(o, sel)
    for n in reversed(nodes):
        assert not n.users, n
        graph.erase_node(n)
    graph.lint()
    gm.recompile()
    logger.debug("host scalar math: %d ops folded on the host into %d scalars", len(nodes), len(outputs))
    return len(nodes)

