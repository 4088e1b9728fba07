"""The reference models (hpusim_models) train on hpu exactly as on the CPU, with no CPU
fallback: 50 steps on hpu against the same 50 steps on the CPU (same seed, same batches).

Tolerances are what float32 honestly allows for each model (measured, see the comments);
the fallback assertions list the ops that fell back when they fail.
"""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

from habana_frameworks.torch.hpu import metrics
from hpusim_models import REFERENCE_MODELS, build, evaluate, make_batches, train_steps

STEPS = 50
BATCH_SIZE = {"mlp": 64, "cnn": 64, "transformer": 16}
# Per-step loss tolerances of the 50-step hpu trajectory against the CPU's (the CPU on one
# thread). mlp, transformer: hpu stays within ~2e-7 relative / 5e-7 absolute of the CPU over
# all 50 steps (seeds 0-2), as close as the CPU on 1 thread is to the CPU on 2.
# cnn: the bilinear-upscaled digits make conv+batch-norm outputs that differ only in the
# last float32 bits inside a max-pool window, so which element wins (and gets the gradient)
# depends on rounding; once one such near-tie resolves differently the trajectories
# separate. The CPU is no more consistent with itself: 1 thread against 2 threads differs
# by up to 1.3e-2 relative within 50 steps (seeds 0-3); hpu against the CPU by 1.4e-4 to
# 1.2e-2 (seeds 0-3; which seed separates most moves with the kernels' summation orders).
# The kernels themselves are held tightly, step by step, in test_cnn_lockstep_matches_cpu.
TOLERANCE = {"mlp": (5e-6, 1e-6), "transformer": (5e-6, 1e-6), "cnn": (2e-2, 1e-4)}


