"""torch.profiler with the HPU, as the bridge wires it: at import, `torch.profiler.
ProfilerActivity` becomes an enum with an `HPU` member and `torch.profiler.profile` a subclass
that takes it. With HPU requested, the emulated device records a span for every kernel an
eager op runs, every op or fused group a lazy graph runs and every graph (recipe) launch
(bridge/devtrace.go); `export_chrome_trace` (and so `tensorboard_trace_handler`) writes
torch's trace and then adds those spans on a "/device:HPU:0" process, one thread per engine,
on the trace's own time base, plus the device's properties. perfetto, chrome://tracing and
TensorBoard's profiler plugin open the result. The spans are also profiler events of device
type HPU (`events()`, `key_averages()`, `table()` with "Self HPU"/"HPU total" columns), as the
bridge's Kineto activity source makes them. HPU-graph replays are "HPUGraph::replay" host
ranges and "recipe replay" spans on the device's graph-launch lane.

HABANA_PROFILE must be set and not "0" for device events (habana_frameworks.torch.core sets
`profile_api_light` when unset), as the bridge's device trace source requires.
"""
from __future__ import annotations

import copy
import ctypes
import enum
import gzip
import json
import os
import warnings
from typing import Any, Iterable, Optional

import torch
import torch.autograd.profiler
import torch.profiler
from torch.autograd import DeviceType
import torch.autograd.profiler_util
from torch.autograd.profiler_util import FunctionEvent

from . import _native

_TorchActivity = torch._C._profiler.ProfilerActivity
_torch_profile = torch.profiler.profile
_torch_autograd_profile = torch.autograd.profiler.profile
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
            if isinstance(self.profiler, habana_autograd_profile):
                self.profiler.add_device_spans(self._device_trace)

    def device_events(self) -> list[dict[str, Any]]:
        """The device spans of the last profiling window (start/duration in ns)."""
        return list(self._device_trace)

    def export_chrome_trace(self, path: str) -> Any:
        result = super().export_chrome_trace(path)
        if self.with_hpu:
            _merge_device_events(path, self._device_trace, self._device_lost)
        return result


class HPUDeviceEvent(FunctionEvent):
    """One span on the emulated device as a profiler event of device type HPU: its duration
    is device time (torch 2.7.1's FunctionEvent counts device time only for CUDA,
    PrivateUse1 and MTIA events) and no CPU time."""

    @property
    def device_time_total(self) -> float:
        return 0 if self.is_async else self.time_range.elapsed_us()

    @property
    def self_device_time_total(self) -> float:
        return self.device_time_total


def device_function_events(spans: list[dict[str, Any]], start_ns: int, first_id: int,
                           device: int = 0) -> list[HPUDeviceEvent]:
    """Profiler events for device spans, in µs since the profile's start."""
    out = []
    for k, ev in enumerate(spans):
        start_us = (ev["start_ns"] - start_ns) / 1000.0
        out.append(HPUDeviceEvent(
            id=first_id + k, name=ev["name"], thread=_LANES.get(ev["lane"], 9), start_us=start_us,
            end_us=start_us + ev["dur_ns"] / 1000.0, use_device="hpu", device_type=DeviceType.HPU,
            device_index=device, device_resource_id=_LANES.get(ev["lane"], 9), trace_name=ev["name"],
            input_shapes=[], stack=[]))
    return out


class habana_autograd_profile(_torch_autograd_profile):
    """torch.autograd.profiler.profile (what torch.profiler.profile drives) whose event list
    also holds the device spans of the window; the table then shows HPU time columns."""

    _device_spans: Optional[list[dict[str, Any]]] = None

    def add_device_spans(self, spans: list[dict[str, Any]]) -> None:
        if not spans:
            return
        if self._function_events is not None and not self._needs_processing:
            self._append_device_events(spans)  # already parsed (acc_events)
        else:
            self._device_spans = list(spans)

    def _ensure_function_events(self) -> None:
        if self._function_events is not None:
            return
        super()._ensure_function_events()
        spans, self._device_spans = self._device_spans, None
        if spans:
            self._append_device_events(spans)

    def _append_device_events(self, spans: list[dict[str, Any]]) -> None:
        events = self._function_events
        start_ns = 0
        if self.kineto_results is not None and hasattr(self.kineto_results, "trace_start_ns"):
            start_ns = int(self.kineto_results.trace_start_ns())
        if start_ns <= 0:
            start_ns = min(ev["start_ns"] for ev in spans)
        first_id = max((e.id for e in events if isinstance(e.id, int)), default=0) + 1
        # As torch does for a profiled device: every event reports on it (host ops with no
        # device time of their own show 0), and the table grows the device's columns.
        for e in events:
            e.use_device = "hpu"
        events.extend(device_function_events(spans, start_ns, first_id))
        events._use_device = "hpu"


_torch_build_table = torch.autograd.profiler_util._build_table


def _build_table_with_hpu(events, *args, **kwargs):
    """torch 2.7.1's table sums device time only over CUDA, PrivateUse1 and MTIA events (and
    then asserts every row's share fits in that sum). HPU rows are shown through copies that
    the sum counts; the rows, names and times are unchanged, the columns say HPU."""
    if any(getattr(e, "device_type", None) == DeviceType.HPU for e in events):
        shown = []
        for e in events:
            if getattr(e, "device_type", None) == DeviceType.HPU:
                e = copy.copy(e)
                e.device_type = DeviceType.PrivateUse1
            shown.append(e)
        events = torch.autograd.profiler_util.EventList(
            shown, use_device=getattr(events, "_use_device", "hpu"),
            profile_memory=getattr(events, "_profile_memory", False), with_flops=getattr(events, "_with_flops", False))
    return _torch_build_table(events, *args, **kwargs)


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
        if ev.get("recipe"):
            args["recipeName"] = ev["recipe"]
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
        torch.autograd.profiler.profile = habana_autograd_profile
        torch.autograd.profiler_util._build_table = _build_table_with_hpu
