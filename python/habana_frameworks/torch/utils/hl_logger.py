"""The bridge's logging conventions (hl_logger), emulated.

Levels: 0 trace, 1 debug, 2 info, 3 warning, 4 error, 5 critical, 6 off. A message of
module M at level L is emitted when L >= LOG_LEVEL_M (else LOG_LEVEL_ALL, default 5), or
when the legacy masks select it (PT_HPU_LOG_MOD_MASK has M's bit and PT_HPU_LOG_TYPE_MASK
has bit L). Output goes to stderr when ENABLE_CONSOLE is true or a legacy mask is set,
otherwise to $HABANA_LOGS (default ~/.habana_logs)/pytorch_log.txt.
"""
from __future__ import annotations

import datetime
import os
import sys
import threading

LEVEL_NAMES = ("trace", "debug", "info", "warning", "error", "critical")
# Bit positions in PT_HPU_LOG_MOD_MASK (LoggerType order in the bridge; PT_FALLBACK is 0x80).
MODULE_BITS = {
    "PT_DEVICE": 0x1, "PT_KERNEL": 0x2, "PT_BRIDGE": 0x4, "PT_SYNHELPER": 0x8,
    "PT_DISTRIBUTED": 0x10, "PT_LAZY": 0x20, "PT_TRACE": 0x40, "PT_FALLBACK": 0x80,
    "PT_STATS": 0x100, "PT_TEST": 0x200, "PT_DYNAMIC_SHAPE": 0x400, "PT_DEVMEM": 0x800,
    "PT_HOSTSTAT": 0x1000, "PT_IRGRAPH": 0x2000, "PT_VIEWTABLE": 0x4000, "PT_HPUGRAPH": 0x10000,
    "PT_RECIPE_STATS": 0x20000, "PT_EAGER": 0x40000, "PT_AUTOCAST": 0x80000,
}

_lock = threading.Lock()
_file = None


def _int_env(name: str, default: int | None) -> int | None:
    v = os.getenv(name)
    if v is None or v.strip() == "":
        return default
    try:
        return int(v, 0)
    except ValueError:
        return default


def _truthy(name: str) -> bool:
    return os.getenv(name, "").strip().lower() in ("1", "true", "yes", "on")


def _masks() -> tuple[int | None, int | None]:
    return _int_env("PT_HPU_LOG_MOD_MASK", None), _int_env("PT_HPU_LOG_TYPE_MASK", None)


def enabled(module: str, level: int) -> bool:
    mod_mask, type_mask = _masks()
    if mod_mask is not None and type_mask is not None:
        if mod_mask & MODULE_BITS.get(module, 0) and type_mask & (1 << level):
            return True
    threshold = _int_env(f"LOG_LEVEL_{module}", None)
    if threshold is None:
        threshold = _int_env("LOG_LEVEL_ALL", 5)
    return level >= threshold


def _to_console() -> bool:
    mod_mask, type_mask = _masks()
    return _truthy("ENABLE_CONSOLE") or (mod_mask is not None and type_mask is not None)


def _log_file():
    global _file
    if _file is None:
        d = os.getenv("HABANA_LOGS") or os.path.join(os.path.expanduser("~"), ".habana_logs")
        try:
            os.makedirs(d, exist_ok=True)
            _file = open(os.path.join(d, "pytorch_log.txt"), "a", encoding="utf-8")
        except OSError:
            _file = sys.stderr
    return _file


def format_line(module: str, level: int, msg: str) -> str:
    ts = datetime.datetime.now().strftime("%H:%M:%S.%f")
    return f"[{ts}][{module:<12}][{LEVEL_NAMES[level]}][tid:{threading.get_native_id():X}] {msg}"


def log(module: str, level: int, msg: str) -> None:
    if not enabled(module, level):
        return
    line = format_line(module, level, msg)
    with _lock:
        out = sys.stderr if _to_console() else _log_file()
        try:
            out.write(line + "\n")
            out.flush()
        except (OSError, ValueError):
            pass
