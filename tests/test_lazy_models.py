"""The reference models train in lazy mode exactly as in eager mode: the same steps run
lazily in this process (the lazy pytest pass) and eagerly in a child process, and the
losses agree to float32 tolerance; after the first steps every step replays cached
recipes (no new compilations) and nothing falls back to the CPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from habana_frameworks.torch import _lazy
from habana_frameworks.torch.hpu import metrics
from habana_frameworks.torch.utils.internal import is_lazy

pytestmark = pytest.mark.skipif(not is_lazy(), reason="lazy pass only (PT_HPU_LAZY_MODE=1)")

STEPS = 12
BATCH = {"mlp": 64, "cnn": 32, "transformer": 8}
CHILD = """
import json, sys, torch
import habana_frameworks.torch  # noqa: F401
from hpusim_models import build, make_batches, train_steps
name, steps, bs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
print(json.dumps(train_steps(build(name, seed=0), make_batches(name, bs, steps, seed=0), "hpu")))
"""


def _eager_losses(name: str) -> list[float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PT_HPU_")}
    env["PT_HPU_LAZY_MODE"] = "0"
    p = subprocess.run([sys.executable, "-c", CHILD, name, str(STEPS), str(BATCH[name])], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_reference_model_lazy_matches_eager(name):
    from hpusim_models import build, make_batches, make_optimizer, train_steps

    fb0 = dict(metrics.metric_global("cpu_fallback").stats())["TotalNumber"]
    torch.manual_seed(0)
    model, batches = build(name, seed=0), make_batches(name, BATCH[name], STEPS, seed=0)
    model.to("hpu")
    opt = make_optimizer(model, "adamw", 1e-3)  # what train_steps builds by default
    lazy = train_steps(model, batches, "hpu", optimizer=opt)
    eager = _eager_losses(name)
    torch.testing.assert_close(torch.tensor(lazy), torch.tensor(eager), rtol=2e-5, atol=1e-6)
    assert dict(metrics.metric_global("cpu_fallback").stats())["TotalNumber"] == fb0
    # Replays: training more steps of the same shapes compiles nothing new.
    before = _lazy.stats()["compilations"]
    train_steps(model, make_batches(name, BATCH[name], 3, seed=1), "hpu", optimizer=opt)
    assert _lazy.stats()["compilations"] == before
