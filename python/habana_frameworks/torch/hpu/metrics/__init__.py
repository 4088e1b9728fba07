"""The bridge's metrics API: global and local-context metrics, and dumps to file.

Metric values are read from hpusim's counters (graph_compilation and recipe_cache from the
Go lazy engine, which compiles only non-eager graphs); a local-context metric reports the
change since it was started. stats() is a list of (tag, value) tuples, as clients expect.
"""
from __future__ import annotations

import atexit
import contextlib
import datetime
import enum
import json
import os
import sys
from typing import Any, Callable

from ... import _lazy
from ..._ops import fallback


class MetricNotFound(Exception):
    pass


class InvalidMetricDumpFileFormat(Exception):
    pass


class InvalidMetricDumpTrigger(Exception):
    pass


class MetricDumpFormat(enum.Enum):
    json = "json"
    text = "text"


class MetricDumpTrigger(enum.Enum):
    process_exit = "process_exit"
    mark_step = "mark_step"
    metric_change = "metric_change"
    user = "user"


def _cpu_fallback_raw() -> dict[str, Any]:
    return {"TotalNumber": fallback.total(), "FallbackOps": fallback.counts()}


def _graph_compilation_raw() -> dict[str, Any]:
    s = _lazy.stats()
    return {"TotalNumber": s["compilations"], "TotalTime": s["compile_time_us"]}


def _defrag_raw() -> dict[str, Any]:
    # TotalTime (ms) is internal: AvgTime is derived from it per window (see Metric._values).
    s = _lazy.defrag_stats()
    return {"TotalNumber": s["number"], "TotalSuccessful": s["successful"],
            "TotalTime": s["total_ns"] / 1e6, "MaxTime": s["max_ns"] / 1e6}


def _compiled_recipe_hits() -> int:
    # A compiled graph's cached recipe is launched from Python (recipe_compiler's runners
    # keep the last recipe and skip the Go cache lookup), so its hits are counted there.
    rc = sys.modules.get("habana_frameworks.torch.dynamo.compile_backend.recipe_compiler")
    return int(rc.stats().get("recipe_hits", 0)) if rc is not None else 0


def _recipe_cache_raw() -> dict[str, Any]:
    s = _lazy.stats()
    return {"TotalHit": s["total_hit"] + _compiled_recipe_hits(), "RecipeHit": dict(s["recipe_hit"]),
            "TotalMiss": s["total_miss"], "RecipeMiss": dict(s["recipe_miss"])}


def _cache_metrics_enabled() -> bool:
    return os.getenv("PT_HPU_ENABLE_CACHE_METRICS", "").strip().lower() in ("1", "true", "yes", "on")


_SOURCES: dict[str, Callable[[], dict[str, Any]]] = {
    "graph_compilation": _graph_compilation_raw,
    "cpu_fallback": _cpu_fallback_raw,
    "memory_defragmentation": _defrag_raw,
}
if _cache_metrics_enabled():  # registered only when asked for at import, as in the bridge
    _SOURCES["recipe_cache"] = _recipe_cache_raw


def _diff(now: Any, base: Any) -> Any:
    if isinstance(now, dict):
        out = {}
        for k, v in now.items():
            d = _diff(v, base.get(k, 0 if not isinstance(v, dict) else {}))
            if not (isinstance(d, (int, float)) and d == 0 and isinstance(now, dict) and k not in _FIXED_TAGS):
                out[k] = d
        return out
    return now - base


# Top-level tags always present; nested per-op dicts keep only non-zero entries.
_FIXED_TAGS = {"TotalNumber", "TotalTime", "TotalSuccessful", "AvgTime", "MaxTime", "TotalHit", "TotalMiss"}


class Metric:
    def __init__(self, name: str, local: bool = False):
        self._name = name
        self._source = _SOURCES[name]
        self._local = local
        self._base: dict[str, Any] | None = None
        self._frozen: dict[str, Any] | None = None
        if not local:
            self._base = _zero_like(self._source())

    def name(self) -> str:
        return self._name

    def start(self) -> None:
        self._base = self._source()
        self._frozen = None

    def stop(self) -> None:
        self._frozen = self._values()

    def reset(self) -> None:
        self._base = self._source()
        self._frozen = None

    def _values(self) -> dict[str, Any]:
        if self._frozen is not None:
            return self._frozen
        now = self._source()
        base = self._base if self._base is not None else now
        vals = _diff(now, base)
        if self._name == "graph_compilation":
            n = vals.get("TotalNumber", 0)
            vals["AvgTime"] = (vals.get("TotalTime", 0) / n) if n else 0.0
        elif self._name == "memory_defragmentation":
            # The bridge's tags: the mean and the longest attempt in ms. A window's maximum
            # is the process maximum when the window saw an attempt (a longer one could only
            # come from before it in the rare case both windows have attempts).
            n = vals.get("TotalNumber", 0)
            total = vals.pop("TotalTime", 0.0)
            vals = {"TotalNumber": n, "TotalSuccessful": vals.get("TotalSuccessful", 0),
                    "AvgTime": (total / n) if n else 0.0, "MaxTime": now["MaxTime"] if n else 0.0}
        return vals

    def stats(self) -> list[tuple[str, Any]]:
        return list(self._values().items())


