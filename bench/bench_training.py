"""Worker: training-step throughput of each reference model on one device, in one process
(the mode's environment is set by bench/run.py before this process starts)."""
from __future__ import annotations

import time
from typing import Any

import torch

from bench_common import median
from hpusim_models import build, make_batches, make_optimizer, train_steps

BATCH_SIZE = {"mlp": 64, "cnn": 64, "transformer": 16}
DATA_POOL = 16  # distinct batches, cycled (data preparation is not what is measured)


def _fallback_counts() -> dict[str, int]:
    try:
        from habana_frameworks.torch._ops import fallback
    except ImportError:
        return {}
    return fallback.counts()


def bench_model(name: str, device: str, autocast_dtype: torch.dtype | None, quick: bool) -> dict[str, Any]:
    """Median steps/s over timed repeats after warm-up. A step is what a Gaudi training
    loop does: batch to device, zero_grad, forward+loss (under autocast if asked),
    backward, mark_step, optimizer.step, mark_step, loss.item()."""
    warmup, repeats = (1, 2) if quick else (5, 5)
    target_seconds = 0.0 if quick else 1.0  # length of one timed repeat
    torch.manual_seed(0)
    bs = BATCH_SIZE[name]
    pool = make_batches(name, bs, DATA_POOL, seed=0)
    model = build(name, seed=0).to(device)
    opt = make_optimizer(model, "adamw", 1e-3)

    def steps(n: int, start: int = 0) -> float:
        batches = [pool[(start + i) % len(pool)] for i in range(n)]
        t0 = time.perf_counter()
        train_steps(model, batches, device, optimizer=opt, autocast_dtype=autocast_dtype)
        return time.perf_counter() - t0

    one = steps(warmup) / warmup
    per_repeat = 2 if quick else max(3, round(target_seconds / max(one, 1e-6)))
    before = _fallback_counts()
    seconds = [steps(per_repeat, start=r * per_repeat) for r in range(repeats)]
    after = _fallback_counts()
    rates = [per_repeat / s for s in seconds]
    sps = median(rates)
    return {
        "steps_per_s": sps,
        "samples_per_s": sps * bs,
        "ms_per_step": 1e3 / sps,
        "repeat_steps_per_s": rates,
        "steps_per_repeat": per_repeat,
        "repeats": repeats,
        "warmup_steps": warmup,
        "batch_size": bs,
        "parameters": sum(p.numel() for p in model.parameters()),
        "fallbacks": {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)},
    }


def run(models: list[str], device: str, autocast_dtype: torch.dtype | None, quick: bool) -> dict[str, Any]:
    return {name: bench_model(name, device, autocast_dtype, quick) for name in models}
