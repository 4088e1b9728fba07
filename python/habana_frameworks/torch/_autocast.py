"""`torch.autocast(device_type="hpu")`: the casting kernels at the AutocastHPU dispatch key.

Public torch turns the AutocastHPU key on and off (`torch.set_autocast_enabled("hpu", ...)`)
but registers no kernel and no fallback for it, so without this module every op on an hpu
tensor fails inside an autocast region. As in the bridge:

* a fallthrough fallback lets every op without a policy pass the key untouched;
* every functional aten op (not in-place, not out=, not backward) whose name is on one of
  the lists gets a kernel that casts its floating-point hpu inputs and redispatches below
  the key: the lower-precision list casts to the autocast dtype (the norms there cast only
  their first input), the FP32 list casts to float32, the promote list runs in the widest
  input type. A name on several lists takes the first of lower, fp32, promote;
* casts go through `Tensor.to`, so autograd records them, and they are never cached
  (HPU keeps no autocast weight cache, whatever `torch.is_autocast_cache_enabled()` says);
* `PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST` and `PT_HPU_AUTOCAST_FP32_OPS_LIST` name files
  with one op per line that replace the default lists. They are read once, at import, with
  the bridge's checks and stderr messages; a file that cannot be used keeps the default.
"""
from __future__ import annotations

import enum
import os
import sys
from typing import Any, Callable, Iterable

import torch

LOWER_LIST_ENV = "PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST"
FP32_LIST_ENV = "PT_HPU_AUTOCAST_FP32_OPS_LIST"

# The bridge's default lists (gaudi-bridge-behaviour.md §1.5).
DEFAULT_LOWER_OPS: frozenset[str] = frozenset({
    "addmm", "addbmm", "batch_norm", "baddbmm", "bmm", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "dot", "dropout",
    "feature_dropout", "group_norm", "instance_norm", "layer_norm", "leaky_relu", "linear",
    "matmul", "mean", "mm", "mul", "mv", "softmax", "log_softmax", "scaled_dot_product_attention",
})
DEFAULT_FP32_OPS: frozenset[str] = frozenset({
    "acos", "addcdiv", "asin", "atan2", "bilinear", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "cdist", "cosh", "cosine_embedding_loss",
    "cosine_similarity", "cross_entropy_loss", "dist", "div", "divide", "embedding",
    "embedding_bag", "erfinv", "exp", "expm1", "hinge_embedding_loss", "huber_loss", "kl_div",
    "l1_loss", "log", "log10", "log1p", "log2", "logsumexp", "margin_ranking_loss", "mse_loss",
    "multi_margin_loss", "multilabel_margin_loss", "nll_loss", "pdist", "poisson_nll_loss",
    "pow", "reciprocal", "renorm", "rsqrt", "sinh", "smooth_l1_loss", "soft_margin_loss",
    "softplus", "tan", "topk", "triplet_margin_loss", "truediv", "true_divide",
})
PROMOTE_OPS: frozenset[str] = frozenset({
    "add", "addcmul", "addcdiv", "cat", "div", "exp", "mul", "pow", "sub", "iadd", "truediv",
    "stack",
})
# On the lower-precision list these cast only their first input (weights, bias and running
# statistics keep their dtype).
LOWER_FIRST_ARG_OPS: frozenset[str] = frozenset({"layer_norm", "group_norm", "instance_norm",
                                                 "batch_norm"})

# Top-level directories an ops list may not live under (the bridge refuses them).
_BANNED_ROOTS = frozenset({"/bin", "/etc", "/usr", "/var", "/boot", "/dev", "/lib",
                           "/lost+found", "/proc", "/run", "/sbin", "/srv", "/sys", "/root"})

_TAG = "[PT_BRIDGE][AUTOCAST] "


class Policy(enum.Enum):
    LOWER = "lower_precision_fp"
    FP32 = "fp32"
    PROMOTE = "promote"
    LOWER_FIRST_ARG = "lower_first_arg"


