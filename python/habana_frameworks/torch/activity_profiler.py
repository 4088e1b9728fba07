"""torch.profiler with the HPU, as the bridge wires it: at import, `torch.profiler.
ProfilerActivity` becomes an enum with an `HPU` member and `torch.profiler.profile` a subclass
that takes it. With HPU requested, the emulated device records a span for every kernel an
eager op runs, every op or fused group a lazy graph runs and every graph (recipe) launch
(bridge/devtrace.go); `export_chrome_trace` (and so `tensorboard_trace_handler`) writes
torch's trace and then adds those spans on a "/device:HPU:0" process, one thread per engine,
on the trace's own time base, plus the device's properties. perfetto, chrome://tracing and
TensorBoard's profiler plugin open the result. The spans are not part of `events()` or
`key_averages()`, as with the bridge's JSON merge.

HABANA_PROFILE must be set and not "0" for device events (habana_frameworks.torch.core sets
`profile_api_light` when unset), as the bridge's device trace source requires.
"""
from __future__ import annotations

import ctypes
import enum
import gzip
import json
import os
import warnings
from typing import Any, Iterable, Optional

import torch
import torch.profiler

from . import _native

_TorchActivity = torch._C._profiler.ProfilerActivity
_torch_profile = torch.profiler.profile
_DEVICE_PID = 1_000_000  # a pid no host process has: the device's rows in the trace
_LANES = {"eager": 1, "graph worker": 2, "graph launch": 3}


class HabanaProfilerActivity(enum.Enum):
    CPU = 1
    CUDA = 2
    HPU = 3
    XPU = 4
    MTIA = 5
    PrivateUse1 = 6


class DebugActivity(enum.Enum):
    SYNAPSE_FUNCTION_CALLS = 1
    BRIDGE_FUNCTION_CALLS = 2


def _bind() -> ctypes.CDLL:
    lib = _native.load()
    lib.hpusim_trace_enable.argtypes, lib.hpusim_trace_enable.restype = [ctypes.c_int], ctypes.c_int
    lib.hpusim_trace_json.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.hpusim_trace_json.restype = ctypes.c_int
    return lib


def _trace_enable(on: bool) -> None:
    _native.check(_bind().hpusim_trace_enable(1 if on else 0))


def _trace_events() -> dict[str, Any]:
    lib = _bind()
    n = lib.hpusim_trace_json(None, 0)
    while True:
        size = n + 4096  # the worker may add events between the calls
        buf = ctypes.create_string_buffer(size)
        n = lib.hpusim_trace_json(buf, size)
        if n < size:
            return json.loads(buf.value.decode())


def _to_torch_activity(a: Any) -> Optional[_TorchActivity]:
    """The torch enum member for one activity; None for HPU (recorded by hpusim)."""
    if isinstance(a, _TorchActivity):
        return None if a.name == "HPU" else a
    if isinstance(a, HabanaProfilerActivity):
        return None if a is HabanaProfilerActivity.HPU else getattr(_TorchActivity, a.name)
    raise TypeError(f"activities: expected ProfilerActivity members, got {a!r}")


def _is_hpu(a: Any) -> bool:
    return a is HabanaProfilerActivity.HPU or (isinstance(a, _TorchActivity) and a.name == "HPU")


def _device_enabled() -> bool:
    return os.environ.get("HABANA_PROFILE", "") not in ("", "0")


