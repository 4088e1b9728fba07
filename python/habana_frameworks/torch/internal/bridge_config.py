"""`habana_frameworks.torch.internal.bridge_config`: the bridge's runtime flags.

The bridge generates this module from its flag table: a `get_<flag>()` for every flag, a
`set_<flag>(value)` for the flags that may change at run time, and the `env_setting(FLAG,
value)` context manager. hpusim keeps each flag's value in the environment variable of the
same name, because that is where hpusim's code reads it: a flag read on every use (e.g.
PT_ENABLE_INT64_SUPPORT) follows `set_`, and a flag read once at import (PT_HPU_LAZY_MODE)
has no setter, as in the bridge.
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator

_TRUE = ("1", "true", "on", "yes", "y", "t")
_FALSE = ("0", "false", "off", "no", "n", "f", "")


def _parse_bool(name: str, text: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError(f"{name}: {text!r} is not a boolean value")


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not an integer value") from None


def _parse_str(name: str, text: str) -> str:
    return text


@dataclass(frozen=True)
class Flag:
    name: str
    parse: Callable[[str, str], Any]
    default: Any
    settable: bool
    doc: str


def _b(name, default, settable, doc):
    return Flag(name, _parse_bool, default, settable, doc)


def _i(name, default, settable, doc):
    return Flag(name, _parse_int, default, settable, doc)


def _s(name, default, settable, doc):
    return Flag(name, _parse_str, default, settable, doc)


# The flags hpusim reads (and the bridge flags clients query). Read-once flags are not
# settable: changing them after import would not change what hpusim does.
FLAGS: dict[str, Flag] = {f.name: f for f in (
    _i("PT_HPU_LAZY_MODE", 0, False, "1: lazy mode; read once at import"),
    _b("PT_ENABLE_INT64_SUPPORT", True, True, "int64 tensors kept as int64 on the device; "
       "False stores them as int32 and rejects values out of int32 range"),
    _b("PT_HPU_GPU_MIGRATION", False, False, "torch.cuda calls go to hpu; read at import"),
    _b("PT_COMPILE_ONLY_MODE", False, True, "compile graphs without running them"),
    _b("PT_HPU_PGM_ENABLE_CACHE", True, False, "lazy recipe cache; read at import"),
    _b("PT_HPU_ENABLE_CACHE_METRICS", False, False, "recipe_cache metric; read at import"),
    _i("PT_HPU_MAX_COMPOUND_OP_SIZE", sys.maxsize, False, "lazy: launch every N ops"),
    _b("PT_HPU_MAX_COMPOUND_OP_SYNC", False, False, "lazy: wait for each size-limited launch"),
    _s("PT_HPU_PLACE_ON_CPU", "", False, "ops allowed to fall back to CPU"),
    _s("PT_HPU_METRICS_FILE", "", False, "metrics dump file"),
    _s("PT_HPU_METRICS_DUMP_TRIGGERS", "", False, "metrics dump triggers"),
    _b("PT_HPU_ENABLE_REFINE_DYNAMIC_SHAPES", False, True, "dynamic-shape bucket refinement"),
    _b("PT_HPU_ENABLE_LAZY_COLLECTIVES", False, False, "collectives recorded into lazy graphs"),
    _b("PT_HPU_EAGER_PIPELINE_ENABLE", True, True, "eager op pipelining"),
    _b("PT_HPU_USE_UNSORTED_SCATTER_ADD", False, True, "scatter_add without sorting"),
    _b("PT_HPU_ENABLE_WEIGHT_SHARING", True, False, "lazy weight sharing"),
    _s("HABANA_PROFILE", "", True, "device profiling template"),
)}


def _flag(name: str) -> Flag:
    try:
        return FLAGS[name]
    except KeyError:
        raise KeyError(f"Unknown flag {name}") from None


def get(name: str) -> Any:
    """The flag's current value (its environment variable, else its default)."""
    f = _flag(name)
    text = os.environ.get(name)
    if text is None:
        return f.default
    return f.parse(name, text)


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def set(name: str, value: Any) -> None:  # noqa: A001  (the bridge's name)
    f = _flag(name)
    if not f.settable:
        raise RuntimeError(f"Flag {name} cannot be changed at run time")
    text = _to_text(value)
    f.parse(name, text)  # reject a value of the wrong kind before storing it
    os.environ[name] = text


@contextlib.contextmanager
def env_setting(name: str, value: Any) -> Iterator[None]:
    """Set a flag for the block and restore its previous value after it. As in the bridge,
    the value is not restored when the block raises."""
    previous = os.environ.get(name)
    set(name, value)
    yield
    if previous is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = previous


def _install_accessors() -> None:
    module = sys.modules[__name__]
    for name, f in FLAGS.items():
        low = name.lower()
        setattr(module, f"get_{low}", lambda _n=name: get(_n))
        if f.settable:
            setattr(module, f"set_{low}", lambda value, _n=name: set(_n, value))


_install_accessors()