def _quoted(s: str) -> str:
    """std::quoted: double quotes, with embedded quotes and backslashes escaped."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _warn(msg: str) -> None:
    sys.stderr.write("[WARNING]" + _TAG + msg + "\n")
    sys.stderr.flush()


def registered_op_names() -> frozenset[str]:
    """Names (no namespace, no overload) of every aten op in the dispatcher: what the
    bridge accepts in an ops list."""
    return frozenset(_aten_overloads())


def _path_problem(path: str) -> str | None:
    if not os.path.exists(path):
        return f"File({_quoted(path)}) does not exist."
    if os.path.isdir(path):
        return f"Path({_quoted(path)}) is a directory"
    real = os.path.realpath(os.path.abspath(path))
    parts = real.split(os.sep)
    top = os.sep + parts[1] if len(parts) > 1 else os.sep
    if top in _BANNED_ROOTS:
        return f"Used unsafe file location({_quoted(path)})."
    return None


def load_ops_list(path: str, default: frozenset[str], registered: frozenset[str] | None = None
                  ) -> frozenset[str]:
    """The ops list named by `path` (one op per line), or `default` when `path` is empty or
    the file cannot be used. Lines that are not aten op names are discarded with the bridge's
    warning; a non-empty file without a single op name is treated as malformed and keeps
    the default. Never raises."""
    if not path:
        return default
    problem = _path_problem(path)
    if problem is not None:
        _warn(f"Verification of ops list to autocast failed: {problem} Loading default ops list.")
        return default
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        _warn(f"Opening of ops list({_quoted(path)}) to autocast failed. Loading default list.")
        return default
    if registered is None:
        registered = registered_op_names()
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # a final newline does not start another line
    accepted: list[str] = []
    for index, line in enumerate(lines, start=1):
        name = line.strip()
        if name not in registered:
            _warn(f"Discarded unregistered op at line: {index}")
            continue
        if name not in accepted:
            accepted.append(name)
    if not accepted and any(line.strip() for line in lines):
        _warn(f"Verification of ops list to autocast failed: File({_quoted(path)}) names no "
              "registered op. Loading default ops list.")
        return default
    sys.stderr.write("[DEBUG]" + _TAG + f"Autocast ops loaded via {_quoted(path)}: "
                     + "".join(n + ", " for n in accepted) + "\n")
    sys.stderr.flush()
    return frozenset(accepted)


def policy_for(name: str, lower: Iterable[str], fp32: Iterable[str]) -> Policy | None:
    if name in lower:
        return Policy.LOWER_FIRST_ARG if name in LOWER_FIRST_ARG_OPS else Policy.LOWER
    if name in fp32:
        return Policy.FP32
    if name in PROMOTE_OPS:
        return Policy.PROMOTE
    return None


# ---------------------------------------------------------------------------------------
# Casting

_AUTOCAST_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastHPU)


def _eligible(t: torch.Tensor) -> bool:
    # at::autocast::is_eligible for HPU: floating-point hpu tensors other than double.
    return t.device.type == "hpu" and t.is_floating_point() and t.dtype != torch.float64


def _cast(x: Any, dtype: torch.dtype) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.dtype != dtype and _eligible(x) else x
    if isinstance(x, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in x):
        return type(x)(_cast(e, dtype) for e in x)
    return x


def _tensors(args: Iterable[Any]) -> Iterable[torch.Tensor]:
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (e for e in a if isinstance(e, torch.Tensor))


def _widest(lower: torch.dtype, args: tuple, kwargs: dict) -> torch.dtype:
    """at::autocast::promote_type: float32 wins over the lower type; doubles are ignored."""
    current = lower
    for t in _tensors((*args, *kwargs.values())):
        if not _eligible(t):
            continue
        if t.dtype == torch.float32:
            current = torch.float32
        elif t.dtype != lower:
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return current


_fp16_ok: bool | None = None


def _lower_dtype() -> torch.dtype:
    """The autocast dtype, refused (as fp16 tensors are) on a first-generation Gaudi."""
    global _fp16_ok
    dtype = torch.get_autocast_dtype("hpu")
    if dtype == torch.float16:
        if _fp16_ok is None:
            from . import hpu
            _fp16_ok = hpu.get_device_name() != "GAUDI"
        if not _fp16_ok:
            raise RuntimeError(
                "Expected false to be true, but got false.  float16/half is not supported on "
                "Gaudi. torch.autocast(device_type=\"hpu\", dtype=torch.float16) needs GAUDI2 or "
                "later (the emulated device is GAUDI, from HPUSIM_DEVICE_TYPE); use "
                "dtype=torch.bfloat16.")
    return dtype


def _make_kernel(op: Any, policy: Policy) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_KEYS):
            if policy is Policy.FP32:
                args = tuple(_cast(a, torch.float32) for a in args)
                kwargs = {k: _cast(v, torch.float32) for k, v in kwargs.items()}
            elif policy is Policy.LOWER_FIRST_ARG:
                if args:
                    args = (_cast(args[0], _lower_dtype()),) + args[1:]
            else:
                lower = _lower_dtype()
                dtype = _widest(lower, args, kwargs) if policy is Policy.PROMOTE else lower
                args = tuple(_cast(a, dtype) for a in args)
                kwargs = {k: _cast(v, dtype) for k, v in kwargs.items()}
            return op(*args, **kwargs)
    kernel.__name__ = f"autocast_hpu_{policy.value}_{op.__name__}"
    return kernel


def _aten_overloads() -> dict[str, list[str]]:
    """aten op name -> its overload names ("" for the default), from the dispatcher."""
    table: dict[str, list[str]] = {}
    for full in torch._C._dispatch_get_all_op_names():
        if full.startswith("aten::"):
            base, _, overload = full[len("aten::"):].partition(".")
            table.setdefault(base, []).append(overload)
    return table


def _castable_overloads(name: str, overloads: Iterable[str]) -> list[str]:
    """The overloads of aten::<name> the bridge wraps: functional, not out=, with a tensor."""
    if name.endswith("_") or "backward" in name:
        return []
    out = []
    for overload in overloads:
        op = getattr(getattr(torch.ops.aten, name), overload or "default", None)
        if op is None:
            continue
        schema = op._schema
        if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
            continue  # in-place or out=
        if not any("Tensor" in str(a.type) for a in schema.arguments):
            continue
        out.append(overload)
    return out


# Policy codes of the C++ kernels (csrc/hpu_autocast.cpp).
_POLICY_CODES = {Policy.LOWER: 0, Policy.FP32: 1, Policy.PROMOTE: 2, Policy.LOWER_FIRST_ARG: 3}


def _cpp_kernels() -> Any:
    """The glue's C++ kernels (csrc/hpu_autocast.cpp): the same casts as _make_kernel's
    without ~80 us of interpreter work an op. None when the glue lacks them (then the
    Python kernels serve)."""
    try:
        from . import _native
        return _native.glue_module("habana_frameworks.torch._autocast_C")
    except (ImportError, OSError, AttributeError):
        return None


class _State:
    lib: torch.library.Library | None = None
    fallback_lib: torch.library.Library | None = None
    lower: frozenset[str] = DEFAULT_LOWER_OPS
    fp32: frozenset[str] = DEFAULT_FP32_OPS
    policies: dict[str, Policy] = {}


def lower_precision_ops() -> frozenset[str]:
    """The lower-precision list in effect (the default or the override file's)."""
    return _State.lower


def fp32_ops() -> frozenset[str]:
    """The FP32 list in effect."""
    return _State.fp32


def op_policies() -> dict[str, str]:
    """Registered AutocastHPU casts: aten overload name -> policy name."""
    return {k: v.value for k, v in _State.policies.items()}


def install() -> None:
    """Read the list overrides and register the kernels (once per process)."""
    if _State.fallback_lib is not None:
        return
    fallback_lib = torch.library.Library("_", "IMPL")
    fallback_lib.fallback(torch.library.fallthrough_kernel, "AutocastHPU")
    _State.fallback_lib = fallback_lib

    table = _aten_overloads()
    registered = frozenset(table)
    _State.lower = load_ops_list(os.environ.get(LOWER_LIST_ENV, ""), DEFAULT_LOWER_OPS, registered)
    _State.fp32 = load_ops_list(os.environ.get(FP32_LIST_ENV, ""), DEFAULT_FP32_OPS, registered)

    names = sorted((_State.lower | _State.fp32 | PROMOTE_OPS) & registered)
    policies: dict[str, Policy] = {}
    ops: dict[str, Any] = {}
    for name in names:
        policy = policy_for(name, _State.lower, _State.fp32)
        if policy is None:
            continue
        for overload in _castable_overloads(name, table[name]):
            qual = name if not overload else f"{name}.{overload}"
            ops[qual] = getattr(getattr(torch.ops.aten, name), overload or "default")
            policies[qual] = policy
    cpp = _cpp_kernels()
    if cpp is not None:
        cpp.register_kernels([(qual, _POLICY_CODES[p]) for qual, p in policies.items()], _lower_dtype)
    else:
        lib = torch.library.Library("aten", "IMPL")
        for qual, policy in policies.items():
            lib.impl(qual, _make_kernel(ops[qual], policy), "AutocastHPU")
        _State.lib = lib
    _State.policies = policies


install()
