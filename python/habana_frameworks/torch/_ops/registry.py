"""Registry of native HPU ops and the boxed fallback installed at the HPU dispatch key.

A lowering is a Python function with the aten overload's own signature that computes the
result through the Go core (`_native.run`). It may raise `NotNative` to hand a call it
cannot serve (an unsupported dtype, say) to the CPU fallback.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

import torch

from .. import _native
from . import fallback

_NATIVE: dict[Any, Callable[..., Any]] = {}
# Calls served natively, by OpOverload: keyed by the op object because reading
# `op._schema.name` builds a new string each call; native_counts() groups by name.
_native_by_op: dict[Any, int] = {}


class NotNative(Exception):
    """Raised by a lowering to send this call to the CPU fallback."""


def _resolve(name: str):
    ns, _, rest = name.partition("::")
    base, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns), base)
    return getattr(packet, overload or "default")


def native(*names: str):
    """Register the decorated lowering for the given aten overloads ("aten::add.Tensor")."""
    def deco(fn):
        for n in names:
            _NATIVE[_resolve(n)] = fn
        return fn
    return deco


def is_native(op) -> bool:
    return op in _NATIVE


def native_counts() -> dict[str, int]:
    """Calls served natively, by schema name ("aten::add"), like fallback.counts() for the rest:
    by the Python lowerings and by the glue's fast C++ kernels (csrc/hpu_fast_ops.cpp)."""
    counts: collections.Counter[str] = collections.Counter()
    for op, n in list(_native_by_op.items()):
        counts[op._schema.name] += n
    for name, n in _native.fast_op_counts().items():
        if n:
            counts[name] += n
    return dict(counts)


def native_ops() -> list[str]:
    return sorted(str(op) for op in _NATIVE)


def hpu_kernel(op, *args, **kwargs):
    """The boxed kernel for every aten op at the HPU key without a C++ kernel.

    It runs for every op, so it does only dict lookups besides the device check."""
    fallback.check_devices(op, args, kwargs)
    fn = _NATIVE.get(op)
    if fn is not None:
        try:
            out = fn(*args, **kwargs)
        except NotNative:
            pass
        else:
            _native_by_op[op] = _native_by_op.get(op, 0) + 1
            return out
    return fallback.run_on_cpu(op, args, kwargs)


_lib: torch.library.Library | None = None
_aten_lib: torch.library.Library | None = None

# Ops with a CompositeExplicitAutograd kernel that only raises for out-of-tree devices: a
# backend fallback never sees them, so they get an explicit HPU kernel that routes to
# hpu_kernel like every other op.
EXPLICIT_HPU_OPS = ("convolution_overrideable", "convolution_backward_overrideable",
                    # CPU kernels next to a CompositeExplicitAutograd decomposition, which would
                    # shadow the fallback and round differently from the fused CPU kernel.
                    "native_group_norm", "addr", "addr.out",
                    # Composite out= kernels that reject devices other than cpu/cuda/xpu, or
                    # call a CPU DispatchStub directly.
                    "mode.values", "nanmean.out",
                    # Its non-functional composite raises IndexError where CPU raises RuntimeError.
                    "narrow_copy")


def _explicit_kernel(name: str):
    op = _resolve(f"aten::{name}")

    def kernel(*args, **kwargs):
        return hpu_kernel(op, *args, **kwargs)
    return kernel


# The glue's fast C++ kernels (csrc/hpu_fast_ops.cpp) serve the common case of a few hot ops
# at the HPU key and redispatch every other call of those ops to this key, which nothing
# else uses, so that the fallback below serves them as it serves every other op.
FAST_OPS_DEFER_KEY = "PrivateUse3"
# Ops of that kind with a fast C++ kernel at the HPU key: their Python kernel goes at the
# defer key only (there the composite decomposition would shadow the fallback too).
FAST_EXPLICIT_OPS = ("native_layer_norm",)


def install() -> None:
    """Install the fallback once; the Library objects must stay alive for it to stay."""
    global _lib, _aten_lib
    if _lib is None:
        _lib = torch.library.Library("_", "IMPL")
        _lib.fallback(hpu_kernel, "HPU")
        _lib.fallback(hpu_kernel, FAST_OPS_DEFER_KEY)
        _aten_lib = torch.library.Library("aten", "IMPL")
        for name in EXPLICIT_HPU_OPS:
            _aten_lib.impl(name, _explicit_kernel(name), "HPU")
        for name in FAST_EXPLICIT_OPS:
            _aten_lib.impl(name, _explicit_kernel(name), FAST_OPS_DEFER_KEY)
