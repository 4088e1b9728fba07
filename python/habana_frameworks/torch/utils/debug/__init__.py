"""`habana_frameworks.torch.utils.debug` (htdebug): the bridge's debug helpers.

Counters and memory figures come from hpusim itself (the CPU-fallback counters, the emulated
device's allocator, the lazy engine's recipe cache). The bridge's graph-pass toggles switch
JIT passes of its TorchScript-based lazy compiler; hpusim's lazy compiler has its own passes,
so only the toggles that map onto one of them change anything here (see _PASS_TOGGLES); the
others keep their value so that scripts reading it back see what they set.
"""
from __future__ import annotations

import datetime
import os
import threading
from typing import Any

import torch

from ... import _lazy, _native
from ..._ops import fallback
from ..internal import is_lazy

_toggle_lock = threading.Lock()
# Bridge graph-pass toggles and their state. "fuse" is the one with a counterpart in hpusim
# (the lazy compiler's elementwise fusion, HPUSIM_LAZY_FUSION); the JIT passes (CSE,
# constant pooling, peephole, permute, ...) do not exist in hpusim's compiler and are
# recorded only.
_PASS_TOGGLES: dict[str, bool] = {
    "eliminate_common_subexpression": True, "eliminate_dead_code": True,
    "constant_pooling": True, "peephole_optimization": True, "fuse_t_mm_optimization": True,
    "fuse_bn_relu_optimization": True, "bn_param_recalculation": True,
    "fuse_conv_bn_optimization": True, "permute_pass": True, "replace_inplace_ops": True,
    "replace_views": True,
}
_module_name = ""
_synapse_layout_handling = True
_dynamic_mode = False


def _set_toggle(name: str, flag: bool) -> None:
    with _toggle_lock:
        _PASS_TOGGLES[name] = bool(flag)


def _get_fallback_op_count() -> dict[str, int]:
    """Ops that ran on the CPU fallback so far, by name, with their call counts."""
    return fallback.counts()


def _get_shape_agnostic_unsupported_ops() -> set[str]:
    """Ops the eager shape-agnostic compiler could not take: hpusim's eager mode runs each op
    without a per-shape recipe, so the ops that left the device are the CPU fallbacks."""
    return set(fallback.counts())


def _get_eager_compiler_unsupported_op_prefixes() -> list[str]:
    return []


def _get_jit_cache_size() -> int:
    """Recipes held by the lazy engine's cache (0 in eager mode: nothing is compiled)."""
    s = _lazy.stats()
    return int(s.get("cached_recipes", len(s.get("recipe_miss", {}))))


def _clear_jit_cache() -> None:
    """Flush pending work; hpusim's recipe cache is bounded by HPUSIM_RECIPE_CACHE_SIZE."""
    _lazy.step(wait=True, reason="clear_jit_cache")


def _flush_disk_cache() -> None:
    """hpusim keeps recipes in memory only (no PT_HPU_RECIPE_CACHE_CONFIG disk cache)."""


def _set_dynamic_mode() -> None:
    global _dynamic_mode
    _dynamic_mode = True


def _set_module_name(name: str = "") -> None:
    global _module_name
    _module_name = name


def _enable_eliminate_common_subexpression(flag: bool) -> None:
    _set_toggle("eliminate_common_subexpression", flag)


def _enable_eliminate_dead_code(flag: bool) -> None:
    _set_toggle("eliminate_dead_code", flag)


def _enable_constant_pooling(flag: bool) -> None:
    _set_toggle("constant_pooling", flag)


def _enable_peephole_optimization(flag: bool) -> None:
    _set_toggle("peephole_optimization", flag)


def _enable_fuse_t_mm_optimization(flag: bool) -> None:
    _set_toggle("fuse_t_mm_optimization", flag)


def _enable_fuse_bn_relu_optimization(flag: bool) -> None:
    _set_toggle("fuse_bn_relu_optimization", flag)


def _enable_bn_param_recalculation(flag: bool) -> None:
    _set_toggle("bn_param_recalculation", flag)


def _enable_fuse_conv_bn_optimization(flag: bool) -> None:
    _set_toggle("fuse_conv_bn_optimization", flag)


def _enable_permute_pass(flag: bool) -> None:
    _set_toggle("permute_pass", flag)


def _enable_replace_inplace_ops(flag: bool) -> None:
    _set_toggle("replace_inplace_ops", flag)


def _enable_replace_views(flag: bool) -> None:
    _set_toggle("replace_views", flag)


def _is_enabled_weight_permute_pass() -> bool:
    return _PASS_TOGGLES["permute_pass"]


