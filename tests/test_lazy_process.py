"""Lazy mode behaviour that needs a fresh process: the bridge's metric semantics (fresh
zeros, one compilation per distinct graph, cache hits), PT_HPU_MAX_COMPOUND_OP_SIZE, the
flush at exit, metric dumps on mark_step, graph dumps, and fusion never changing a result
(lazy against eager, bitwise). Each case runs a child Python with its own environment, so
these run in both the eager and the lazy pytest pass."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest


def run(code: str, tmp_path, lazy: bool = True, **env) -> str:
    e = dict(os.environ)
    for k in list(e):
        if k.startswith(("PT_HPU_", "GRAPH_VISUALIZATION", "LOG_LEVEL")):
            del e[k]
    e["PT_HPU_LAZY_MODE"] = "1" if lazy else "0"
    e.update({k: str(v) for k, v in env.items()})
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=e,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


PRELUDE = """
import json, torch
import habana_frameworks.torch.core as htcore
from habana_frameworks.torch.hpu import metrics
def gc(): return dict(metrics.metric_global("graph_compilation").stats())
def rc(): return dict(metrics.metric_global("recipe_cache").stats())
"""


def test_fresh_process_shows_zeros(tmp_path):
    out = run(PRELUDE + """
print(json.dumps([gc(), rc()]))
""", tmp_path, PT_HPU_ENABLE_CACHE_METRICS=1)
    g, r = json.loads(out)
    assert g == {"TotalNumber": 0, "TotalTime": 0, "AvgTime": 0.0}
    assert r == {"TotalHit": 0, "RecipeHit": {}, "TotalMiss": 0, "RecipeMiss": {}}


def test_same_shape_ten_times_compiles_once_then_hits(tmp_path):
    out = run(PRELUDE + """
a = torch.randn(10, 20).to("hpu")
htcore.mark_step()
before_g, before_r = gc(), rc()
for _ in range(10):
    b = (a * 2 + 1).relu().sum(0)
    htcore.mark_step()
g, r = gc(), rc()
print(json.dumps({"g": g["TotalNumber"] - before_g["TotalNumber"], "hit": r["TotalHit"] - before_r["TotalHit"],
                  "miss": r["TotalMiss"] - before_r["TotalMiss"], "rh": r["RecipeHit"], "rm": r["RecipeMiss"],
                  "avg": g["AvgTime"], "total": g["TotalTime"], "n": g["TotalNumber"]}))
""", tmp_path, PT_HPU_ENABLE_CACHE_METRICS=1)
    s = json.loads(out)
    assert (s["g"], s["hit"], s["miss"]) == (1, 9, 1)
    assert 9 in s["rh"].values() and all(v == 1 for v in s["rm"].values())
    assert s["avg"] == pytest.approx(s["total"] / s["n"])


def test_each_new_shape_adds_one_compilation(tmp_path):
    out = run(PRELUDE + """
res = []
for x in range(1, 11):
    t = torch.ones(10, 20, x).to("hpu")
    y = (t * 3).sum()
    htcore.mark_step()
    res.append(gc())
print(json.dumps(res))
""", tmp_path)
    res = json.loads(out)
    # Each step holds one new graph shape (the H2D copy and the ops together).
    assert [r["TotalNumber"] for r in res] == list(range(1, 11))
    times = [r["TotalTime"] for r in res]
    assert all(b > a for a, b in zip(times, times[1:])), times


def test_training_steps_reuse_one_recipe(tmp_path):
    out = run(PRELUDE + """
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to("hpu")
opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
htcore.mark_step()
counts = []
for i in range(10):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(m(x.to("hpu")), y.to("hpu"))
    loss.backward()
    htcore.mark_step()
    opt.step()
    htcore.mark_step()
    counts.append(gc()["TotalNumber"])
print(json.dumps({"counts": counts, "rc": rc(), "fb": dict(metrics.metric_global("cpu_fallback").stats())["TotalNumber"]}))
""", tmp_path, PT_HPU_ENABLE_CACHE_METRICS=1)
    s = json.loads(out)
    assert s["fb"] == 0
    # Step 1 differs (optimizer state is created); from then on every step replays recipes.
    assert s["counts"][-1] == s["counts"][2], s["counts"]
    assert s["rc"]["TotalHit"] >= 14


def test_eager_mode_compiles_nothing(tmp_path):
    out = run(PRELUDE + """
a = torch.randn(10).to("hpu")
for _ in range(3):
    b = a * 2
    htcore.mark_step()