class habana_profile(_torch_profile):
    """torch.profiler.profile that also takes ProfilerActivity.HPU (the default activities
    are CPU and HPU, as in the bridge) and `debug_activities` (synapse and bridge call
    traces, which have no counterpart here and are accepted without effect)."""

    def __init__(self, *, activities: Optional[Iterable[Any]] = None, schedule=None, on_trace_ready=None,
                 record_shapes: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, with_modules: bool = False, experimental_config=None,
                 execution_trace_observer=None, acc_events: bool = False, use_cuda: Optional[bool] = None,
                 custom_trace_id_callback=None, debug_activities: Optional[Iterable[Any]] = None) -> None:
        requested = list(activities) if activities is not None else [HabanaProfilerActivity.CPU,
                                                                      HabanaProfilerActivity.HPU]
        self.with_hpu = any(_is_hpu(a) for a in requested)
        mapped = [t for t in (_to_torch_activity(a) for a in requested) if t is not None]
        if self.with_hpu and not mapped:
            mapped = [_TorchActivity.CPU]  # the host side of an HPU-only profile
        self.debug_activities = list(debug_activities or [])
        self._device_trace: list[dict[str, Any]] = []
        self._device_lost = 0
        self._device_on = False
        kwargs: dict[str, Any] = {}
        if use_cuda is not None:
            kwargs["use_cuda"] = use_cuda
        super().__init__(activities=mapped, schedule=schedule, on_trace_ready=on_trace_ready,
                         record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules, experimental_config=experimental_config,
                         execution_trace_observer=execution_trace_observer, acc_events=acc_events,
                         custom_trace_id_callback=custom_trace_id_callback, **kwargs)

    def start_trace(self) -> None:
        if self.with_hpu:
            if _device_enabled():
                torch.hpu.synchronize()  # work queued before the window is not counted
                _trace_enable(True)
                self._device_on = True
            else:
                warnings.warn('Tensorboard callback for HPU hardware profiling disabled. '
                              'To enable set "HABANA_PROFILE"')
        super().start_trace()

    def stop_trace(self) -> None:
        if self._device_on:
            torch.hpu.synchronize()  # the window's lazy graphs finish inside it
        super().stop_trace()
        if self._device_on:
            got = _trace_events()
            _trace_enable(False)
            self._device_on = False
            self._device_trace = got["events"]
            self._device_lost = got["lost"]

    def device_events(self) -> list[dict[str, Any]]:
        """The device spans of the last profiling window (start/duration in ns)."""
        return list(self._device_trace)

    def export_chrome_trace(self, path: str) -> Any:
        result = super().export_chrome_trace(path)
        if self.with_hpu:
            _merge_device_events(path, self._device_trace, self._device_lost)
        return result


def _read_trace(path: str) -> dict[str, Any]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _write_trace(path: str, trace: dict[str, Any]) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        json.dump(trace, f)


def device_trace_events(events: list[dict[str, Any]], base_ns: int, device: int = 0) -> list[dict[str, Any]]:
    """Chrome trace events for device spans: metadata naming the device and its lanes, then
    one complete ("X") event per span, in µs since the trace's base time."""
    pid = _DEVICE_PID + device
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"/device:HPU:{device}"}},
        {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": torch.hpu.get_device_name()}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}},
    ]
    for lane, tid in _LANES.items():
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": lane}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    for ev in events:
        args: dict[str, Any] = {"device": device}
        if ev.get("graph"):
            args["graph"] = ev["graph"]
        if ev.get("ops", 0) > 1:
            args["ops"] = ev["ops"]
        out.append({"ph": "X", "cat": ev["cat"], "name": ev["name"], "pid": pid, "tid": _LANES.get(ev["lane"], 9),
                    "ts": (ev["start_ns"] - base_ns) / 1000.0, "dur": ev["dur_ns"] / 1000.0, "args": args})
    return out


def _merge_device_events(path: str, events: list[dict[str, Any]], lost: int) -> None:
    trace = _read_trace(path)
    base = int(trace.get("baseTimeNanoseconds", 0))
    trace.setdefault("traceEvents", []).extend(device_trace_events(events, base))
    props = trace.get("deviceProperties")
    if not isinstance(props, list):
        props = []
    props.append({"id": 0, "name": torch.hpu.get_device_name(),
                  "totalGlobalMem": torch.hpu.memory_stats()["Limit"]})
    trace["deviceProperties"] = props
    if lost:
        trace["hpuDeviceEventsLost"] = lost
    _write_trace(path, trace)


def install() -> None:
    """Patch torch.profiler (once) as the bridge does at import."""
    if torch.profiler.profile is not habana_profile:
        torch.profiler.ProfilerActivity = HabanaProfilerActivity
        torch.profiler.profile = habana_profile
