"""Device memory statistics with the bridge's keys and formats."""
from __future__ import annotations

import warnings
from typing import Any

import habana_frameworks.torch.hpu as hpu  # noqa: F401  (re-exported: lightning calls torch_hpu.hpu.memory_stats)

from .. import _native
from ._utils import _get_device_index


def _index(device: Any) -> int:
    idx = _get_device_index(device, optional=True)
    if idx < 0 or idx >= _native.device_count():
        raise AssertionError("Invalid device id")
    return idx


def memory_stats(device: Any = None) -> dict[str, int]:
    s = _native.memory_stats(_index(device))
    return {
        "Limit": s["Limit"], "InUse": s["InUse"], "MaxInUse": s["MaxInUse"],
        "NumAllocs": s["NumAllocs"], "NumFrees": s["NumFrees"],
        "ActiveAllocs": s["NumAllocs"] - s["NumFrees"], "MaxAllocSize": s["MaxAllocSize"],
        "TotalSystemAllocs": s["TotalSystemAllocs"], "TotalSystemFrees": s["TotalSystemFrees"],
        "TotalActiveAllocs": s["TotalSystemAllocs"] - s["TotalSystemFrees"],
    }


def memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["InUse"]


def max_memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["MaxInUse"]


def memory_usage(device: Any = None) -> int:
    """The device memory in use, as hl-smi reports it (the bridge's torch.hpu.memory_usage)."""
    return memory_stats(device)["InUse"]


def memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["Limit"]


def max_memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["Limit"]


def memory_cached(device: Any = None) -> int:
    warnings.warn("torch.hpu.memory_cached has been renamed to torch.hpu.memory_reserved", FutureWarning)
    return memory_reserved(device)


def max_memory_cached(device: Any = None) -> int:
    warnings.warn("torch.hpu.max_memory_cached has been renamed to torch.hpu.max_memory_reserved", FutureWarning)
    return max_memory_reserved(device)


def reset_peak_memory_stats(device: Any = None) -> None:
    _native.reset_peak(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _native.reset_accumulated(_index(device))


def mem_get_info(device: Any = None) -> tuple[int, int]:
    s = memory_stats(device)
    return s["Limit"] - s["InUse"], s["Limit"]


def empty_cache() -> None:
    """Return the blocks the device allocator keeps for reuse to the host (counted in
    TotalSystemFrees); memory still in use, or held by pending lazy graphs, stays."""
    _native.empty_cache()


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    idx = _index(device)
    s = memory_stats(idx)
    mb = 1024.0 * 1024.0
    lines = [
        "|" + "=" * 75 + "|",
        "|" + f" PyTorch HPU memory summary, device ID {idx} ".center(75) + "|",
        "|" + "-" * 75 + "|",
        "  Limit: %20d (%.2f GB)" % (s["Limit"], s["Limit"] / (mb * 1024)),
        "  InUse: %20d (%.2f MB)" % (s["InUse"], s["InUse"] / mb),
        "  MaxInUse: %17d (%.2f MB)" % (s["MaxInUse"], s["MaxInUse"] / mb),
        "  NumAllocs: %16d" % s["NumAllocs"],
        "  NumFrees: %17d" % s["NumFrees"],
        "  MaxAllocSize: %13d (%.2f MB)" % (s["MaxAllocSize"], s["MaxAllocSize"] / mb),
        "  ActiveAllocs: %13d" % s["ActiveAllocs"],
        "|" + "=" * 75 + "|",
    ]
    return "\n".join(lines) + "\n"


def _extended_memory_summary_dict(device: Any = None) -> dict[str, int]:
    s = memory_stats(device)
    return {
        "limit": s["Limit"], "in_use": s["InUse"], "persistent": 0, "workspace": 0,
        "last_workspace": 0, "future": 0, "max_cntgs_chunk": s["Limit"] - s["InUse"],
        "max_in_use": s["MaxInUse"], "num_allocs": s["NumAllocs"], "num_free": s["NumFrees"],
        "max_alloc_size": s["MaxAllocSize"], "active_allocs": s["ActiveAllocs"],
    }