print(json.dumps(gc()))
""", tmp_path, lazy=False)
    assert json.loads(out)["TotalNumber"] == 0


def test_max_compound_op_size_launches_every_n_ops(tmp_path):
    out = run("""
import json, torch
import habana_frameworks.torch.core as htcore
from habana_frameworks.torch import _lazy
a = torch.ones(4).to("hpu")
htcore.mark_step(sync=True)
s0 = _lazy.stats()["launched"]
x = a
for _ in range(7):
    x = x + 1
print(json.dumps([_lazy.stats()["launched"] - s0, _lazy.pending_ops(), x.cpu().tolist()]))
""", tmp_path, PT_HPU_MAX_COMPOUND_OP_SIZE=3)
    launched, pending, vals = json.loads(out)
    assert (launched, pending) == (2, 1)
    assert vals == [8.0] * 4


def test_max_compound_op_sync_waits_for_each_capped_graph(tmp_path):
    # With PT_HPU_MAX_COMPOUND_OP_SYNC, the launch at the size cap returns only once the
    # graph ran: right after the 3rd and 6th op nothing is in flight, and the host waited.
    code = """
import json, torch
import habana_frameworks.torch.core as htcore
from habana_frameworks.torch import _lazy
a = torch.randn(768, 768).to("hpu")
htcore.mark_step(sync=True)
s0 = _lazy.stats()
x, seen = a, []
for i in range(7):
    x = x @ a
    if i in (2, 5):
        s = _lazy.stats()
        seen.append([s["inflight"], s["launched"] - s0["launched"], _lazy.pending_ops()])
s = _lazy.stats()
print(json.dumps([seen, s["host_wait_ns"] > s0["host_wait_ns"], torch.isfinite(x.cpu()).all().item()]))
"""
    seen, waited, ok = json.loads(run(code, tmp_path, PT_HPU_MAX_COMPOUND_OP_SIZE=3,
                                      PT_HPU_MAX_COMPOUND_OP_SYNC=1))
    assert seen == [[0, 1, 0], [0, 2, 0]]
    assert waited and ok


def test_pending_graph_runs_at_exit(tmp_path):
    run("""
import torch
import habana_frameworks.torch.core as htcore
a = torch.ones(3).to("hpu")
b = a * 5
# no mark_step: the graph must still run (and be counted) at exit
""", tmp_path, PT_HPU_METRICS_FILE=tmp_path / "m.json")
    data = json.loads((tmp_path / "m.json").read_text())
    gcm = next(d for d in data if d["metric_name"] == "graph_compilation")
    assert gcm["triggered_by"] == "process_exit"
    assert gcm["statistics"]["TotalNumber"] == 1


def test_metrics_dump_on_mark_step_per_rank(tmp_path):
    run("""
import torch
import habana_frameworks.torch.core as htcore
a = torch.ones(3).to("hpu")
for _ in range(2):
    b = a * 5
    htcore.mark_step()
""", tmp_path, PT_HPU_METRICS_FILE=tmp_path / "m.txt", PT_HPU_METRICS_FILE_FORMAT="text",
        PT_HPU_METRICS_DUMP_TRIGGERS="mark_step", RANK=3)
    files = sorted(os.path.basename(f) for f in glob.glob(str(tmp_path / "m-rank3.txt*")))
    assert files == ["m-rank3.txt", "m-rank3.txt.1"]
    first, second = (tmp_path / "m-rank3.txt").read_text(), (tmp_path / "m-rank3.txt.1").read_text()
    assert "Metric name: graph_compilation\nTriggered by: mark_step\n" in second
    # Step 1 is the H2D copy plus the multiply, step 2 the multiply alone: two recipes.
    assert "Statistics:\n\tTotalNumber: 1\n" in first
    assert "Statistics:\n\tTotalNumber: 2\n" in second


def test_metric_change_trigger_dumps_only_on_change(tmp_path):
    run("""
import torch
import habana_frameworks.torch.core as htcore
a = torch.ones(3).to("hpu")
htcore.mark_step()          # compiles: change
for _ in range(3):
    b = a * 5
    htcore.mark_step()      # first compiles (change), the rest hit (no change)
""", tmp_path, PT_HPU_METRICS_FILE=tmp_path / "m.json", PT_HPU_METRICS_DUMP_TRIGGERS="metric_change")
    files = glob.glob(str(tmp_path / "m.json*"))
    assert len(files) == 2
    for f in files:
        assert all(d["triggered_by"] == "metric_change" for d in json.loads(open(f).read()))


def test_graph_dumps_before_and_after_passes(tmp_path):
    run("""
