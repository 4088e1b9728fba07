"""HPU graphs against eager calls: inference and a whole training step of the reference models.

    .venv/bin/python bench/hpu_graphs.py [--quick] [--models mlp,cnn,transformer] [--kinds infer,train] [--out x.json]

Each mode runs in its own process (lazy mode is chosen at import):
  cpu       PyTorch CPU eager
  eager     hpu eager mode (PT_HPU_LAZY_MODE=0): the "hpu eager calls"
  lazy      hpu lazy mode, a mark_step per call / per step: eager calls in lazy mode
  graph     hpu lazy, replaying an HPU graph (wrap_in_hpu_graph for inference; one
            HPUGraph over forward, loss, backward and optimizer step for training)
Inference copies each batch to the device and calls the model under no_grad; training
uses SGD with momentum (the same step for every mode).

Timing, made for a shared 2-core machine. The four processes stay up and take turns: a
round asks every mode, one after the other, for one timed loop (its length calibrated in
the warm-up round to about --seconds), in alternating order (cpu, eager, lazy, graph,
then graph, lazy, eager, cpu), so a changing load hits the modes alike. A ratio is
computed per round, from that round's loops; the table shows the median over rounds and
the lowest and highest round. Each loop also reports the process CPU time per call (all
its threads), a second view that a busy machine disturbs less; its ratios are printed
below the table. Compare ratios, not times, and note the load.
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


def setup_inference(name: str, mode: str) -> Callable[[int], tuple[float, float]]:
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
    def timed(iters: int) -> tuple[float, float]:
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(iters):
            out = model(batches[i % len(batches)].to(dev))
            step()
        _ = out.sum().item()  # waits for the device work
        return (time.perf_counter() - t0) / iters * 1e3, (time.process_time() - c0) / iters * 1e3
    return timed


def setup_training(name: str, mode: str) -> Callable[[int], tuple[float, float]]:
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

    def timed(iters: int) -> tuple[float, float]:
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(iters):
            x, y = batches[i % len(batches)]
            loss = train_step(x, y)
        _ = float(loss.item())
        return (time.perf_counter() - t0) / iters * 1e3, (time.process_time() - c0) / iters * 1e3
    return timed


def child(args) -> None:
    """Serve rounds: read "<kind>/<model> <iters>" lines, answer "T <wall ms per call> <cpu ms per call>"."""
    import torch
    torch.set_num_threads(args.threads)  # the CPU baseline uses the cores hpusim uses
    if args.child != "cpu":
        import habana_frameworks.torch  # noqa: F401  (lazy mode does not autoload it)
    loops: dict[str, Callable[[int], tuple[float, float]]] = {}
    print("READY", flush=True)
    for line in sys.stdin:
        key, iters = line.split()
        if key not in loops:
            kind, name = key.split("/")
            loops[key] = (setup_inference if kind == "infer" else setup_training)(name, args.child)
        wall, cpu = loops[key](int(iters))
        print(f"T {wall} {cpu}", flush=True)


def spread(xs: list[float]) -> str:
    """median [lowest-highest] of per-round values."""
    return f"{statistics.median(xs):.2f}x [{min(xs):.2f}-{max(xs):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="shorter loops and fewer rounds")
    ap.add_argument("--models", default="mlp,cnn,transformer")
    ap.add_argument("--kinds", default="infer,train", help="inference calls, training steps or both")
    ap.add_argument("--seconds", type=float, default=None, help="length of one timed loop (calibrated)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch CPU threads")
    ap.add_argument("--out", default=None, help="write the results as JSON")
    ap.add_argument("--child", choices=MODES, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.seconds is None:
        args.seconds = 0.1 if args.quick else 0.25
    if args.rounds is None:
        args.rounds = 7 if args.quick else 11
    if args.child:
        child(args)
        return
    procs = {}
    for mode in MODES:
        env = dict(os.environ, PT_HPU_LAZY_MODE="1" if mode in ("lazy", "graph") else "0")
        cmd = [sys.executable, __file__, "--child", mode, "--threads", str(args.threads)]
        procs[mode] = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    failed: set[str] = set()

    def ask(mode: str, line: str) -> tuple[float, float] | None:
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
                    wall, cpu = out[2:].split()
                    return float(wall), float(cpu)
        except (EOFError, BrokenPipeError):
            print(f"mode {mode} failed (exit {p.wait()})", file=sys.stderr)
            failed.add(mode)
            return None

    for p in procs.values():
        while not p.stdout.readline().startswith("READY"):
            pass
    keys = [f"{kind}/{name}" for name in args.models.split(",") for kind in args.kinds.split(",")]
    # per key, per round: mode -> (wall, cpu) ms per call
    rounds: dict[str, list[dict[str, tuple[float, float]]]] = {k: [] for k in keys}
    loads: list[float] = []
    for k in keys:
        # Warm-up round: captures, then calibrates each mode's loop to about --seconds.
        iters: dict[str, int] = {}
        for mode in MODES:
            ask(mode, f"{k} 3")
            t = ask(mode, f"{k} 3")
            if t is not None:
                iters[mode] = max(3, int(args.seconds * 1e3 / max(t[0], 1e-3)))
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            order = MODES if r % 2 == 0 else MODES[::-1]
            got = {}
            for mode in order:
                if mode in iters:
                    t = ask(mode, f"{k} {iters[mode]}")
                    if t is not None:
                        got[mode] = t
            rounds[k].append(got)
    for p in procs.values():
        p.stdin.close()
        p.wait()

    def per_round(k: str, num: str, den: str, which: int) -> list[float]:
        return [r[num][which] / r[den][which] for r in rounds[k] if num in r and den in r]

    def med(k: str, mode: str, which: int) -> float | None:
        xs = [r[mode][which] for r in rounds[k] if mode in r]
        return statistics.median(xs) if xs else None

    pairs = (("eager", "graph"), ("lazy", "graph"), ("cpu", "graph"), ("cpu", "eager"))
    print(f"ms per call (median of {args.rounds} rounds)")
    print(f"{'':<18}" + "".join(f"{m:>9}" for m in MODES) + "".join(f"{a + '/' + b:>22}" for a, b in pairs))
    results: dict[str, dict] = {}
    for k in keys:
        row = [med(k, m, 0) for m in MODES]
        cells = "".join(f"{v:>9.3f}" if v is not None else f"{'-':>9}" for v in row)
        ratios = {f"{a}/{b}": per_round(k, a, b, 0) for a, b in pairs}
        cpu_ratios = {f"{a}/{b}": per_round(k, a, b, 1) for a, b in pairs}
        print(f"{k:<18}{cells}" + "".join(f"{spread(v) if v else '-':>22}" for v in ratios.values()))
        results[k] = {"ms": dict(zip(MODES, row)), "cpu_ms": {m: med(k, m, 1) for m in MODES},
                      "ratio_rounds": ratios, "cpu_ratio_rounds": cpu_ratios,
                      "ratio": {n: statistics.median(v) for n, v in ratios.items() if v}}
    print("process CPU time per call, ratios (median [lowest-highest round]):")
    for k in keys:
        print(f"{k:<18}" + "".join(f"{n:>12} {spread(v) if v else '-':<20}"
                                   for n, v in results[k]["cpu_ratio_rounds"].items()))
    print(f"ratios: per round, median [lowest-highest]; load average (1 min) during the rounds: "
          f"{min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"results": results, "seconds": args.seconds, "rounds": args.rounds, "batch": BATCH,
                       "threads": args.threads, "load": [min(loads), max(loads)]}, f, indent=1)


if __name__ == "__main__":
    main()
