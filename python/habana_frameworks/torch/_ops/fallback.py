"""CPU fallback for ops the Go core does not implement, counted and logged as the bridge does.

Inputs are copied to the host, torch's CPU kernel runs, and results are copied back into
the hpu tensors: mutated arguments (in-place and out=) in place, so views and aliasing keep
their meaning; new results as new hpu tensors.
"""
from __future__ import annotations

import atexit
import collections
import os
import threading
from typing import Any, Callable

import torch

from .. import _lazy
from ..utils import hl_logger

_lock = threading.Lock()
_counts: collections.Counter[str] = collections.Counter()
# Nesting depth of internal work whose fallbacks must not be counted (e.g. import probes).
_quiet = threading.local()

_TYPE_NAMES = {
    torch.float32: "Float", torch.bfloat16: "BFloat16", torch.float16: "Half",
    torch.float64: "Double", torch.int64: "Long", torch.int32: "Int", torch.int16: "Short",
    torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
}

# Ops that legitimately take host tensors next to hpu tensors (indices, copies).
_MIXED_DEVICE_OK = {
    "aten::_copy_from", "aten::_copy_from_and_resize", "aten::copy_", "aten::index",
    "aten::index_put_", "aten::_index_put_impl_", "aten::index_put", "aten::set_",
    "aten::_to_copy", "aten::lift_fresh",
}


def counts() -> dict[str, int]:
    with _lock:
        return dict(_counts)


def total() -> int:
    with _lock:
        return sum(_counts.values())


def reset_counts() -> None:
    with _lock:
        _counts.clear()


class quiet:
    """Context in which fallbacks are not counted or logged (internal probes only)."""

    def __enter__(self):
        _quiet.depth = getattr(_quiet, "depth", 0) + 1

    def __exit__(self, *exc):
        _quiet.depth -= 1


def type_name(dt: torch.dtype) -> str:
    """c10's name of a scalar type ("Float", "BFloat16"), as CPU error messages print it."""
    return _TYPE_NAMES.get(dt, str(dt))


def hpu_type_name(t: torch.Tensor) -> str:
    return f"HPU{type_name(t.dtype)}Type"


def _device_error(a: torch.device, b: torch.device) -> RuntimeError:
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, {a} and {b}!")


# torch.device -> its index if it is an hpu device, else -1. Reading `.type` off a device
# costs ~0.4 us, a dict lookup by device ~0.05 us; devices are few, so this stays tiny.
_HPU_INDEX: dict[torch.device, int] = {}
Tensor = torch.Tensor


def _hpu_index(dev: torch.device) -> int:
    idx = _HPU_INDEX.get(dev)
    if idx is None:
        idx = (dev.index if dev.index is not None else 0) if dev.type == "hpu" else -1
        _HPU_INDEX[dev] = idx
    return idx


def _scan(values, idx: int, nested: bool = False) -> int:
    """The hpu index every tensor in values is on (idx if none is), or -2 when any tensor is
    not plainly on that one hpu device (a non-scalar host tensor, another device). Lists
    are looked into one level deep, as `_iter_tensors` does."""
    for a in values:
        if isinstance(a, Tensor):
            if a.is_cpu:
                if a.dim() != 0:
                    return -2
                continue
            i = _hpu_index(a.device)
            if i < 0 or (idx >= 0 and i != idx):
                return -2
            idx = i
        elif not nested and isinstance(a, (list, tuple)):
            idx = _scan(a, idx, True)  # lists of tensors (cat, index, foreach)
            if idx == -2:
                return -2
    return idx


def check_devices(op, args, kwargs) -> None:
    """PyTorch's device-mismatch error for hpu mixed with non-scalar host tensors (0-dim
    CPU tensors are allowed, as on CUDA) or with another hpu device.

    This runs before every op, so the common case (every tensor on one hpu device, host
    tensors only as 0-dim scalars) is decided by `_scan` with cheap attribute reads;
    anything else goes to the exact check, which raises the error if there is one."""
    idx = _scan(args, -1)
    if idx != -2 and kwargs:
        idx = _scan(kwargs.values(), idx)
    if idx == -2:
        _check_devices_slow(op, args, kwargs)