import torch
import habana_frameworks.torch.core as htcore
a = torch.randn(64).to("hpu")
htcore.mark_step()
for _ in range(3):
    b = (a * 2 + 1).relu()
    htcore.mark_step()
""", tmp_path, GRAPH_VISUALIZATION=1)
    pre = sorted(glob.glob(str(tmp_path / ".graph_dumps" / "*PreGraph*")))
    post = sorted(glob.glob(str(tmp_path / ".graph_dumps" / "*PostGraph*")))
    assert len(pre) == len(post) == 2  # one per compiled graph; cache hits dump nothing
    assert "fused" in open(post[1]).read()
    if shutil.which("dot") is None:
        pytest.skip("graphviz `dot` is not installed")
    for f in pre + post:
        svg = subprocess.run(["dot", "-Tsvg", f], capture_output=True, text=True, check=True).stdout
        assert "<svg" in svg


def test_lazy_logs_follow_the_bridge_variables(tmp_path):
    code = """
import torch
import habana_frameworks.torch.core as htcore
a = torch.randn(8).to("hpu")
htcore.mark_step()
"""
    e = {"ENABLE_CONSOLE": "true", "LOG_LEVEL_ALL": "2"}
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "PT_HPU_LAZY_MODE": "1", **e}, timeout=120)
    assert "[PT_LAZY" in p.stderr and "compiled recipe_" in p.stderr
    logs = tmp_path / "logs"
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "PT_HPU_LAZY_MODE": "1", "LOG_LEVEL_PT_LAZY": "2",
                            "HABANA_LOGS": str(logs), "ENABLE_CONSOLE": "false"}, timeout=120)
    assert "[PT_LAZY" not in p.stderr
    assert "compiled recipe_" in (logs / "pytorch_log.txt").read_text()


FUSION_CHAIN = """
import sys, torch
import habana_frameworks.torch.core as htcore
g = torch.Generator().manual_seed(0)
a, b, c = (torch.randn(3, 1000, 37, generator=g) for _ in range(3))
ha, hb, hc = a.to("hpu"), b.to("hpu"), c.to("hpu")
per_row, per_col = c[:, :, :1].to("hpu"), c[0, 0].to("hpu")  # broadcast along / across rows
x = torch.nn.functional.gelu(ha * hb + hc * 0.3 + per_row) * per_col
x = torch.sigmoid(x) * torch.tanh(hb) - x.clamp(-0.5, 0.5) / (ha.abs() + 1)
y = torch.addcdiv(x, ha, hc.exp(), value=-0.7).relu_()
z = torch.where(y > 0.1, y, hb).to(torch.bfloat16) * 3
htcore.mark_step()
out = torch.cat([y.cpu().reshape(-1), z.float().cpu().reshape(-1)])
sys.stdout.buffer.write(out.numpy().tobytes())
"""


def test_fusion_never_changes_a_result(tmp_path):
    def child(lazy: bool) -> bytes:
        e = {k: v for k, v in os.environ.items() if not k.startswith("PT_HPU_")}
        e["PT_HPU_LAZY_MODE"] = "1" if lazy else "0"
        return subprocess.run([sys.executable, "-c", FUSION_CHAIN], cwd=tmp_path, env=e,
                              capture_output=True, timeout=300, check=True).stdout
    eager, lazy = child(False), child(True)
    assert len(eager) == 2 * 3 * 1000 * 37 * 4
    assert lazy == eager


REUSE_MODELS = """
import json, torch
import habana_frameworks.torch.core as htcore
from hpusim_models import build, make_batches, make_optimizer, train_steps
# The transformer's dropout draws from the hpu generator, which a process that never seeds it
# starts, as the bridge's, from the CPU default's seed: a random one per process.
torch.manual_seed(0)
out = {}
for name, bs in (("cnn", 16), ("transformer", 8)):
    model = build(name, seed=0).to("hpu")
    opt = make_optimizer(model, "adamw", 1e-3)
    losses = train_steps(model, make_batches(name, bs, 3, seed=0), "hpu", optimizer=opt)
    params = torch.cat([p.detach().cpu().reshape(-1) for p in model.parameters()])
    out[name] = [l.hex() for l in losses] + [params.double().sum().item().hex(),
                                             params.abs().double().sum().item().hex()]
