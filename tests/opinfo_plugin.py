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

from opinfo_fallbacks import ALLOWED_CPU_FALLBACKS

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
        "fallback_allowed": {op: ALLOWED_CPU_FALLBACKS[op] for op in fallback_ops
                             if op in ALLOWED_CPU_FALLBACKS},
        "fallback_unlisted": sorted(op for op in fallback_ops if op not in ALLOWED_CPU_FALLBACKS),
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
    _report_fallbacks(terminalreporter, s)


def _report_fallbacks(tr, s: dict) -> None:
    """Every op still on the CPU fallback: the documented ones with their reason
    (tests/opinfo_fallbacks.py), then, loudly, those without one (a missing native kernel).
    Informational: the suite does not fail on them."""
    fb = s["fallback_ops"]
    if not fb:
        tr.write_line("opinfo fallbacks: none")
        return
    allowed, unlisted = s["fallback_allowed"], s["fallback_unlisted"]
    tr.write_line(f"opinfo fallbacks: {len(fb)} aten ops fall back ({len(allowed)} documented, "
                  f"{len(unlisted)} NOT documented)")
    for op in sorted(allowed, key=lambda o: -fb[o]):
        tr.write_line(f"  {fb[op]:5d}  {op}: {allowed[op]}")
    if unlisted:
        tr.write_sep("!", f"{len(unlisted)} aten ops fall back to CPU without a documented reason",
                     red=True, bold=True)
        for op in sorted(unlisted, key=lambda o: -fb[o]):
            tests = sorted({f"{d.get('op')}-{d.get('dtype')}" for d in s["tests_detail"].values()
                            if op in d.get("fallback_ops", {})})
            more = f", +{len(tests) - 4}" if len(tests) > 4 else ""
            tr.write_line(f"  {fb[op]:5d}  {op}  (in {', '.join(tests[:4])}{more})", red=True)