def _check_devices_slow(op, args, kwargs) -> None:
    hpu_dev = None
    other = None
    for a in _iter_tensors(args, kwargs):
        dev = a.device
        if dev.type == "hpu":
            if hpu_dev is None:
                hpu_dev = dev
            elif dev != hpu_dev:
                raise _device_error(hpu_dev, dev)
        elif a.dim() != 0 and other is None:
            other = dev
    if hpu_dev is not None and other is not None and op._schema.name not in _MIXED_DEVICE_OK:
        raise _device_error(hpu_dev, other)


def _iter_tensors(args, kwargs):
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    yield b
    for a in kwargs.values():
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    yield b


def _allowed_on_cpu(short: str) -> bool:
    spec = os.getenv("PT_HPU_PLACE_ON_CPU")
    if spec is None or spec.strip() == "":
        return True
    allowed = {s.strip() for s in spec.split(",")}
    if "none" in allowed:
        return False
    return short in allowed or f"aten::{short}" in allowed


def _record(op, bound: list[tuple[Any, Any]]) -> None:
    name = op._schema.name
    short = name.split("::", 1)[-1]
    if not _allowed_on_cpu(short):
        raise RuntimeError(f"{short} is not yet supported on HPU.")
    if getattr(_quiet, "depth", 0):
        return
    with _lock:
        _counts[name] += 1
    if hl_logger.enabled("PT_FALLBACK", 3):
        parts = [f"{arg.name}={hpu_type_name(v)}" for arg, v in bound
                 if isinstance(v, torch.Tensor) and v.device.type == "hpu"]
        hl_logger.log("PT_FALLBACK", 3, f"CPU fallback {short} : {', '.join(parts)}")


def summary_text() -> str:
    with _lock:
        items = sorted(_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return "CPU Fallback stats:\n" + "".join(f"{n}\t{op}\n" for op, n in items)


@atexit.register
def _summarise_at_exit() -> None:
    if total():
        hl_logger.log("PT_FALLBACK", 5, summary_text().rstrip("\n"))


def _bind(op, args, kwargs) -> list[tuple[Any, Any]]:
    schema_args = op._schema.arguments
    bound = [(schema_args[i], a) for i, a in enumerate(args)]
    by_name = {a.name: a for a in schema_args}
    bound += [(by_name[k], v) for k, v in kwargs.items() if k in by_name]
    return bound


def _to_cpu(v):
    if isinstance(v, torch.Tensor):
        return v.to("cpu") if v.device.type == "hpu" else v
    if isinstance(v, (list, tuple)):
        return type(v)(_to_cpu(x) for x in v)
    if isinstance(v, torch.device) and v.type == "hpu":
        return torch.device("cpu")
    return v


def _first_hpu_device(bound) -> torch.device:
    for _, v in bound:
        if isinstance(v, torch.Tensor) and v.device.type == "hpu":
            return v.device
        if isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, torch.Tensor) and x.device.type == "hpu":
                    return x.device
        if isinstance(v, torch.device) and v.type == "hpu":
            return torch.device("hpu", v.index if v.index is not None else torch.hpu.current_device())
    return torch.device("hpu", torch.hpu.current_device())


def _write_back(dst: torch.Tensor, src: torch.Tensor) -> None:
    if dst.shape != src.shape:
        dst.resize_(src.shape)
    dst.copy_(src)


def _to_device(v, device):
    if isinstance(v, torch.Tensor):
        return v.to(device)
    if isinstance(v, (list, tuple)):
        return type(v)(_to_device(x, device) for x in v)
    return v


# Ops that exist only for out-of-tree devices: torch routes hpu convolutions to the
# "overrideable" variants, which have no CPU kernel, so the host runs their generic forms.
_HOST_EQUIVALENT = {
    "aten::convolution_overrideable": lambda: torch.ops.aten.convolution.default,
    "aten::convolution_backward_overrideable": lambda: _conv_backward_on_host,
}


def _conv_backward_on_host(grad_output, input, weight, stride, padding, dilation, transposed,
                           output_padding, groups, output_mask):
    return torch.ops.aten.convolution_backward.default(
        grad_output, input, weight, [weight.shape[0] if not transposed else weight.shape[1] * groups],
        stride, padding, dilation, transposed, output_padding, groups, output_mask)


# Ops that write to arguments their schema does not mark as mutable (argument names).
_UNANNOTATED_WRITES = {
    "aten::native_batch_norm": ("running_mean", "running_var"),
}


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float, complex))