@contextlib.contextmanager
def _cpu_threads(n: int):
    """The CPU reference runs on one thread: deterministic whatever the machine, and immune
    to the OpenMP spin-wait slow-down of a busy 2-core host."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _fallback_total() -> int:
    return int(dict(metrics.metric_global("cpu_fallback").stats())["TotalNumber"])


def _assert_no_fallback(fallback_counter, total_before: int, what: str) -> None:
    fell_back = fallback_counter()
    total = _fallback_total() - total_before
    assert not fell_back and total == 0, (
        f"{what}: cpu_fallback TotalNumber {total}; ops that fell back to the CPU (op: count): "
        + ", ".join(f"{op}: {n}" for op, n in sorted(fell_back.items(), key=lambda kv: -kv[1])))


def _assert_losses_close(hpu: list[float], cpu: list[float], rtol: float, atol: float, what: str) -> None:
    assert len(hpu) == len(cpu)
    bad = [(i, h, c) for i, (h, c) in enumerate(zip(hpu, cpu)) if abs(h - c) > atol + rtol * abs(c)]
    worst = max(abs(h - c) / abs(c) for h, c in zip(hpu, cpu))
    assert not bad, (f"{what}: {len(bad)} of {len(cpu)} steps differ beyond rtol {rtol} atol {atol} "
                     f"(max relative difference {worst:.2e}); first (step, hpu, cpu): {bad[:3]}")


# ---- the package's interface -------------------------------------------------------------

def test_reference_models_interface():
    assert REFERENCE_MODELS == ("mlp", "cnn", "transformer")
    for name in REFERENCE_MODELS:
        a, b, c = build(name, seed=3), build(name, seed=3), build(name, seed=4)
        assert all(p.device.type == "cpu" for p in a.parameters())
        sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
        assert all(torch.equal(sa[k], sb[k]) for k in sa), f"{name}: same seed, different weights"
        assert any(not torch.equal(sa[k], sc[k]) for k in sa), f"{name}: seed ignored"
    with pytest.raises(ValueError):
        build("resnet")
    with pytest.raises(ValueError):
        build("mlp", dropout=0.5)


def test_build_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    build("transformer", seed=7)
    assert torch.equal(torch.rand(4), expected)


def test_transformer_dropout_setting():
    def rates(model):
        return {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    assert rates(build("transformer")) == {0.1}
    assert rates(build("transformer", dropout=0.0)) == {0.0}
    assert rates(build("cnn")) == set()


@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_make_batches(name):
    batches = make_batches(name, 8, 5, seed=1)
    assert len(batches) == 5
    again = make_batches(name, 8, 5, seed=1)
    other = make_batches(name, 8, 5, seed=2)
    assert all(torch.equal(x, x2) and torch.equal(y, y2) for (x, y), (x2, y2) in zip(batches, again))
    assert any(not torch.equal(x, x2) for (x, _), (x2, _) in zip(batches, other))
    x, y = batches[0]
    assert x.device.type == "cpu" and y.device.type == "cpu" and y.dtype == torch.long
    if name == "transformer":
        assert x.shape == (8, 64) and y.shape == (8, 64) and x.dtype == torch.long
        assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the next characters
        assert int(x.max()) < 128 and int(x.min()) >= 0
    else:
        assert x.dtype == torch.float32 and y.shape == (8,)
        assert x.shape == ((8, 1, 8, 8) if name == "mlp" else (8, 1, 28, 28))
        assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0 and int(y.max()) <= 9
    if name != "transformer":  # the fixed 80/20 split of the 1797 digits
        assert len(make_batches(name, 1437, 1, split="train")[0][0]) == 1437
        assert len(make_batches(name, 360, 1, split="test")[0][0]) == 360
        with pytest.raises(ValueError):
            make_batches(name, 361, 1, split="test")


def test_train_steps_on_cpu_learns_and_evaluates():
    model = build("mlp", seed=0)
    with _cpu_threads(1):
        losses = train_steps(model, make_batches("mlp", 64, 60, seed=0), "cpu", lr=3e-3)
        acc = evaluate(model, make_batches("mlp", 360, 1, split="test"), "cpu")
    assert len(losses) == 60 and all(isinstance(v, float) for v in losses)
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])
    assert 0.8 < acc <= 1.0
    assert model.training  # evaluate restores the mode


# ---- hpu against the CPU -----------------------------------------------------------------

@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_hpu_training_matches_cpu(name, fallback_counter):
    """50 optimizer steps (AdamW, Gaudi-style mark_step) on hpu give the CPU's losses."""
    dropout = 0.0 if name == "transformer" else None  # the hpu generator is not the CPU's
    batches = make_batches(name, BATCH_SIZE[name], STEPS, seed=0)
    with _cpu_threads(1):
        cpu_losses = train_steps(build(name, seed=0, dropout=dropout), batches, "cpu")

    model = build(name, seed=0, dropout=dropout)
    fallback_counter()  # start of the hpu run
    total_before = _fallback_total()
    hpu_losses = train_steps(model, batches, "hpu")
    fell_back = fallback_counter()
    total = _fallback_total() - total_before

    assert all(p.device.type == "hpu" for p in model.parameters())
    rtol, atol = TOLERANCE[name]
    _assert_losses_close(hpu_losses, cpu_losses, rtol, atol, f"{name} hpu vs cpu")
    assert hpu_losses[-1] < hpu_losses[0]
    assert not fell_back and total == 0, (
        f"{name}: cpu_fallback TotalNumber {total} during the hpu run; ops that fell back (op: count): "
        + ", ".join(f"{op}: {n}" for op, n in sorted(fell_back.items(), key=lambda kv: -kv[1])))


