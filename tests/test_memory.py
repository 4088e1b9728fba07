"""Device memory pressure: the memory_defragmentation metric. Before reporting out of
memory, the allocator waits for in-flight graphs and releases the frees they deferred (in
lazy mode the pending graph is launched too), then retries; every attempt is counted.
Each case runs a child process with a small HPUSIM_MEMORY_LIMIT."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap


def run(code: str, lazy: bool, **env) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("PT_HPU_")}
    e["PT_HPU_LAZY_MODE"] = "1" if lazy else "0"
    e.update(env)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


PRELUDE = """
import json, torch
import habana_frameworks.torch.core as htcore
from habana_frameworks.torch.hpu import metrics
def defrag(): return dict(metrics.metric_global("memory_defragmentation").stats())
"""


def test_fresh_process_shows_zeros():
    out = run(PRELUDE + "print(json.dumps(defrag()))", lazy=True)
    assert out == {"TotalNumber": 0, "TotalSuccessful": 0, "AvgTime": 0.0, "MaxTime": 0.0}


def test_lazy_deferred_frees_are_reclaimed_before_oom():
    # Each iteration allocates 16 MiB and drops it; in lazy mode the frees wait for the
    # pending graph, so a 64 MiB device fills up unless the allocator defragments.
    out = run(PRELUDE + textwrap.dedent("""
    acc = torch.zeros(4, device="hpu")
    for i in range(12):
        x = torch.full((4 << 20,), float(i), device="hpu")
        acc = acc + x[:4]
        del x
    htcore.mark_step()
    d = defrag()
    print(json.dumps({"acc": acc.cpu().tolist(), **d,
                      "in_use": torch.hpu.memory_stats()["InUse"]}))
    """), lazy=True, HPUSIM_MEMORY_LIMIT="64MB")
    assert out["acc"] == [66.0] * 4
    assert out["TotalNumber"] >= 1
    assert out["TotalSuccessful"] == out["TotalNumber"]
    assert 0 < out["AvgTime"] <= out["MaxTime"]


def test_real_oom_counts_a_failed_attempt_and_keeps_the_bridge_message():
    out = run(PRELUDE + textwrap.dedent("""
    with metrics.metric_localcontext("memory_defragmentation") as local:
        try:
            torch.empty(128 << 20, dtype=torch.uint8, device="hpu")
            msg = ""
        except RuntimeError as e:
            msg = str(e)
    print(json.dumps({"msg": msg, "local": dict(local.stats()), **defrag()}))
    """), lazy=True, HPUSIM_MEMORY_LIMIT="64MB")
    assert "FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::134217728 (128)MB" in out["msg"]
    assert out["TotalNumber"] == 1 and out["TotalSuccessful"] == 0
    assert out["MaxTime"] >= out["AvgTime"] >= 0
    assert out["local"]["TotalNumber"] == 1 and out["local"]["TotalSuccessful"] == 0


def test_eager_oom_is_counted_too():
    out = run(PRELUDE + textwrap.dedent("""
    a = torch.empty(48 << 20, dtype=torch.uint8, device="hpu")
    try:
        torch.empty(32 << 20, dtype=torch.uint8, device="hpu")
    except RuntimeError:
        pass
    del a
    b = torch.empty(32 << 20, dtype=torch.uint8, device="hpu")
    print(json.dumps(defrag()))
    """), lazy=False, HPUSIM_MEMORY_LIMIT="64MB")
    assert out["TotalNumber"] == 1 and out["TotalSuccessful"] == 0
