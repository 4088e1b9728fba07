"""HPU graphs against eager calls: inference and a whole training step of the reference models.

    .venv/bin/python bench/hpu_graphs.py [--quick] [--models mlp,cnn,transformer] [--out x.json]

Each mode runs in its own process (lazy mode is chosen at import):
  cpu       PyTorch CPU eager
  eager     hpu eager (PT_HPU_LAZY_MODE=0)
  lazy      hpu lazy, a mark_step per call / per step
  graph     hpu lazy, replaying an HPU graph (wrap_in_hpu_graph for inference; one
            HPUGraph over zero_grad, forward, loss, backward and optimizer step for training)
Inference copies each batch to the device and calls the model under no_grad; training
uses SGD with momentum (AdamW's host-side step count would be baked into a graph, and its
capturable form needs pow(Scalar, Tensor), which hpusim runs on the CPU). Times are the median of --rounds rounds
of a loop over distinct batches, in milliseconds per call; a shared machine's speed drifts,
so compare ratios measured together.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODES = ("cpu", "eager", "lazy", "graph")
BATCH = {"mlp": 32, "cnn": 16, "transformer": 8}


def _sync(dev: str) -> None:
    import torch
    if dev == "hpu":
        torch.hpu.synchronize()


def bench_inference(name: str, mode: str, iters: int, rounds: int) -> float:
    import torch
    from hpusim_models import build, make_batches

    dev = "cpu" if mode == "cpu" else "hpu"
    model = build(name, dropout=0.0 if name == "transformer" else None).to(dev).eval()
    if mode == "graph":
        import habana_frameworks.torch as ht
        model = ht.hpu.wrap_in_hpu_graph(model)
    step = (lambda: None)
    if mode == "lazy":
        import habana_frameworks.torch.core as htcore
        step = htcore.mark_step
    batches = [x for x, _ in make_batches(name, BATCH[name], 8, seed=1)]
    times = []
    with torch.no_grad():
        for r in range(rounds + 1):  # the first round warms up (and captures)
            t0 = time.perf_counter()
            for i in range(iters):
                out = model(batches[i % len(batches)].to(dev))
                step()
            _ = out.sum().item()
            _sync(dev)
            if r:
                times.append((time.perf_counter() - t0) / iters * 1e3)
    return statistics.median(times)


def bench_training(name: str, mode: str, iters: int, rounds: int) -> float:
    import torch
    import torch.nn.functional as F
    from hpusim_models import build, make_batches

    dev = "cpu" if mode == "cpu" else "hpu"
    model = build(name, dropout=0.0 if name == "transformer" else None).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = make_batches(name, BATCH[name], 8, seed=2)

    def loss_of(x, y):
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    if mode == "graph":
        import habana_frameworks.torch as ht
        import habana_frameworks.torch.core as htcore
        sx, sy = batches[0][0].to(dev), batches[0][1].to(dev)
        opt.zero_grad(set_to_none=True)  # warm-up: the optimizer makes its state
        loss_of(sx, sy).backward()
        opt.step()
        htcore.mark_step()
        g = ht.hpu.HPUGraph()
        opt.zero_grad(set_to_none=True)
        with ht.hpu.graph(g):
            static_loss = loss_of(sx, sy)
            static_loss.backward()
            opt.step()

        def train_step(x, y):
            sx.copy_(x)
            sy.copy_(y)
            g.replay()
            return static_loss
    else:
        mark = (lambda: None)
        if mode == "lazy":
            import habana_frameworks.torch.core as htcore
            mark = htcore.mark_step

        def train_step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(x.to(dev), y.to(dev))
            loss.backward()
            mark()
            opt.step()
            mark()
            return loss
    times = []
    for r in range(rounds + 1):
        t0 = time.perf_counter()
        for i in range(iters):
            x, y = batches[i % len(batches)]
            loss = train_step(x, y)
        _ = float(loss.item())
        _sync(dev)
        if r:
            times.append((time.perf_counter() - t0) / iters * 1e3)
    return statistics.median(times)


def child(args) -> None:
    import torch
    torch.set_num_threads(args.threads)  # the CPU baseline uses the cores hpusim uses
    if args.child != "cpu":
        import habana_frameworks.torch  # noqa: F401  (lazy mode does not autoload it)
    res = {}
    for name in args.models.split(","):
        res[f"infer/{name}"] = bench_inference(name, args.child, args.iters, args.rounds)
        res[f"train/{name}"] = bench_training(name, args.child, args.iters, args.rounds)
    print("RESULT " + json.dumps(res))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer iterations and rounds")
    ap.add_argument("--models", default="mlp,cnn,transformer")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch CPU threads")
    ap.add_argument("--out", default=None, help="write the results as JSON")
    ap.add_argument("--child", choices=MODES, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.iters is None:
        args.iters = 20 if args.quick else 50
    if args.rounds is None:
        args.rounds = 2 if args.quick else 5
    if args.child:
        child(args)
        return
    results: dict[str, dict[str, float]] = {}
    for mode in MODES:
        env = dict(os.environ, PT_HPU_LAZY_MODE="1" if mode in ("lazy", "graph") else "0")
        cmd = [sys.executable, __file__, "--child", mode, "--models", args.models,
               "--iters", str(args.iters), "--rounds", str(args.rounds), "--threads", str(args.threads)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        if p.returncode or not line:
            print(f"mode {mode} failed:\n{p.stderr[-2000:]}", file=sys.stderr)
            continue
        results[mode] = json.loads(line[-1][len("RESULT "):])
    keys = sorted({k for r in results.values() for k in r})
    print(f"{'ms per call':<20}" + "".join(f"{m:>10}" for m in MODES) + f"{'eager/graph':>13}{'cpu/graph':>11}")
    for k in keys:
        row = [results.get(m, {}).get(k) for m in MODES]
        cells = "".join(f"{v:>10.3f}" if v is not None else f"{'-':>10}" for v in row)
        g = results.get("graph", {}).get(k)
        e = results.get("eager", {}).get(k)
        c = results.get("cpu", {}).get(k)
        ratio = lambda a: f"{a / g:.2f}x" if a and g else "-"  # noqa: E731
        print(f"{k:<20}{cells}{ratio(e):>13}{ratio(c):>11}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"results": results, "iters": args.iters, "rounds": args.rounds, "batch": BATCH,
                       "threads": args.threads}, f, indent=1)


if __name__ == "__main__":
    main()
