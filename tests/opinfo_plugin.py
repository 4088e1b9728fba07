"""Summary of the OpInfo suite (tests/test_opinfo.py), aggregated across pytest-xdist workers.

The test module records per-test facts (samples run, native and fallback dispatches) into
RECORDS; each xdist worker ships them to the controller through `workeroutput`, and the
controller (or the single process without xdist) joins them with the test outcomes and
prints one line:

    opinfo: N ops, M samples, native X, fallback Y, passed P, failed F, skipped S

The full summary (per test and per skip reason) is written as JSON to
$HPUSIM_OPINFO_SUMMARY (default /tmp/hpusim_opinfo_summary.json).
"""
from __future__ import annotations

import collections
import json
import os

import pytest

RECORDS: dict[str, dict] = {}  # nodeid -> facts, filled by the test module

_worker_records: dict[str, dict] = {}
_outcomes: dict[str, tuple[str, str]] = {}  # nodeid -> (outcome, skip reason)

SUMMARY_PATH = os.environ.get("HPUSIM_OPINFO_SUMMARY", "/tmp/hpusim_opinfo_summary.json")


def _is_opinfo(nodeid: str) -> bool:
    return "test_opinfo.py::test_opinfo[" in nodeid


def pytest_sessionfinish(session, exitstatus):
    wo = getattr(session.config, "workeroutput", None)
    if wo is not None:
        wo["opinfo_records"] = json.dumps(RECORDS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    data = getattr(node, "workeroutput", {}).get("opinfo_records")
    if data:
        _worker_records.update(json.loads(data))


def pytest_runtest_logreport(report):
    if not _is_opinfo(report.nodeid):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        reason = ""
        if report.skipped:
            lr = report.longrepr
            reason = lr[2] if isinstance(lr, tuple) else str(lr)
            reason = reason.removeprefix("Skipped: ")
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
            reason = report.wasxfail.removeprefix("reason: ")
        _outcomes[report.nodeid] = (outcome, reason)
    elif report.when == "teardown" and report.failed:
        _outcomes[report.nodeid] = ("failed", "")


def _summary() -> dict | None:
    if not _outcomes:
        return None
    records = dict(RECORDS)
    records.update(_worker_records)
    count = collections.Counter(o for o, _ in _outcomes.values())
    reasons = collections.Counter()
    for o, r in _outcomes.values():
        if o in ("skipped", "xfailed"):
            reasons[f"{o}: {r.split(' [', 1)[0]}"] += 1
    fallback_ops: collections.Counter[str] = collections.Counter()
    native_ops: collections.Counter[str] = collections.Counter()
    for rec in records.values():
        fallback_ops.update(rec.get("fallback_ops", {}))
        native_ops.update(rec.get("native_ops", {}))
    ops = {rec["op"] for rec in records.values()} | {n.split("[", 1)[-1].rsplit("-", 1)[0]
                                                      for n in _outcomes}
    return {
        "ops": len(ops),
        "tests": len(_outcomes),
        "samples": sum(r.get("samples", 0) for r in records.values()),
        "compared": sum(r.get("compared", 0) for r in records.values()),
        "inplace_compared": sum(r.get("inplace_compared", 0) for r in records.values()),
        "out_compared": sum(r.get("out_compared", 0) for r in records.values()),
        "native_calls": sum(native_ops.values()),
        "fallback_calls": sum(fallback_ops.values()),
        "outcomes": dict(count),
        "skip_reasons": dict(reasons.most_common()),
        "fallback_ops": dict(fallback_ops.most_common()),
        "native_ops": dict(native_ops.most_common()),
        "tests_detail": {n: {"outcome": _outcomes[n][0], "reason": _outcomes[n][1],
                             **records.get(n, {})} for n in sorted(_outcomes)},
    }


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if getattr(config, "workeroutput", None) is not None:
        return
    s = _summary()
    if s is None:
        return
    with open(SUMMARY_PATH, "w") as f:
        json.dump(s, f, indent=1, sort_keys=False)
    o = s["outcomes"]
    terminalreporter.write_line(
        f"opinfo: {s['ops']} ops, {s['samples']} samples ({s['compared']} compared, "
        f"{s['inplace_compared']} in-place, {s['out_compared']} out=), "
        f"native {s['native_calls']}, fallback {s['fallback_calls']}, "
        f"passed {o.get('passed', 0)}, failed {o.get('failed', 0)}, "
        f"skipped {o.get('skipped', 0)}, xfailed {o.get('xfailed', 0)} -> {SUMMARY_PATH}")
    for r, n in list(s["skip_reasons"].items())[:15]:
        terminalreporter.write_line(f"  {n:4d}  {r}")
