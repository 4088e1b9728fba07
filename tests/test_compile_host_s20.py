"""Session 20, compiled host cost: the bridge-side recompilation record (a compiled frame
compiled again is logged with dynamo's reason, recorded, and counted by the bridge's
graph_compilation metric) and the compiled optimizer's step-count increments done on the
host (host_scalars.py), compared with eager torch on the CPU."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import habana_frameworks.torch.core as htcore  # noqa: F401
from habana_frameworks.torch.dynamo.compile_backend import backends
from habana_frameworks.torch.hpu import metrics
from habana_frameworks.torch.utils.internal import is_lazy

pytestmark = pytest.mark.skipif(is_lazy(), reason="lazy mode runs compiled graphs as lazy ops, without recipes")


def _f(x, y):
    return (x * y + 1).relu()


def test_recompilation_is_recorded_logged_and_counted(monkeypatch, capfd):
    monkeypatch.setenv("ENABLE_CONSOLE", "true")
    monkeypatch.setenv("LOG_LEVEL_PT_PYTHON", "2")
    torch._dynamo.reset()
    cf = torch.compile(_f, backend="hpu_backend", dynamic=False)
    g = torch.Generator().manual_seed(0)
    before = len(backends.recompilations())

    def call(n, dtype=torch.float32):
        x = torch.randn(n, 8, generator=g).to(dtype)
        y = torch.randn(n, 8, generator=g).to(dtype)
        with metrics.metric_localcontext("graph_compilation") as m:
            out = cf(x.to("hpu"), y.to("hpu"))
        torch.testing.assert_close(out.cpu(), _f(x, y))
        return dict(m.stats())["TotalNumber"]

    assert call(4) >= 1  # the first compilation: not a recompilation
    assert len(backends.recompilations()) == before
    assert call(4) == 0  # cached: nothing compiled
    assert call(6) >= 1  # a new shape: dynamo recompiles, new recipes
    recs = backends.recompilations()[before:]
    assert len(recs) == 1
    assert "_f" in recs[0]["frame"] and recs[0]["compile_id"].endswith("/1")
    assert "size mismatch" in recs[0]["reason"] and "expected 4, actual 6" in recs[0]["reason"]
    assert recs[0]["inputs"] == "float32[6, 8], float32[6, 8]"
    assert call(6, torch.bfloat16) >= 1
    recs = backends.recompilations()[before:]
    assert len(recs) == 2 and "dtype mismatch" in recs[1]["reason"]
    assert call(6) == 0 and call(4) == 0  # both earlier graphs still cached
    assert len(backends.recompilations()) == before + 2
    err = capfd.readouterr().err
    assert "[PT_COMPILE] Recompilation of _f" in err and "expected 4, actual 6" in err


def test_recompilation_shows_in_recipe_cache_metric():
    # recipe_cache is registered only when PT_HPU_ENABLE_CACHE_METRICS is set at import.
    code = textwrap.dedent("""
        import torch, habana_frameworks.torch.core
        from habana_frameworks.torch.hpu import metrics
        from habana_frameworks.torch.dynamo.compile_backend import backends
        cf = torch.compile(lambda x: (x * 2 + 1).relu(), backend="hpu_backend", dynamic=False)
        rc = metrics.metric_global("recipe_cache")
        rc.reset()
        for n in (4, 4, 4, 5, 5, 4):
            cf(torch.ones(n, 3, device="hpu")).cpu()
        s = dict(rc.stats())
        print(s["TotalHit"], s["TotalMiss"], len(backends.recompilations()))
    """)
    env = dict(os.environ, PT_HPU_ENABLE_CACHE_METRICS="1", PT_HPU_LAZY_MODE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # One recipe per shape; the shape 5 call was the one recompilation; the other 4 calls
    # launched a cached recipe (hits of compiled graphs count, as lazy mode's do).
    assert out.stdout.split()[-3:] == ["4", "2", "1"]
    assert "Exception ignored" not in out.stderr, out.stderr


# ---- host step-count increments (host_scalars.HostStepIncrement) --------------------------

from habana_frameworks.torch.dynamo.compile_backend import host_scalars  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("k", [1, 0.1, -3, 1e-8])
def test_host_step_increment_equals_foreach_add(dtype, k):
    values = [0.0, 1.0, 2.0 ** 24, 2.0 ** 24 + 2, 1e30, -7.5, 3.3e-8, float("inf"), 16777215.0]
    ref = [torch.tensor(v, dtype=dtype) for v in values]
    got = [t.clone() for t in ref]
    versions = [t._version for t in got]
    inc = host_scalars.HostStepIncrement(k, dtype)
    for _ in range(3):
        torch._foreach_add_(ref, k)
        inc(got)
    for r, g, v in zip(ref, got, versions):
        assert g.dtype == dtype and g.dim() == 0
        assert torch.equal(r, g), (r.item(), g.item())
        assert g._version > v


def test_host_step_increment_inference_tensors_take_the_op():
    with torch.inference_mode():
        ts = [torch.tensor(1.0), torch.tensor(2.0)]
        ref = [t.clone() for t in ts]
    inc = host_scalars.HostStepIncrement(1, torch.float32)
    with pytest.raises(RuntimeError, match="[Ii]nference"):
        inc(ts)  # as torch._foreach_add_ outside inference mode
    with pytest.raises(RuntimeError, match="[Ii]nference"):
        torch._foreach_add_(ref, 1)
    with torch.inference_mode():
        inc(ts)
        torch._foreach_add_(ref, 1)
    assert [t.item() for t in ts] == [t.item() for t in ref]


def _train(device, compiled, steps=4, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(seed + 1)
    batches = [(torch.randn(8, 12, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(steps)]

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = torch.compile(step, backend="hpu_backend") if compiled else step
    losses = [fn(x.to(device), y.to(device)).item() for x, y in batches]
    return model, opt, losses


def test_compiled_adamw_step_counts_on_the_host(monkeypatch):
    torch._dynamo.reset()
    calls = []
    original = host_scalars.HostStepIncrement.__call__

    def counted(self, tensors):
        calls.append(len(tensors))
        return original(self, tensors)

    monkeypatch.setattr(host_scalars.HostStepIncrement, "__call__", counted)
    model, opt, losses = _train("hpu", compiled=True)
    ref_model, ref_opt, ref_losses = _train("cpu", compiled=False)
    assert calls and all(n == 4 for n in calls)  # the step counts of 4 parameters, every step
    for p, rp in zip(model.parameters(), ref_model.parameters()):
        st, rst = opt.state[p], ref_opt.state[rp]
        assert st["step"].device.type == "cpu" and torch.equal(st["step"], rst["step"])
        torch.testing.assert_close(p.detach().cpu(), rp.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(st["exp_avg_sq"].cpu(), rst["exp_avg_sq"], rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-5, atol=1e-6)