def _zero_like(d: dict[str, Any]) -> dict[str, Any]:
    return {k: ({} if isinstance(v, dict) else 0) for k, v in d.items()}


_globals: dict[str, Metric] = {}


def metric_global(name: str) -> Metric | None:
    if name not in _SOURCES:
        return None
    if name not in _globals:
        _globals[name] = Metric(name)
    return _globals[name]


@contextlib.contextmanager
def metric_localcontext(name: str):
    if name not in _SOURCES:
        raise MetricNotFound(f"Metric with given name ({name}) doesn't exist.")
    m = Metric(name, local=True)
    m.start()
    try:
        yield m
    finally:
        m.stop()


def _env(name: str, alias: str, default: str | None = None) -> str | None:
    return os.getenv(name) or os.getenv(alias) or default


def _rank_file(path: str) -> str:
    rank = os.getenv("RANK") or os.getenv("OMPI_COMM_WORLD_RANK")
    if rank is not None:
        base, ext = os.path.splitext(path)
        path = f"{base}-rank{rank}{ext}"
    return path


def _unique(path: str) -> str:
    if not os.path.exists(path):
        return path
    i = 1
    while os.path.exists(f"{path}.{i}"):
        i += 1
    return f"{path}.{i}"


def _render(fmt: MetricDumpFormat, trigger: str) -> str:
    now = datetime.datetime.now().isoformat()
    entries = []
    for name in _SOURCES:
        m = metric_global(name)
        assert m is not None
        entries.append((name, dict(m.stats())))
    if fmt == MetricDumpFormat.json:
        return json.dumps([{"metric_name": n, "triggered_by": trigger, "generated_on": now,
                            "statistics": s} for n, s in entries], indent=2)
    out = []
    for n, s in entries:
        out.append(f"Metric name: {n}\nTriggered by: {trigger}\nGenerated on: {now}\nStatistics:\n"
                   + "".join(f"\t{k}: {v}\n" for k, v in s.items()) + "\n")
    return "".join(out)


def _format_of(fmt: Any) -> MetricDumpFormat:
    if isinstance(fmt, MetricDumpFormat):
        return fmt
    try:
        return MetricDumpFormat(str(fmt).strip().lower())
    except ValueError:
        raise InvalidMetricDumpFileFormat(f"Invalid metric file format: {fmt}") from None


def metrics_dump(file_name: str, format: Any = MetricDumpFormat.json) -> None:
    fmt = _format_of(format)
    with open(file_name, "w", encoding="utf-8") as f:
        f.write(_render(fmt, MetricDumpTrigger.user.value))


def _triggers() -> set[str]:
    spec = _env("PT_HPU_METRICS_DUMP_TRIGGERS", "HABANA_PT_METRICS_DUMP_TRIGGERS", "process_exit") or ""
    out = set()
    for t in spec.split(","):
        t = t.strip()
        if not t:
            continue
        if t not in MetricDumpTrigger.__members__:
            raise InvalidMetricDumpTrigger(f"Invalid metric dump trigger: {t}")
        out.add(t)
    return out


def dump_if_configured(trigger: str) -> None:
    """Write the configured metrics file when `trigger` is one of the configured triggers."""
    path = _env("PT_HPU_METRICS_FILE", "HABANA_PT_METRICS_FILE")
    if not path or trigger not in _triggers():
        return
    fmt = _format_of(_env("PT_HPU_METRICS_FILE_FORMAT", "HABANA_PT_METRICS_FILE_FORMAT", "json"))
    target = _unique(_rank_file(path))
    with open(target, "w", encoding="utf-8") as f:
        f.write(_render(fmt, trigger))


_last_seen: dict[str, Any] | None = None


def _snapshot() -> dict[str, Any]:
    return {name: src() for name, src in _SOURCES.items()}


def dump_on_change() -> None:
    """The metric_change trigger: dump when any metric moved since the last check (checked
    at step markers and at exit, where graphs are compiled and fallbacks counted)."""
    global _last_seen
    path = _env("PT_HPU_METRICS_FILE", "HABANA_PT_METRICS_FILE")
    if not path or MetricDumpTrigger.metric_change.value not in _triggers():
        return
    now = _snapshot()
    if _last_seen is None:
        _last_seen = {name: _zero_like(v) for name, v in now.items()}
    if now != _last_seen:
        _last_seen = now
        dump_if_configured(MetricDumpTrigger.metric_change.value)


def _at_exit() -> None:
    dump_on_change()
    dump_if_configured(MetricDumpTrigger.process_exit.value)


atexit.register(_at_exit)
