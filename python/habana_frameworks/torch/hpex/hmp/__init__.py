"""Habana Mixed Precision (hmp): the pre-autocast way to train in bf16 on Gaudi.

`hmp.convert()` wraps torch functions, `torch.Tensor` methods (and their operator forms) and
`torch.nn.functional` functions by name:

* ops on the BF16 list cast their float32 tensor inputs to bf16; the norms there
  (batch/layer/instance/group norm) cast only their first input;
* ops on the FP32 list cast their bf16 tensor inputs to float32;
* multi-input ops (add, sub, cat, stack, ...) not on either list run in the widest input
  type: float32 if any tensor input is float32, else bf16; their in-place forms (add_,
  `+=`, ...) cast the other inputs to the type of the tensor updated in place;
* every other op is left alone, so it follows the type of its (first) input.

`opt_level="O2"` keeps only the GEMM and convolution ops in bf16 and casts every other op
hmp knows to float32. `disable_casts()` turns all casting off for a block (e.g. around
`optimizer.step()`). `isVerbose=True` prints each cast decision as it is made.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import warnings
from typing import Any, Callable, Iterable, Iterator

import torch
import torch.nn.functional as F

__all__ = ["convert", "disable_casts"]

# Default lists.
DEFAULT_BF16_OPS: tuple[str, ...] = (
    "addmm", "batch_norm", "bmm", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "dot", "dropout", "dropout1d", "dropout2d",
    "dropout3d", "group_norm", "instance_norm", "layer_norm", "leaky_relu", "linear", "matmul",
    "mm", "mul", "mv", "relu", "t",
)
DEFAULT_FP32_OPS: tuple[str, ...] = (
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "div",
    "divide", "embedding", "embedding_bag", "log", "log2", "log_softmax", "nll_loss",
    "smooth_l1_loss", "softmax", "topk", "truediv",
)
# Ops with several tensor inputs (besides weights): they run in the widest input type.
MULTI_INPUT_OPS: tuple[str, ...] = (
    "add", "sub", "rsub", "mul", "div", "divide", "true_divide", "truediv", "iadd", "cat",
    "concat", "stack", "hstack", "vstack", "addcmul", "addcdiv", "where", "maximum", "minimum",
)
# O2: GEMMs and convolutions in bf16, every other known op in float32.
O2_BF16_OPS: tuple[str, ...] = (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "bmm", "addmm", "mm", "mv", "dot",
)
# Every op hmp knows how to wrap (a name from a list file must be one of these).
KNOWN_OPS: frozenset[str] = frozenset(DEFAULT_BF16_OPS + DEFAULT_FP32_OPS + MULTI_INPUT_OPS + (
    "addbmm", "baddbmm", "addmv", "bilinear", "einsum", "alpha_dropout", "feature_alpha_dropout",
    "relu6", "gelu", "silu", "elu", "selu", "celu", "sigmoid", "tanh", "hardtanh", "hardswish",
    "hardsigmoid", "mish", "softplus", "softsign", "prelu", "glu", "logsigmoid", "softmin",
    "exp", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "pow", "abs",
    "neg", "mean", "sum", "norm", "mse_loss", "l1_loss", "huber_loss", "kl_div",
    "poisson_nll_loss", "cosine_similarity", "normalize", "pad", "interpolate", "max_pool2d",
    "avg_pool2d", "adaptive_avg_pool2d",
))
# On a cast list, these cast only their first input.
FIRST_INPUT_ONLY_OPS: frozenset[str] = frozenset({"layer_norm", "batch_norm", "instance_norm",
                                                  "group_norm"})
# Where a name is looked up: torch functions, Tensor methods, functional.
_OWNERS: tuple[Any, ...] = (torch, torch.Tensor, F)


class _Config:
    verbose: bool = False
    opt_level: str = "O1"
    disabled: int = 0  # nesting depth of disable_casts()
    # (owner, attribute, original or None when inherited) of every wrapped attribute.
    patched: list[tuple[Any, str, Any]] = []
    bf16_ops: tuple[str, ...] = ()
    fp32_ops: tuple[str, ...] = ()
    multi_input_ops: tuple[str, ...] = ()


_tls = threading.local()


def _vprint(*args: Any) -> None:
    if _Config.verbose:
        print(*args)


@contextlib.contextmanager
def disable_casts() -> Iterator[None]:
    """A block where hmp casts nothing (ops run as plain torch ops)."""
    _vprint("Disabled HMP casting")
    _Config.disabled += 1
    try:
        yield
    finally:
        _Config.disabled -= 1
        _vprint("Enabled HMP casting")


# ---------------------------------------------------------------------------------------
# Casts


def to_bf16(x: torch.Tensor) -> torch.Tensor:
    """float32 -> bf16; other dtypes unchanged."""
    return x.to(torch.bfloat16) if x.dtype == torch.float32 else x


def to_fp32(x: torch.Tensor) -> torch.Tensor:
    """bf16 -> float32; other dtypes unchanged."""
    return x.to(torch.float32) if x.dtype == torch.bfloat16 else x


def _cast_tree(x: Any, cast: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(x, torch.Tensor):
        return cast(x)
    if isinstance(x, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in x):
        return type(x)(cast(e) if isinstance(e, torch.Tensor) else e for e in x)
    return x


def _tensors(args: Iterable[Any]) -> Iterator[torch.Tensor]:
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (e for e in a if isinstance(e, torch.Tensor))


def _casting_now() -> bool:
    # Ops called from inside a wrapped op (F.softmax -> Tensor.softmax, the hpu kernels' own
    # code) keep the outer op's decision.
    return _Config.disabled == 0 and getattr(_tls, "depth", 0) == 0


def _call(op: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    _tls.depth = getattr(_tls, "depth", 0) + 1
    try:
        return op(*args, **kwargs)
    finally:
        _tls.depth -= 1


def _wrap_fixed(op: Callable[..., Any], cast: Callable[[torch.Tensor], torch.Tensor],
                first_only: bool) -> Callable[..., Any]:
    _vprint("Wrapping ", op, " ", cast.__name__)

    @functools.wraps(op)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _casting_now():
            return op(*args, **kwargs)
        _vprint("casting ", op, cast.__name__)
        if first_only:
            if args:
                args = (_cast_tree(args[0], cast),) + args[1:]
        else:
            args = tuple(_cast_tree(a, cast) for a in args)
            kwargs = {k: _cast_tree(v, cast) for k, v in kwargs.items()}
        return _call(op, args, kwargs)
    return wrapper


def _wrap_widest(op: Callable[..., Any]) -> Callable[..., Any]:
    _vprint("Deciding cast for", op)

    @functools.wraps(op)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _casting_now():
            return op(*args, **kwargs)
        widest_fp32 = any(t.dtype == torch.float32 for t in _tensors((*args, *kwargs.values())))
        cast = to_fp32 if widest_fp32 else to_bf16
        _vprint("casting ", op, " to ", cast.__name__)
        args = tuple(_cast_tree(a, cast) for a in args)
        kwargs = {k: _cast_tree(v, cast) for k, v in kwargs.items()}
        return _call(op, args, kwargs)
    return wrapper


def _wrap_inplace(op: Callable[..., Any]) -> Callable[..., Any]:
    _vprint("Deciding cast for", op)

    @functools.wraps(op)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _casting_now() or not args or not isinstance(args[0], torch.Tensor):
            return op(*args, **kwargs)
        self_dtype = args[0].dtype
        if self_dtype == torch.float32:
            cast = to_fp32
        elif self_dtype == torch.bfloat16:
            cast = to_bf16
        else:
            return _call(op, args, kwargs)
        _vprint("casting ", op, " to ", cast.__name__)
        rest = tuple(_cast_tree(a, cast) for a in args[1:])
        kwargs = {k: _cast_tree(v, cast) for k, v in kwargs.items()}
        return _call(op, (args[0],) + rest, kwargs)
    return wrapper


# ---------------------------------------------------------------------------------------
# Lists and conversion


def _read_list(path: str, default: tuple[str, ...], kind: str) -> tuple[str, ...]:
    """The ops in `path` (one per line; blank lines ignored), or `default` with a warning
    when the file cannot be read or names no op hmp knows."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        warnings.warn(f"hmp: cannot read the {kind} ops list {path!r} ({e}); "
                      "using the default list.", stacklevel=3)
        return default
    ops = [ln.strip() for ln in lines if ln.strip()]
    if ops and not any(op in KNOWN_OPS for op in ops):
        warnings.warn(f"hmp: the {kind} ops list {path!r} names no op hmp supports; "
                      "using the default list.", stacklevel=3)
        return default
    return tuple(dict.fromkeys(ops))


