"""torch.profiler with the HPU: the bridge's ProfilerActivity/profile replacement and the
emulated device's spans merged into the Chrome trace."""
import gzip
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.profiler
from torch.profiler import ProfilerActivity

import habana_frameworks.torch.core as htcore  # noqa: F401
from habana_frameworks.torch import activity_profiler

DEVICE_PID = 1_000_000


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to("hpu")


def _device_events(trace):
    return [e for e in trace["traceEvents"] if e.get("pid") == DEVICE_PID and e.get("ph") == "X"]


def test_profiler_activity_and_profile_are_the_bridges():
    assert torch.profiler.ProfilerActivity is activity_profiler.HabanaProfilerActivity
    assert {"CPU", "CUDA", "HPU"} <= set(ProfilerActivity.__members__)
    assert not isinstance(ProfilerActivity.HPU, torch._C._profiler.ProfilerActivity)
    assert torch.profiler.profile is activity_profiler.habana_profile
    p = torch.profiler.profile()  # the bridge's default: CPU and HPU
    assert p.with_hpu
    # torch's own enum members are still accepted.
    p = torch.profiler.profile(activities=[torch._C._profiler.ProfilerActivity.CPU])
    assert not p.with_hpu
    with pytest.raises(TypeError):
        torch.profiler.profile(activities=["CPU"])


def test_device_spans_merged_into_chrome_trace(tmp_path):
    m, x = _model(), torch.randn(8, 16).to("hpu")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]) as prof:
        m(x).sum().backward()
    events = prof.device_events()
    names = [e["name"] for e in events]
    assert "bgemm" in names and "ew.relu" in names
    assert all(e["dur_ns"] >= 0 for e in events)
    path = str(tmp_path / "trace.json.gz")
    prof.export_chrome_trace(path)
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    dev = _device_events(trace)
    assert len(dev) == len(events) and {e["cat"] for e in dev} == {"Kernel"}
    meta = [e for e in trace["traceEvents"] if e.get("pid") == DEVICE_PID and e.get("ph") == "M"]
    assert {"name": "/device:HPU:0"} in [e["args"] for e in meta if e["name"] == "process_name"]
    # On the trace's own time base: inside the host ops' window.
    cpu = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    lo, hi = min(e["ts"] for e in cpu), max(e["ts"] + e["dur"] for e in cpu)
    assert all(lo - 1000 <= e["ts"] <= hi + 1000 for e in dev)
    assert {"id": 0, "name": "GAUDI2", "totalGlobalMem": torch.hpu.memory_stats()["Limit"]} in trace["deviceProperties"]


def test_schedule_and_tensorboard_handler_write_device_rows(tmp_path):
    m, x = _model(), torch.randn(8, 16).to("hpu")
    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU], schedule=sched,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(str(tmp_path), "w")) as prof:
        for _ in range(5):
            m(x).sum().backward()
            prof.step()
    files = [f for f in os.listdir(tmp_path) if f.endswith(".pt.trace.json")]
    assert len(files) == 1 and files[0].startswith("w.")
    trace = json.load(open(tmp_path / files[0]))
    dev = _device_events(trace)
    # Two active steps of the same work: the same kernels twice.
    assert dev and len(dev) % 2 == 0 and [e["name"] for e in dev[: len(dev) // 2]] == [e["name"] for e in dev[len(dev) // 2:]]


def test_cpu_only_profile_has_no_device_rows(tmp_path):
    m, x = _model(), torch.randn(8, 16).to("hpu")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        m(x).sum()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    assert not _device_events(json.load(open(tmp_path / "t.json")))


def test_habana_profile_unset_disables_device_trace(monkeypatch):
    monkeypatch.setenv("HABANA_PROFILE", "0")
    with pytest.warns(UserWarning, match="HPU hardware profiling disabled"):
        with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]) as prof:
            (torch.ones(4, device="hpu") * 2).sum()
    assert prof.device_events() == []


