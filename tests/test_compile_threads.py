"""hpu_backend's choice, per recipe, between kernels split over the worker pool and kernels
on the calling thread alone (recipe_compiler._ThreadTuner, kernels.EnterSolo): the choice
is timed on the recipe's first runs and never changes a result."""
from __future__ import annotations

import time

import pytest
import torch

import habana_frameworks.torch.core as htcore  # noqa: F401
from habana_frameworks.torch.dynamo.compile_backend import recipe_compiler
from habana_frameworks.torch.dynamo.compile_backend.recipe_compiler import _ThreadTuner
from hpusim_models import build, make_batches, make_optimizer
from hpusim_models.training import loss_fn


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class _FakeRecipe:
    """Runs take `cost[solo]` seconds; records the solo settings it was given."""

    def __init__(self, pool_s: float, solo_s: float):
        self.cost = {False: pool_s, True: solo_s}
        self.solo = False
        self.settings: list[bool] = []

    def set_solo(self, on: bool) -> None:
        self.solo = on
        self.settings.append(on)

    def run(self, args):
        time.sleep(self.cost[self.solo])
        return [self.solo]


@pytest.mark.parametrize("pool_s,solo_s,want", [(0.004, 0.0, True), (0.0, 0.004, False)])
def test_tuner_keeps_the_faster_side(pool_s, solo_s, want):
    rec = _FakeRecipe(pool_s, solo_s)
    tuner = _ThreadTuner(rec)
    runs = 0
    while tuner.solo is None:
        tuner.run([])
        runs += 1
        assert runs <= _ThreadTuner.WARM + 2 * _ThreadTuner.TIMED
    assert tuner.solo is want
    assert rec.solo is want and rec.settings[-1] is want
    assert set(rec.settings[:-1]) == {False, True}  # both sides were tried


def test_tuner_finished_early_keeps_the_pool():
    rec = _FakeRecipe(0.0, 0.0)
    tuner = _ThreadTuner(rec)
    tuner.run([])
    tuner.finish()
    assert tuner.solo is False and rec.solo is False


def _train(options, steps: int):
    torch.manual_seed(0)
    model = build("mlp", seed=0).to("hpu")
    opt = make_optimizer(model, "adamw", 1e-3)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = torch.compile(step, backend="hpu_backend", options=options)
    batches = make_batches("mlp", 64, 4, seed=1)
    losses = [compiled(x.to("hpu"), y.to("hpu")).item() for x, y in (batches * steps)[:steps]]
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_tuned_training_step_is_bit_equal_to_the_pool_only_step():
    """The whole compiled MLP step, long enough for every recipe to finish tuning: losses
    and parameters equal bit for bit to the same step with tuning off (the pool always)."""
    if torch.get_num_threads() < 2:
        pytest.skip("one kernel worker: nothing to tune")
    before = {id(r) for r in list(recipe_compiler._runners)}
    steps = _ThreadTuner.WARM + 2 * _ThreadTuner.TIMED + 4
    tuned_losses, tuned = _train(None, steps)
    runners = [r for r in list(recipe_compiler._runners) if id(r) not in before and r._by_sig]
    assert len(runners) >= 3  # forward, backward, optimizer
    assert all(r._tuner is None for r in runners), "every recipe decided"
    torch._dynamo.reset()
    pool_losses, pool = _train({"tune_recipe_threads": False}, steps)
    assert tuned_losses == pool_losses
    for a, b in zip(tuned, pool):
        assert torch.equal(a, b)