def _targets(name: str) -> list[tuple[Any, str]]:
    """(owner, attribute) pairs implementing op `name`: torch.x, Tensor.x, F.x, Tensor.__x__."""
    found = []
    for owner in _OWNERS:
        for attr in (name, f"__{name}__"):
            if attr in vars(owner) or (owner is torch.Tensor and hasattr(owner, attr)):
                if callable(getattr(owner, attr, None)):
                    found.append((owner, attr))
    return found


def _patch(owner: Any, attr: str, wrapper: Callable[..., Any], original: Any) -> None:
    own = original if attr in vars(owner) else None  # None: inherited (from TensorBase)
    _Config.patched.append((owner, attr, own))
    setattr(owner, attr, wrapper)


def _wrap_list(ops: Iterable[str], cast: Callable[[torch.Tensor], torch.Tensor] | None) -> None:
    for name in ops:
        if name not in KNOWN_OPS:
            print(name, "OP not supported. Please add it to OPs dict and try again")
            continue
        for owner, attr in _targets(name):
            original = getattr(owner, attr)
            if cast is not None:
                wrapper = _wrap_fixed(original, cast, name in FIRST_INPUT_ONLY_OPS)
            elif name == "iadd":
                wrapper = _wrap_inplace(original)
            else:
                wrapper = _wrap_widest(original)
            _patch(owner, attr, wrapper, original)
        if cast is None and name != "iadd" and hasattr(torch.Tensor, name + "_"):
            original = getattr(torch.Tensor, name + "_")
            _patch(torch.Tensor, name + "_", _wrap_inplace(original), original)