if htcore.is_lazy():
    from habana_frameworks.torch import _lazy
    out["reused"] = _lazy.stats()["reused_bytes"]
print(json.dumps(out))
"""


def test_buffer_reuse_never_changes_a_result(tmp_path):
    # Training steps of the CNN and the transformer: lazy with buffer reuse (with and
    # without streaming the graph being recorded), lazy without it, and eager give
    # bitwise the same losses and weights.
    runs = {
        "reuse": json.loads(run(REUSE_MODELS, tmp_path)),
        "reuse_nostream": json.loads(run(REUSE_MODELS, tmp_path, HPUSIM_LAZY_STREAM=0)),
        "no_reuse": json.loads(run(REUSE_MODELS, tmp_path, HPUSIM_LAZY_REUSE=0)),
        "eager": json.loads(run(REUSE_MODELS, tmp_path, lazy=False)),
    }
    assert runs["reuse"]["reused"] > 0 and runs["reuse_nostream"]["reused"] > 0
    assert runs["no_reuse"]["reused"] == 0
    for name in ("cnn", "transformer"):
        for k in ("reuse", "reuse_nostream", "no_reuse"):
            assert runs[k][name] == runs["eager"][name], (k, name)


REUSE_CHAIN = """
import json, glob, torch
import habana_frameworks.torch.core as htcore
from habana_frameworks.torch import _lazy
torch.manual_seed(0)
x = torch.randn(256, 256).to("hpu")
w = (torch.randn(256, 256) * 0.05).to("hpu")
htcore.mark_step(sync=True)
freed, outs = [], []
for _ in range(3):
    t = (x @ w).relu()      # relu's output takes the dying matmul output's buffer
    t = (t @ w).sigmoid()   # and again
    y = (t @ w).tanh() * 3
    del t
    m0 = torch.hpu.memory_allocated()
    htcore.mark_step()      # returns at launch, the graph may not have run yet
    freed.append(m0 - torch.hpu.memory_allocated())
    outs.append(y.cpu())
    del y
post = "".join(open(f).read() for f in glob.glob(".graph_dumps/*PostGraph*"))
print(json.dumps({"freed": freed, "reused": _lazy.stats()["reused_bytes"],
                  "in_buffer": post.count("in buffer of"),
                  "sum": float(sum(o.double().sum() for o in outs))}))
"""


def test_buffer_reuse_releases_intermediates_at_launch(tmp_path):
    # Without streaming, nothing runs before the launch: each graph's relu/sigmoid/mul
    # outputs run in dying buffers, their own 256 KiB allocations are released by
    # mark_step() itself (before the graph runs), the PostGraph dump shows it, and the
    # result is unchanged.
    on = json.loads(run(REUSE_CHAIN, tmp_path, HPUSIM_LAZY_STREAM=0, GRAPH_VISUALIZATION=1))
    off = json.loads(run(REUSE_CHAIN, tmp_path, HPUSIM_LAZY_STREAM=0, HPUSIM_LAZY_REUSE=0))
    per_graph = on["reused"] // 3
    assert per_graph >= 2 * 256 * 256 * 4
    # At least the reused bytes come back at launch; more when the worker has already run
    # the graph and released its deferred frees by the time memory_allocated() is read.
    assert all(f >= per_graph for f in on["freed"]), on["freed"]
    assert on["in_buffer"] >= 2
    assert off["reused"] == 0
    assert on["sum"] == off["sum"]


def test_op_time_table_written_at_exit(tmp_path):
    # HPUSIM_LAZY_OPTIME: the worker's wall time per op, one row per op (fused groups by
    # their ops), written at the latest when the process exits.
    table = tmp_path / "optime.txt"
    run(PRELUDE + """
x = torch.randn(64, 64, device="hpu")
for _ in range(3):
    y = torch.relu(x @ x) * 2 + 1
    htcore.mark_step()
z = (x @ x).sum()   # left pending: runs (and is timed) at exit
""", tmp_path, HPUSIM_LAZY_OPTIME=str(table))
    lines = table.read_text().splitlines()
    assert lines[0].split() == ["total_ms", "calls", "us/call", "share", "op"]
    rows = {line.split(None, 4)[4]: int(line.split()[1]) for line in lines[1:]}
    mm = sum(n for op, n in rows.items() if "bgemm" in op or "mm" in op)
    assert mm == 4, rows  # three steps and the pending graph at exit
    assert any(op.startswith("fused(") or "relu" in op for op in rows), rows