def test_lazy_mode_traces_fused_groups_and_recipe_launches(tmp_path):
    code = f"""
import json, torch, habana_frameworks.torch.core as htcore
from torch.profiler import profile, ProfilerActivity
x = torch.randn(64, 64).to('hpu')
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]) as p:
    for _ in range(2):
        y = ((x * 2 + 1).relu() * 3).sum()
        htcore.mark_step()
p.export_chrome_trace({str(tmp_path / 'lazy.json')!r})
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, PT_HPU_LAZY_MODE="1"))
    assert r.returncode == 0, r.stderr
    dev = _device_events(json.load(open(tmp_path / "lazy.json")))
    cats = {e["cat"] for e in dev}
    assert "Recipe" in cats and ("FusedKernel" in cats or "Kernel" in cats)
    launches = [e for e in dev if e["cat"] == "Recipe"]
    assert len(launches) >= 2 and all(e["name"].startswith("graph #") for e in launches)
    fused = [e for e in dev if e["cat"] == "FusedKernel"]
    assert all(e["name"].startswith("fused(") and e["args"]["ops"] > 1 for e in fused)


def test_device_spans_are_profiler_events_in_key_averages():
    m, x = _model(), torch.randn(8, 16).to("hpu")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]) as prof:
        m(x).sum().backward()
    spans = prof.device_events()
    hpu_events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.HPU]
    assert sorted(e.name for e in hpu_events) == sorted(s["name"] for s in spans)
    rows = {r.key: r for r in prof.key_averages()}
    bgemm = [s for s in spans if s["name"] == "bgemm"]
    assert rows["bgemm"].count == len(bgemm) > 0
    # Device time is the spans' duration; device rows have no CPU time.
    assert abs(rows["bgemm"].device_time_total - sum(s["dur_ns"] for s in bgemm) / 1000) < 1e-3
    assert rows["bgemm"].self_device_time_total == rows["bgemm"].device_time_total
    assert rows["bgemm"].cpu_time_total == 0 and rows["aten::addmm"].device_time_total == 0
    assert rows["aten::addmm"].cpu_time_total > 0
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=5)
    assert "Self HPU" in table and "HPU total" in table and "Self HPU time total" in table
    # The device rows lead when sorted by device time.
    first_row = table.splitlines()[3].split()[0]
    assert first_row in {s["name"] for s in spans}


def test_cpu_only_profile_has_no_device_events():
    m, x = _model(), torch.randn(8, 16).to("hpu")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        m(x).sum()
    assert all(e.device_type == torch.autograd.DeviceType.CPU for e in prof.events())
    assert "HPU" not in prof.key_averages().table(row_limit=3)


def test_hpu_graph_replays_in_trace_and_key_averages(tmp_path):
    code = f"""
import json, torch, habana_frameworks.torch as ht, habana_frameworks.torch.core as htcore
from torch.profiler import profile, ProfilerActivity
m = torch.nn.Linear(8, 8).to('hpu')
x = torch.randn(4, 8, device='hpu')
g = ht.hpu.HPUGraph()
with ht.hpu.stream(ht.hpu.Stream()):
    g.capture_begin()
    y = m(x).relu()
    g.capture_end()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.HPU]) as p:
    for _ in range(3):
        g.replay()
    out = y.cpu()
    (x * 2).sum().cpu()
p.export_chrome_trace({str(tmp_path / 'graphs.json')!r})
rows = {{r.key: (r.count, r.cpu_time_total, r.device_time_total) for r in p.key_averages()}}
print("ROWS " + json.dumps(rows))
print("OK", bool(torch.equal(out, torch.relu(m(x)).cpu())))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PT_HPU_LAZY_MODE="1"))
    assert r.returncode == 0 and "OK True" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
    rows = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("ROWS "))[5:])
    # Each replay: a host range and a device launch span of the captured recipe.
    assert rows["HPUGraph::replay"][0] == 3 and rows["HPUGraph::replay"][1] > 0
    assert rows["recipe replay"][0] == 3 and rows["recipe replay"][2] > 0
    trace = json.load(open(tmp_path / "graphs.json"))
    dev = _device_events(trace)
    replays = [e for e in dev if e["name"] == "recipe replay"]
    assert len(replays) == 3 and all(e["cat"] == "Recipe" and e["args"]["recipeName"].startswith("recipe_")
                                     for e in replays)
    # The recorded (non-replay) graph keeps its name; the replays' kernels ran on the device.
    assert any(e["name"].startswith("graph #") for e in dev if e["cat"] == "Recipe")
    assert sum(e["name"] == "bgemm" for e in dev) >= 3
    host = [e for e in trace["traceEvents"] if e.get("name") == "HPUGraph::replay"]
    assert len(host) == 3


_LIGHTNING_FIRST = """
import importlib.util
if importlib.util.find_spec("lightning") is not None:
    import lightning  # noqa: F401
else:
    import pytorch_lightning  # noqa: F401
from lightning_habana import HPUProfiler
HPUProfiler()
print("profiler made")
"""


@pytest.mark.skipif(importlib.util.find_spec("lightning_habana") is None, reason="lightning-habana not installed")
@pytest.mark.parametrize("lazy", [False, True])
def test_lightning_imported_before_the_bridge(lazy):
    # Lightning reads torch.profiler.ProfilerActivity when it is imported. In eager mode torch's
    # device-backend autoload brings the bridge in at `import torch`, so the patch is in place
    # in any import order; in lazy mode there is no autoload, and lightning-habana's HPUProfiler
    # refuses torch's own enum with its import-order message, as on the bridge.
    env = {k: v for k, v in os.environ.items() if k not in ("PT_HPU_AUTOLOAD", "TORCH_DEVICE_BACKEND_AUTOLOAD")}
    env["PT_HPU_LAZY_MODE"] = "1" if lazy else "0"
    p = subprocess.run([sys.executable, "-c", _LIGHTNING_FIRST], env=env, capture_output=True, text=True,
                       timeout=600)
    if lazy:
        assert p.returncode != 0
        assert "lightning_habana should be imported before lightning to use HPUProfiler." in p.stderr
    else:
        assert p.returncode == 0, p.stderr[-3000:]
        assert "profiler made" in p.stdout
