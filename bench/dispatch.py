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
import torch.nn as nn
import torch.nn.functional as F

import habana_frameworks.torch  # noqa: F401  (registers the hpu device)


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


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class TinyLM(nn.Module):
    """A 2-layer pre-norm transformer LM, d_model 64: many small ops per step."""

    def __init__(self, vocab: int = 96, d: int = 64, heads: int = 4, layers: int = 2, ctx: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({
                "ln1": nn.LayerNorm(d), "qkv": nn.Linear(d, 3 * d), "proj": nn.Linear(d, d),
                "ln2": nn.LayerNorm(d), "fc1": nn.Linear(d, 4 * d), "fc2": nn.Linear(4 * d, d)}))
        self.ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)
        self.heads = heads

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        bsz, t = idx.shape
        h = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        mask = torch.triu(torch.full((t, t), float("-inf"), device=idx.device), 1)
        for blk in self.blocks:
            y = blk["ln1"](h)
            q, k, v = blk["qkv"](y).split(h.shape[-1], dim=-1)
            q, k, v = (z.view(bsz, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            att = torch.softmax(q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5) + mask, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(bsz, t, -1)
            h = h + blk["proj"](y)
            h = h + blk["fc2"](F.gelu(blk["fc1"](blk["ln2"](h))))
        return self.out(self.ln(h))


def step_case(name: str, dev: str) -> Callable[[], object]:
    """One training step (zero_grad, forward, loss, backward, AdamW step) on dev."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    if name == "mlp":
        model: nn.Module = MLP()
        x = torch.randn(64, 64, generator=g)
        y = torch.randint(0, 10, (64,), generator=g)
    elif name == "cnn":
        model = CNN()
        x = torch.randn(32, 1, 16, 16, generator=g)
        y = torch.randint(0, 10, (32,), generator=g)
    else:
        model = TinyLM()
        x = torch.randint(0, 96, (8, 32), generator=g)
        y = torch.randint(0, 96, (8, 32), generator=g)
    model = model.to(dev)
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
        for name in ("mlp", "cnn", "tiny_lm"):
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