def _unconvert() -> None:
    """Put back every attribute hmp wrapped (undo `convert`)."""
    while _Config.patched:
        owner, attr, original = _Config.patched.pop()
        if original is None:
            delattr(owner, attr)
        else:
            setattr(owner, attr, original)
    _Config.bf16_ops = _Config.fp32_ops = _Config.multi_input_ops = ()


def convert(opt_level: str = "O1", bf16_file_path: str = "", fp32_file_path: str = "",
            isVerbose: bool = False) -> None:  # noqa: N803  (the bridge's parameter name)
    """Turn Habana mixed precision on for the whole process.

    bf16_file_path / fp32_file_path: files with one op name per line replacing the default
    BF16 / FP32 list (O1 only; "" keeps the default). opt_level "O1" uses the lists, "O2"
    keeps GEMMs and convolutions in bf16 and everything else hmp knows in float32.
    isVerbose prints every cast decision. Calling convert again replaces the earlier
    conversion."""
    assert opt_level in ("O1", "O2"), "Optlevel should be either O1 or O2"
    if opt_level == "O2" and (bf16_file_path or fp32_file_path):
        print("Input op list would be overridden in opt_level O2")
    _unconvert()
    _Config.verbose = bool(isVerbose)
    _Config.opt_level = opt_level
    print("hmp:verbose_mode ", _Config.verbose)
    print("hmp:opt_level", _Config.opt_level)

    if opt_level == "O1":
        bf16 = _read_list(bf16_file_path, DEFAULT_BF16_OPS, "bf16") if bf16_file_path \
            else DEFAULT_BF16_OPS
        fp32 = _read_list(fp32_file_path, DEFAULT_FP32_OPS, "fp32") if fp32_file_path \
            else DEFAULT_FP32_OPS
        # A user's list wins over the other, default, list; two user lists must not overlap.
        if bf16_file_path and not fp32_file_path:
            fp32 = tuple(op for op in fp32 if op not in bf16)
        elif fp32_file_path and not bf16_file_path:
            bf16 = tuple(op for op in bf16 if op not in fp32)
        both = [op for op in bf16 if op in fp32]
        assert not both, str(both) + " in both fp32 & bf16 list"
        multi = tuple(op for op in MULTI_INPUT_OPS if op not in bf16 and op not in fp32)
        _vprint("ops_bf16_list = ", list(bf16))
        _vprint("ops_fp32_list = ", list(fp32))
        _vprint("ops_any_list = ", list(multi))
    else:
        bf16 = O2_BF16_OPS
        fp32 = tuple(sorted(op for op in KNOWN_OPS if op not in O2_BF16_OPS))
        multi = ()

    _wrap_list(multi, None)
    _wrap_list(bf16, to_bf16)
    _wrap_list(fp32, to_fp32)
    _Config.bf16_ops, _Config.fp32_ops, _Config.multi_input_ops = bf16, fp32, multi


def bf16_ops() -> tuple[str, ...]:
    """The BF16 list of the current conversion (empty before `convert`)."""
    return _Config.bf16_ops


def fp32_ops() -> tuple[str, ...]:
    """The FP32 list of the current conversion (empty before `convert`)."""
    return _Config.fp32_ops