def test_cnn_lockstep_matches_cpu(fallback_counter):
    """The CNN's kernels step by step, free of the trajectory's chaos: at each of 50 steps the
    hpu model gets the CPU model's current weights and running stats, and its loss and
    gradients must match the CPU's (norm-relative differences). Measured over seeds 0-1:
    loss within 5e-7, head gradients within 1.1e-6; the gradients of the convolutions and
    batch norms before the max-pools within 2e-5 in 90% of the steps, but up to 4.4e-3 in a
    step where a max-pool near-tie (see TOLERANCE) routes the gradient to the other
    element. The conv biases have a mathematically zero gradient (batch norm follows), so
    theirs is rounding noise, bounded relative to their layer's weight gradient."""
    batches = make_batches("cnn", BATCH_SIZE["cnn"], STEPS, seed=0)
    cpu_model = build("cnn", seed=0)
    hpu_model = build("cnn", seed=0).to("hpu")
    opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-3)
    total_before = _fallback_total()
    fallback_counter()
    feature_errors = []
    for step, (x, y) in enumerate(batches):
        hpu_model.load_state_dict(cpu_model.state_dict())
        opt.zero_grad()
        with _cpu_threads(1):
            cpu_loss = F.cross_entropy(cpu_model(x), y)
            cpu_loss.backward()
        hpu_model.zero_grad()
        hpu_loss = F.cross_entropy(hpu_model(x.to("hpu")), y.to("hpu"))
        hpu_loss.backward()
        assert hpu_loss.item() == pytest.approx(cpu_loss.item(), rel=2e-6), f"step {step}"
        cpu_params = dict(cpu_model.named_parameters())
        worst_feature = 0.0
        for pname, hp in hpu_model.named_parameters():
            g_cpu, g_hpu = cpu_params[pname].grad, hp.grad.cpu()
            err = (g_hpu - g_cpu).norm().item()
            if pname in ("features.0.bias", "features.4.bias"):  # followed by batch norm
                scale = cpu_params[pname.replace("bias", "weight")].grad.norm().item()
                assert err <= 1e-3 * scale, f"step {step} {pname}: {err:.2e} (weight gradient {scale:.2e})"
                continue
            rel = err / g_cpu.norm().item()
            if pname.startswith("head"):
                assert rel <= 5e-6, f"step {step} {pname}: gradient differs by {rel:.2e}"
            else:
                assert rel <= 1e-2, f"step {step} {pname}: gradient differs by {rel:.2e}"
                worst_feature = max(worst_feature, rel)
        feature_errors.append(worst_feature)
        with _cpu_threads(1):
            opt.step()
    p90 = sorted(feature_errors)[int(0.9 * len(feature_errors)) - 1]
    assert p90 <= 5e-5, f"feature gradients differ by more than {p90:.2e} in 10% of the steps"
    _assert_no_fallback(fallback_counter, total_before, "cnn lockstep")


def test_transformer_dropout_on_hpu(fallback_counter):
    """Dropout 0.1 on hpu: the loss goes down, nothing falls back, and the run reproduces
    bit for bit under the same torch.manual_seed (the hpu generator, as on Gaudi)."""
    steps = 20
    batches = make_batches("transformer", BATCH_SIZE["transformer"], steps, seed=0)

    def run(seed: int, n: int = steps) -> tuple[list[float], dict[str, torch.Tensor]]:
        torch.manual_seed(seed)
        model = build("transformer", seed=0, dropout=0.1)
        losses = train_steps(model, batches[:n], "hpu")
        return losses, {k: v.cpu() for k, v in model.state_dict().items()}

    total_before = _fallback_total()
    fallback_counter()
    losses, state = run(1234)
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.85 * first, f"loss did not go down: {first:.3f} -> {last:.3f}"

    again, state_again = run(1234)
    assert again == losses, "same torch.manual_seed, different losses"
    assert all(torch.equal(state[k], state_again[k]) for k in state)
    other, _ = run(4321, 3)
    assert other != losses[:3], "dropout ignores the seed"
    no_dropout = train_steps(build("transformer", seed=0, dropout=0.0), batches[:3], "hpu")
    assert no_dropout != losses[:3], "dropout 0.1 changed nothing"
    _assert_no_fallback(fallback_counter, total_before, "transformer on hpu (dropout 0.1 and 0)")