def _takes_tensor(arg) -> bool:
    t = arg.type
    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    return isinstance(t, torch.TensorType)


def _wrap_number(v) -> torch.Tensor:
    """The 0-dim host tensor torch makes of a Python scalar (double/long/bool/complex double)."""
    dtype = (torch.bool if isinstance(v, bool) else torch.int64 if isinstance(v, int)
             else torch.complex128 if isinstance(v, complex) else torch.float64)
    return torch.scalar_tensor(v, dtype=dtype)


# Set by _recipe.capture while it records: called before a CPU fallback runs.
capture_hook: Callable[[Any], None] | None = None


def run_on_cpu(op, args, kwargs):
    if capture_hook is not None:
        capture_hook(op)
    _lazy.graph_break()  # lazy mode: the pending graph runs before the host takes over
    bound = _bind(op, args, kwargs)
    _record(op, bound)
    device = _first_hpu_device(bound)
    host_op = _HOST_EQUIVALENT.get(op._schema.name)

    cpu_args = [_to_cpu(a) for a in args]
    cpu_kwargs = {k: _to_cpu(v) for k, v in kwargs.items()}
    schema_args = op._schema.arguments
    # Wrapped-number tensors (a Python scalar passed where the schema takes a Tensor, as in
    # copysign.Scalar -> copysign.out) reach a boxed Python kernel as plain numbers.
    for i, arg in enumerate(schema_args):
        if i < len(cpu_args):
            if _is_number(cpu_args[i]) and _takes_tensor(arg):
                cpu_args[i] = _wrap_number(cpu_args[i])
        elif arg.name in cpu_kwargs and _is_number(cpu_kwargs[arg.name]) and _takes_tensor(arg):
            cpu_kwargs[arg.name] = _wrap_number(cpu_kwargs[arg.name])
    for i, arg in enumerate(schema_args):
        # The hpu generator drives random ops, so seeding torch.hpu makes them reproducible.
        if arg.name == "generator":
            from ..hpu import random as hpu_random
            if i < len(cpu_args):
                if cpu_args[i] is None:
                    cpu_args[i] = hpu_random.default_generators[0]
            elif cpu_kwargs.get("generator") is None:
                cpu_kwargs["generator"] = hpu_random.default_generators[0]

    out = host_op()(*cpu_args, **cpu_kwargs) if host_op is not None else op(*cpu_args, **cpu_kwargs)

    # Mutated arguments: copy the host results back into the hpu tensors.
    originals: dict[Any, Any] = {}
    unannotated = _UNANNOTATED_WRITES.get(op._schema.name, ())
    for i, arg in enumerate(schema_args):
        ai = arg.alias_info
        if ai is None and arg.name not in unannotated:
            continue
        if i < len(args):
            orig, new = args[i], cpu_args[i]
        elif arg.name in kwargs:
            orig, new = kwargs[arg.name], cpu_kwargs[arg.name]
        else:
            continue
        if ai is None or ai.is_write:
            if isinstance(orig, torch.Tensor) and orig is not new:
                _write_back(orig, new)
            elif isinstance(orig, (list, tuple)):
                for o, n in zip(orig, new):
                    if isinstance(o, torch.Tensor) and o is not n:
                        _write_back(o, n)
        if ai is None:
            continue
        for s in ai.before_set:
            originals[s] = orig

    returns = op._schema.returns
    if not returns:
        return out
    outs = out if len(returns) > 1 else (out,)
    result = []
    for ret, val in zip(returns, outs):
        ai = ret.alias_info
        alias = None
        if ai is not None:
            for s in ai.before_set:
                if s in originals:
                    alias = originals[s]
        if alias is not None and ai is not None and ai.is_write:
            result.append(alias)
        elif alias is not None and isinstance(val, torch.Tensor) and isinstance(alias, torch.Tensor):
            # A view returned by the host kernel: rebuild it over the hpu storage.
            base_cpu = cpu_args[[a for a in range(len(args)) if args[a] is alias][0]] if any(a is alias for a in args) else None
            offset = alias.storage_offset()
            if base_cpu is not None:
                offset += (val.data_ptr() - base_cpu.data_ptr()) // max(val.element_size(), 1)
            result.append(alias.as_strided(val.shape, val.stride(), offset))
        else:
            result.append(_to_device(val, device))
    return tuple(result) if len(returns) > 1 else result[0]
