"""HPU graphs against eager calls: inference and a whole training step of the reference models.

    .venv/bin/python bench/hpu_graphs.py [--quick] [--models mlp,cnn,transformer] [--out x.json]

Each mode runs in its own process (lazy mode is chosen at import):
  cpu       PyTorch CPU eager
  eager     hpu eager (PT_HPU_LAZY_MODE=0)
  lazy      hpu lazy, a mark_step per call / per step
  graph     hpu lazy, replaying an HPU graph (wrap_in_hpu_graph for inference; one
            HPUGraph over forward, loss, backward and optimizer step for training)
Inference copies each batch to the device and calls the model under no_grad; training
uses SGD with momentum (the same step for every mode). The four processes stay up and
take turns: each round times one loop over distinct batches in every mode, one after the
other, so a shared machine's changing load hits the modes alike (the first round warms
up and captures). Times are the median over --rounds rounds, in milliseconds per call;
compare ratios, and note the load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

MODES = ("cpu", "eager", "lazy", "graph")
BATCH = {"mlp": 32, "cnn": 16, "transformer": 8}


def setup_inference(name: str, mode: str) -> Callable[[int], float]:
    """A function timing `iters` inference calls (ms per call)."""
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

    @torch.no_grad()
    def timed(iters: int) -> float:
        t0 = time.perf_counter()
        for i in range(iters):
            out = model(batches[i % len(batches)].to(dev))
            step()
        _ = out.sum().item()  # waits for the device work
        return (time.perf_counter() - t0) / iters * 1e3
    return timed


def setup_training(name: str, mode: str) -> Callable[[int], float]:
    """A function timing `iters` training steps (ms per step)."""
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

    def timed(iters: int) -> float:
        t0 = time.perf_counter()
        for i in range(iters):
            x, y = batches[i % len(batches)]
            loss = train_step(x, y)
        _ = float(loss.item())
        return (time.perf_counter() - t0) / iters * 1e3
    return timed


def child(args) -> None:
    """Serve rounds: read "<kind>/<model> <iters>" lines, answer "T <ms per call>"."""
    import torch
    torch.set_num_threads(args.threads)  # the CPU baseline uses the cores hpusim uses
    if args.child != "cpu":
        import habana_frameworks.torch  # noqa: F401  (lazy mode does not autoload it)
    loops: dict[str, Callable[[int], float]] = {}
    print("READY", flush=True)
    for line in sys.stdin:
        key, iters = line.split()
        if key not in loops:
            kind, name = key.split("/")
            loops[key] = (setup_inference if kind == "infer" else setup_training)(name, args.child)
        print(f"T {loops[key](int(iters))}", flush=True)


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
        args.rounds = 3 if args.quick else 7
    if args.child:
        child(args)
        return
    procs = {}
    for mode in MODES:
        env = dict(os.environ, PT_HPU_LAZY_MODE="1" if mode in ("lazy", "graph") else "0")
        cmd = [sys.executable, __file__, "--child", mode, "--threads", str(args.threads)]
        procs[mode] = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    failed: set[str] = set()

    def ask(mode: str, line: str) -> float | None:
        p = procs[mode]
        if mode in failed:
            return None
        try:
            p.stdin.write(line + "\n")
            p.stdin.flush()
            while True:
                out = p.stdout.readline()
                if not out:
                    raise EOFError
                if out.startswith("T "):
                    return float(out[2:])
        except (EOFError, BrokenPipeError):
            print(f"mode {mode} failed (exit {p.wait()})", file=sys.stderr)
            failed.add(mode)
            return None

    for p in procs.values():
        while not p.stdout.readline().startswith("READY"):
            pass
    keys = [f"{kind}/{name}" for name in args.models.split(",") for kind in ("infer", "train")]
    times: dict[str, dict[str, list[float]]] = {m: {k: [] for k in keys} for m in MODES}
    loads: list[float] = []
    for k in keys:
        for r in range(args.rounds + 1):  # round 0 warms up (and captures)
            loads.append(os.getloadavg()[0])
            for mode in MODES:
                t = ask(mode, f"{k} {args.iters}")
                if r and t is not None:
                    times[mode][k].append(t)
    for p in procs.values():
        p.stdin.close()
        p.wait()
    results = {m: {k: statistics.median(v) for k, v in ts.items() if v} for m, ts in times.items()}
    print(f"{'ms per call':<20}" + "".join(f"{m:>10}" for m in MODES) + f"{'eager/graph':>13}{'cpu/graph':>11}")
    for k in keys:
        row = [results.get(m, {}).get(k) for m in MODES]
        cells = "".join(f"{v:>10.3f}" if v is not None else f"{'-':>10}" for v in row)
        g = results["graph"].get(k)
        e = results["eager"].get(k)
        c = results["cpu"].get(k)
        ratio = lambda a: f"{a / g:.2f}x" if a and g else "-"  # noqa: E731
        print(f"{k:<20}{cells}{ratio(e):>13}{ratio(c):>11}")
    print(f"load average (1 min) during the rounds: {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"results": results, "iters": args.iters, "rounds": args.rounds, "batch": BATCH,
                       "threads": args.threads, "load": [min(loads), max(loads)]}, f, indent=1)


if __name__ == "__main__":
    main()
