"""Worker: training-step throughput of each reference model on one device, in one process
(the mode's environment is set by bench/run.py before this process starts)."""
from __future__ import annotations

import time
from typing import Any

import torch

from bench_common import NO_TURNS, Turns, median
from hpusim_models import build, make_batches, make_optimizer, train_steps
from hpusim_models.training import loss_fn

BATCH_SIZE = {"mlp": 64, "cnn": 64, "transformer": 16}
DATA_POOL = 16  # distinct batches, cycled (data preparation is not what is measured)


def _fallback_counts(device: str) -> dict[str, int]:
    if device != "hpu":  # the CPU baseline never loads hpusim
        return {}
    try:
        from habana_frameworks.torch._ops import fallback
    except ImportError:
        return {}
    return fallback.counts()


def _compiled_step(model: torch.nn.Module, opt: torch.optim.Optimizer, backend: str):
    """The whole training step under torch.compile(backend=...): zero_grad, forward, loss,
    backward and optimizer.step() (dynamo breaks the graph at backward)."""
    def step(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, model(inputs), targets)
        loss.backward()
        opt.step()
        return loss

    return torch.compile(step, backend=backend)


COMPILE_STEPS = 3
# Warm-up: at least this many steps and seconds (allocator caches, recipe caches, lazy
# graphs, the CPU's clock); a 1 ms MLP step needs hundreds of steps, not five.
WARMUP = {True: (3, 0.2), False: (10, 1.0)}
# Timed repeats and the length of each; the runner hands the CPU to the next mode
# between repeats.
# --quick used to time 2 repeats of 2 steps after 1 warm-up step: milliseconds for the
# MLP, and its CPU figure moved 2.5x between two runs on a quiet machine.
REPEATS = {True: (3, 0.1), False: (7, 0.5)}


def bench_model(name: str, device: str, autocast_dtype: torch.dtype | None, quick: bool,
                compile_backend: str | None = None, turns: Turns = NO_TURNS) -> dict[str, Any]:
    """Median steps/s over timed repeats after warm-up. A step is what a Gaudi training
    loop does: batch to device, zero_grad, forward+loss (under autocast if asked),
    backward, mark_step, optimizer.step, mark_step, loss.item(). With compile_backend,
    the step (without mark_step, which is a no-op in eager mode) is one torch.compile'd
    function; compile time is reported apart (compile_seconds). The turn is handed on
    before the warm-up and before every timed repeat."""
    warmup_steps, warmup_seconds = WARMUP[quick]
    repeats, target_seconds = REPEATS[quick]
    torch.manual_seed(0)
    bs = BATCH_SIZE[name]
    pool = make_batches(name, bs, DATA_POOL, seed=0)
    model = build(name, seed=0).to(device)
    opt = make_optimizer(model, "adamw", 1e-3)

    compiled_step = _compiled_step(model, opt, compile_backend) if compile_backend else None

    def steps(n: int, start: int = 0) -> float:
        batches = [pool[(start + i) % len(pool)] for i in range(n)]
        t0 = time.perf_counter()
        if compiled_step is None:
            train_steps(model, batches, device, optimizer=opt, autocast_dtype=autocast_dtype)
        else:
            model.train()
            for inputs, targets in batches:
                compiled_step(inputs.to(device), targets.to(device)).item()
        return time.perf_counter() - t0

    compile_seconds = None
    turns.pass_turn()
    if compiled_step is not None:
        # The first steps compile (forward, backward, and the optimizer step twice: its
        # state is created at the first step); compile time is what they take beyond a
        # steady step.
        first = [steps(1, start=i) for i in range(COMPILE_STEPS)]
        steady = min(steps(1, start=COMPILE_STEPS + i) for i in range(3))
        compile_seconds = sum(first) - COMPILE_STEPS * steady
    done, spent = 0, 0.0
    while done < warmup_steps or spent < warmup_seconds:
        n = max(1, warmup_steps - done) if done < warmup_steps else max(1, done)
        spent += steps(n, start=done)
        done += n
    one = spent / done
    per_repeat = max(2 if quick else 3, round(target_seconds / max(one, 1e-6)))
    before = _fallback_counts(device)
    seconds = []
    for r in range(repeats):
        turns.pass_turn()
        seconds.append(steps(per_repeat, start=r * per_repeat))
    after = _fallback_counts(device)
    rates = [per_repeat / s for s in seconds]
    sps = median(rates)
    return {
        "steps_per_s": sps,
        "samples_per_s": sps * bs,
        "ms_per_step": 1e3 / sps,
        "repeat_steps_per_s": rates,
        "steps_per_repeat": per_repeat,
        "repeats": repeats,
        "warmup_steps": done,
        "batch_size": bs,
        "parameters": sum(p.numel() for p in model.parameters()),
        "fallbacks": {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)},
        **({"compile_seconds": compile_seconds, "compile_backend": compile_backend} if compile_backend else {}),
    }


def run(models: list[str], device: str, autocast_dtype: torch.dtype | None, quick: bool,
        compile_backend: str | None = None, turns: Turns = NO_TURNS) -> dict[str, Any]:
    """Every model's result. Under torch.compile a model whose compile fails gets
    {"error": ...} and the others still run: torch 2.7.1's inductor cannot compile the CNN's
    training step on 2 threads (its C++ for the BatchNorm backward declares `tmp_acc0_arr`
    twice: a parallel reduction inside a vectorised tail loop), with or without hpusim.
    That is torch's bug (pytorch#151290/#151523, from the inner-loop parallelisation of
    #144020; fixed by #151887, after 2.7.1), not a missing header or package: g++ gets as
    far as "conflicting declaration 'float tmp_acc0_arr [2]'" (one per thread) after a [8].
    `cpp.enable_loop_tail_vec=False` does not avoid it; on 1 thread it compiles."""
    out: dict[str, Any] = {}
    for name in models:
        if compile_backend:
            # Each model compiles from scratch, as in a script of its own: otherwise dynamo
            # recompiles the shared step function for the next model and, its sizes having
            # changed, traces it with symbolic shapes (automatic dynamic).
            torch._dynamo.reset()
        try:
            out[name] = bench_model(name, device, autocast_dtype, quick, compile_backend, turns)
        except Exception as e:  # noqa: BLE001 - reported per model
            if compile_backend is None:
                raise
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
            out[name] = {"error": f"{type(e).__name__}: {first.strip()[:300]}"}
            torch._dynamo.reset()
    return out
