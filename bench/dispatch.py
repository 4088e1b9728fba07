"""Per-op host cost of the HPU dispatch path, hpu vs cpu, and small training steps.

Every op runs on small tensors (64x64 unless named otherwise), so the time is host
overhead, not arithmetic: torch dispatcher, the boxed Python fallback, the lowering, the
C ABI crossing and the Go kernel's fixed cost. Prints a table; --out writes JSON.

    HPUSIM_LIB_DIR=/tmp/h6/lib .venv/bin/python bench/dispatch.py [--quick] [--out x.json]

Times are the best of --repeat runs of a tight loop (noise on a shared machine only ever
makes runs slower), in microseconds per op or milliseconds per training step.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Callable

import torch
import torch.nn.functional as F

import habana_frameworks.torch  # noqa: F401  (registers the hpu device)
from hpusim_models import build, make_batches


# The clock: wall time by default; "thread" counts only the calling thread's CPU time,
# which is steadier on a loaded machine (small ops run entirely on the calling thread,
# Go kernels included, but big ones also use worker threads it does not see).
CLOCK = time.perf_counter


def best_us(fn: Callable[[], object], iters: int, repeat: int) -> float:
    """Best-of-repeat mean time of fn in microseconds."""
    for _ in range(max(iters // 10, 5)):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = CLOCK()
        for _ in range(iters):
            fn()
        best = min(best, (CLOCK() - t0) / iters * 1e6)
    return best


def op_cases(dev: str) -> dict[str, Callable[[], object]]:
    """The representative ops, each a closure over tensors on dev."""
    g = torch.Generator().manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dev)

    a, b = r(64, 64), r(64, 64)
    bias = r(64)
    w = r(32, 64)
    c = r(64, 64)
    x4 = r(8, 16, 8, 8)
    idx = torch.randint(0, 64, (64,), generator=g).to(dev)
    return {
        "add": lambda: a + b,
        "add_scalar": lambda: a + 1.0,
        "mul": lambda: a * b,
        "mul_scalar": lambda: a * 0.5,
        "add_ (in-place)": lambda: c.add_(b),
        "relu": lambda: torch.relu(a),
        "sigmoid": lambda: torch.sigmoid(a),
        "mm": lambda: a @ b,
        "addmm (linear)": lambda: F.linear(a, w, bias[:32]),
        "sum": lambda: a.sum(),
        "sum(dim)": lambda: a.sum(1),
        "softmax": lambda: torch.softmax(a, -1),
        "view/transpose/reshape": lambda: a.view(16, 256).t().reshape(64, 64),
        "contiguous(t)": lambda: a.t().contiguous(),
        "copy_": lambda: c.copy_(b),
        "zero_": lambda: c.zero_(),
        "index_select": lambda: a.index_select(0, idx),
        "conv2d 8x16x8x8": lambda: F.conv2d(x4, r(16, 16, 3, 3), padding=1),
    }


# Small batches: the step time is then mostly per-op host cost, which this script measures.
STEP_BATCH = {"mlp": 64, "cnn": 32, "transformer": 8}


def step_case(name: str, dev: str) -> Callable[[], object]:
    """One training step (zero_grad, forward, loss, backward, AdamW step) of the reference
    model `name` (hpusim_models) on dev."""
    model = build(name, seed=0, dropout=0.0 if name == "transformer" else None).to(dev)
    x, y = make_batches(name, STEP_BATCH[name], 1, seed=0)[0]
    x, y = x.to(dev), y.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=2000, help="loop length per op timing")
    ap.add_argument("--steps", type=int, default=30, help="training steps per timing")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="short loops (smoke run)")
    ap.add_argument("--ops", default="", help="comma-separated subset of op names")
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.perf_counter if args.clock == "wall" else time.thread_time
    if args.quick:
        args.iters, args.steps, args.repeat = 200, 5, 2
    torch.set_num_threads(max(torch.get_num_threads(), 1))

    results: dict[str, object] = {"torch": torch.__version__, "python": platform.python_version(),
                                  "threads": torch.get_num_threads(), "clock": args.clock, "ops": {}, "train_steps": {}}
    wanted = {s.strip() for s in args.ops.split(",") if s.strip()}
    cases = {d: op_cases(d) for d in ("cpu", "hpu")}
    print(f"{'op (64x64)':<26}{'cpu us':>9}{'hpu us':>9}{'hpu/cpu':>9}")
    for name in cases["cpu"]:
        if wanted and name not in wanted:
            continue
        cpu = best_us(cases["cpu"][name], args.iters, args.repeat)
        hpu = best_us(cases["hpu"][name], args.iters, args.repeat)
        results["ops"][name] = {"cpu_us": round(cpu, 2), "hpu_us": round(hpu, 2)}  # type: ignore[index]
        print(f"{name:<26}{cpu:9.2f}{hpu:9.2f}{hpu / cpu:9.1f}")

    if not args.no_train:
        print(f"\n{'train step':<26}{'cpu ms':>9}{'hpu ms':>9}{'cpu/hpu':>9}")
        for name in ("mlp", "cnn", "transformer"):
            cpu = best_us(step_case(name, "cpu"), args.steps, args.repeat) / 1e3
            hpu = best_us(step_case(name, "hpu"), args.steps, args.repeat) / 1e3
            results["train_steps"][name] = {"cpu_ms": round(cpu, 3), "hpu_ms": round(hpu, 3),  # type: ignore[index]
                                            "speed_vs_cpu": round(cpu / hpu, 3)}
            print(f"{name:<26}{cpu:9.3f}{hpu:9.3f}{cpu / hpu:9.2f}")

    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