def _is_enabled_synapse_layout_handling() -> bool:
    return _synapse_layout_handling


def _is_enabled_lazy_collectives() -> bool:
    return is_lazy() and os.getenv("PT_HPU_ENABLE_LAZY_COLLECTIVES", "0").lower() in ("1", "true")


# --- memory statistics -------------------------------------------------------------------

_MEMSTAT_KEYS = ("Limit", "InUse", "MaxInUse", "NumAllocs", "NumFrees", "ActiveAllocs",
                 "MaxAllocSize", "TotalSystemAllocs", "TotalSystemFrees", "TotalActiveAllocs")
_collecting: dict[str, Any] = {}


def _rank() -> int:
    for var in ("RANK", "OMPI_COMM_WORLD_RANK", "LOCAL_RANK"):
        if os.getenv(var):
            try:
                return int(os.environ[var])
            except ValueError:
                pass
    return 0


def _memlog_path() -> str:
    """habana_log.livealloc.log_<rank> in HABANA_LOGS (or the working directory), or the file
    PT_HABANA_MEM_LOG_FILENAME names."""
    name = os.getenv("PT_HABANA_MEM_LOG_FILENAME")
    if name:
        return name
    return os.path.join(os.getenv("HABANA_LOGS", "."), f"habana_log.livealloc.log_{_rank()}")


def _device_stats() -> dict[str, int]:
    from ...hpu import memory_stats
    s = memory_stats()
    s["ScratchMem"] = 0
    s["Fragmentation"] = 0
    return s


def _write_memlog(title: str, msg: str, stats: dict[str, int]) -> None:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")
    lines = [f"[{stamp}] {title}: {msg}"]
    lines += [f"  {k}: {v}" for k, v in stats.items()]
    with open(_memlog_path(), "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _memstat_livealloc(msg: str = "") -> None:
    """Append the device's live-allocation statistics to the memory log."""
    _write_memlog("livealloc", msg, _device_stats())


def _memstat_devmem_start_collect(msg: str = "", show_cs: bool = True) -> None:
    """Start a collection window: the stop call logs the figures and their change."""
    _collecting["start"] = _device_stats()
    _collecting["show_cs"] = show_cs
    _write_memlog("devmem start collect", msg, _collecting["start"])


def _memstat_devmem_stop_collect(msg: str = "") -> None:
    now = _device_stats()
    start = _collecting.pop("start", None)
    if start is not None:
        now = dict(now)
        for key in ("InUse", "NumAllocs", "NumFrees"):
            now[f"Delta{key}"] = now[key] - start[key]
    _write_memlog("devmem stop collect", msg, now)


def _mem_log(msg: str) -> None:
    _write_memlog("mem_log", msg, _device_stats())


def _dump_memory_reporter() -> None:
    """memory.reporter.json with the device's statistics (the bridge writes it only when
    PT_HABANA_MEM_LOG_LEVEL=7, and so does hpusim)."""
    if os.getenv("PT_HABANA_MEM_LOG_LEVEL") != "7":
        return
    import json
    path = os.path.join(os.getenv("HABANA_LOGS", "."), "memory.reporter.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"device": 0, "stats": _device_stats(),
                   "cpu_fallback": fallback.counts()}, f, indent=1)


def _dump_recipe_memory_stat() -> None:
    _write_memlog("recipe memory", "", {"recipes": _get_jit_cache_size()})


# The dynamic-shape bucket and synapse-recipe reports describe the bridge's bucket refinement,
# which hpusim does not have: each lazy graph shape is its own recipe. They write nothing.
def _dump_refined_recipe_stat() -> None:
    pass


def _disable_bucket_refinement() -> None:
    pass


def _dump_bucket_memory_stat() -> None:
    pass


def _dump_history_memory_stat() -> None:
    pass


def _dump_synapse_recipe_memory_stat() -> None:
    pass


def _dump_dynamic_shape_memory_stat() -> None:
    pass


def clear_dynamic_bucket_recipe_info() -> None:
    pass


def _hb_print(msg: str) -> None:
    print(msg, flush=True)


_hg_print = _hb_print


def get_tensor_info(tensor: torch.Tensor):
    """(data pointer, bytes) of an hpu tensor's device storage; None for other tensors."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "hpu":
        return None
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def _bridge_cleanup() -> None:
    """Finish pending device work and release cached device blocks."""
    _lazy.step(wait=True, reason="bridge_cleanup")
    _native.empty_cache()


def _towl_configure(flag: bool, config: str = "") -> None:
    pass


def _towl_print(text: str) -> None:
    pass
