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
        print(s["TotalMiss"], len(backends.recompilations()))
    """)
    env = dict(os.environ, PT_HPU_ENABLE_CACHE_METRICS="1", PT_HPU_LAZY_MODE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # One recipe per shape; the shape 5 call was the one recompilation. (Hits of compiled
    # recipes are not counted in recipe_cache yet.)
    assert out.stdout.split()[-2:] == ["2", "1"]
