#!/usr/bin/env python3
"""hpusim benchmarks, side by side on one machine (`make bench`).

1. Training-step throughput of each reference model (hpusim_models) in every mode.
2. GEMM at 256^3, 512^3, 1024^3 and the linear-layer shape in float32 and bfloat16:
   hpu torch.mm / F.linear against OpenBLAS called directly and against torch's CPU.

Each mode is its own worker process (PT_HPU_LAZY_MODE, for one, is read at import). In a
round, one fresh worker per mode starts and they all stay up but take turns: a worker runs
only while it holds the turn and hands it on before its warm-up and before each timed
repeat, the turn going round the modes in alternating order (cpu, hpu, ..., hpu, cpu).
So a change of the machine's speed (other processes, clock) hits every mode alike, and
each round's ratios compare like with like. A ratio is the median of the rounds' ratios,
printed with the lowest and highest round; absolute steps/s move with load, the ratios
should not. Warm-up is at least 10 steps and 1 s per model (caches, lazy graphs, clock).

Every thread pool gets --threads threads (torch.set_num_threads, OMP_NUM_THREADS,
MKL_NUM_THREADS; hpusim sizes its OpenBLAS itself). The CPU baseline does not load hpusim
(TORCH_DEVICE_BACKEND_AUTOLOAD=0): it is plain PyTorch. OpenMP keeps its own default wait
policy (its threads spin briefly between parallel regions, as hpusim's kernel workers do),
which is what a torch user gets; --omp-wait-policy PASSIVE is for a machine whose cores are
busy with other work, where spinning threads would slow the CPU baseline instead. The
GEMM worker, which interleaves torch CPU calls with the others in one process, always runs
OpenMP PASSIVE so its idle threads do not spin into the other implementations' timings.
To add a mode (lazy, autocast), add an entry to MODES; `--modes` picks which run.

    .venv/bin/python bench/run.py [--quick] [--out bench/results.json] [--modes cpu,hpu] [--rounds 3]
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, HERE := os.path.dirname(os.path.abspath(__file__)))
from bench_common import median  # noqa: E402

ROOT = os.path.dirname(HERE)
MODELS = ("mlp", "cnn", "transformer")


@dataclasses.dataclass(frozen=True)
class Mode:
    """One benchmark configuration: a worker process with `env` added to the environment
    and `flags` passed to the training worker."""
    device: str
    env: dict[str, str]
    flags: tuple[str, ...] = ()
    default: bool = True
    description: str = ""


MODES: dict[str, Mode] = {
    "cpu": Mode("cpu", {}, description="PyTorch CPU eager (the baseline)"),
    "hpu": Mode("hpu", {"PT_HPU_LAZY_MODE": "0"}, description="hpu eager"),
    "hpu_lazy": Mode("hpu", {"PT_HPU_LAZY_MODE": "1"}, description="hpu lazy (mark_step graphs)"),
    "hpu_bf16": Mode("hpu", {"PT_HPU_LAZY_MODE": "0"}, ("--autocast", "bfloat16"),
                     description="hpu eager, torch.autocast bfloat16"),
    "cpu_bf16": Mode("cpu", {}, ("--autocast", "bfloat16"), description="PyTorch CPU eager, torch.autocast bfloat16"),
    "hpu_compile": Mode("hpu", {"PT_HPU_LAZY_MODE": "0"}, ("--compile", "hpu_backend"),
                        description="hpu eager, the training step under torch.compile(backend='hpu_backend')"),
    "cpu_inductor": Mode("cpu", {}, ("--compile", "inductor"),
                         description="PyTorch CPU, the training step under torch.compile (inductor)"),
}
# Extra training ratios (numerator mode, denominator mode), reported when both ran.
COMPARISONS = (("hpu_bf16", "hpu"), ("hpu_bf16", "cpu_bf16"), ("hpu_lazy", "hpu"), ("hpu_compile", "hpu"),
               ("hpu_compile", "cpu_inductor"))
GEMM_MODE = "hpu"  # the environment the GEMM worker runs in
TARGETS = {"gemm_fp32_hpu_over_openblas": 0.9, "gemm_bf16_over_fp32_hpu": 0.8,
           # issue 20: hpu bf16 at least as fast as torch's own CPU bf16 (oneDNN), op for op
           "gemm_bf16_hpu_over_torch_cpu": 1.0}


# ---- workers (run in the subprocess) -------------------------------------------------------

def worker_main(args: argparse.Namespace) -> None:
    sys.path.insert(0, HERE)
    from bench_common import NO_TURNS, Turns, loadavg

    turns = Turns(args.turn_read_fd, args.turn_write_fd) if args.turn_read_fd is not None else NO_TURNS
    turns.wait()  # importing torch is heavy work too: only in our turn
    import torch

    if args.device == "hpu" or args.worker == "gemm":
        import habana_frameworks.torch  # noqa: F401  (registers hpu; reads PT_HPU_* now)
    from bench_common import set_threads

    set_threads(args.threads)
    t0 = time.perf_counter()
    load0 = loadavg()
    if args.worker == "training":
        import bench_training

        dtype = getattr(torch, args.autocast) if args.autocast else None
        lazy = args.device == "hpu" and os.environ.get("PT_HPU_LAZY_MODE") == "1"
        if lazy:
            from habana_frameworks.torch import _lazy
            s0, w0 = _lazy.stats(), time.perf_counter()
        result: dict[str, Any] = {"training": bench_training.run(args.models.split(","), args.device, dtype, args.quick,
                                                                 args.compile, turns)}
        if args.compile == "hpu_backend":
            result["compile_launch"] = compiled_launch_cost()
        if lazy:
            result["lazy_record"] = lazy_record_cost()
            # Over the whole training run (warm-up included): how busy the Go worker was,
            # how long the host blocked on it, and the ops run while still being recorded.
            s1, wall = _lazy.stats(), time.perf_counter() - w0
            result["lazy_record"].update({
                "worker_utilisation": (s1["worker_busy_ns"] - s0["worker_busy_ns"]) / 1e9 / wall,
                "host_wait_fraction": (s1["host_wait_ns"] - s0["host_wait_ns"]) / 1e9 / wall,
                "streamed_fraction": (s1["streamed_ops"] - s0["streamed_ops"]) / max(1, s1["recorded_ops"] - s0["recorded_ops"]),
            })
    else:
        import bench_gemm

        result = {"gemm": bench_gemm.run(args.threads, args.quick)}
    result["worker"] = {"seconds": time.perf_counter() - t0, "loadavg_start": load0, "loadavg_end": loadavg(),
                        "pid": os.getpid(), "torch_threads": torch.get_num_threads(),
                        "hpusim_loaded": "habana_frameworks.torch" in sys.modules}
    with open(args.worker_out, "w") as f:
        json.dump(result, f)


# (compiled function, its input, the graph hpu_backend returned, its recipe), made at the
# first compiled_launch_cost call: dynamo caches the probe by its code object, so a second
# torch.compile of it compiles nothing and hands hpu_backend nothing to record.
_launch_probe: tuple[Any, Any, Any, Any] | None = None


def _compiled_launch_probe() -> tuple[Any, Any, Any, Any]:
    global _launch_probe
    if _launch_probe is not None:
        return _launch_probe
    import torch

    from habana_frameworks.torch.dynamo.compile_backend import compilers, recipe_compiler

    returned: list[Any] = []
    boxed = compilers._boxed
    earlier = set(recipe_compiler._runners)  # the training graphs' clusters, if any

    def keep(fn):
        out = boxed(fn)
        returned.append(out)
        return out

    def probe(t):
        return t * 2 + 1

    compilers._boxed = keep
    try:
        compiled = torch.compile(probe, backend="hpu_backend")
        x = torch.randn(16, device="hpu")
        compiled(x)
        compiled(x)
    finally:
        compilers._boxed = boxed
    if not returned:
        raise RuntimeError("compiled_launch_cost: hpu_backend compiled no graph for the probe")
    runner = next((r for r in list(recipe_compiler._runners) if r not in earlier and r._entry is not None), None)
    if runner is None:
        raise RuntimeError("compiled_launch_cost: the probe's graph made no recipe")
    _launch_probe = (compiled, x, returned[-1], runner._entry[0])
    return _launch_probe


def compiled_launch_cost(rounds: int = 50, calls: int = 200) -> dict[str, float]:
    """Median host cost of calling a cached torch.compile(backend="hpu_backend") graph
    (`x * 2 + 1` on 16 elements: one recipe of two tiny ops), per call: end to end
    (dynamo's guards and frame wrapper, AOT autograd's runtime wrapper, the graph, the
    recipe run); the graph hpu_backend returned, called as AOT calls it (our part); and
    the recipe run alone (C++ and Go). Each in wall time (*_us) and in the calling
    thread's CPU time (*_cpu_us: the recipe runs on that thread): on this shared 2-core
    machine the wall figures count the time the thread waits for a core (two spinning
    processes: 104 us wall end to end, 22.8 us CPU; quiet, both about 20.5 us). The
    probe is compiled once per process; later calls time the same one."""
    from bench_common import median

    compiled, x, graph, recipe = _compiled_launch_probe()
    compiled(x)  # compiles again if torch._dynamo.reset() ran since the probe was made
    compiled(x)

    def per_call(fn) -> tuple[float, float]:
        wall, cpu = [], []
        for _ in range(rounds):
            t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            for _ in range(calls):
                fn()
            c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
            wall.append((t1 - t0) / calls / 1e3)
            cpu.append((c1 - c0) / calls / 1e3)
        return median(wall), median(cpu)

    out: dict[str, float] = {}
    for key, fn in (("end_to_end", lambda: compiled(x)), ("hpu_backend_graph", lambda: graph([x])),
                    ("recipe_run", lambda: recipe.run([x]))):
        out[f"{key}_us"], out[f"{key}_cpu_us"] = per_call(fn)
    return out


def lazy_record_cost(rounds: int = 50, ops: int = 100) -> dict[str, float]:
    """Median host cost of recording one op in lazy mode: end to end from Python (dispatch,
    lowering, C ABI, recording) per batch of small in-place adds, and inside Go alone."""
    import torch

    import habana_frameworks.torch.core as htcore
    from habana_frameworks.torch import _lazy
    from bench_common import median

    x, y = torch.ones(64, device="hpu"), torch.ones(64, device="hpu")
    htcore.mark_step(sync=True)
    per_op = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(ops):
            x.add_(y)
        per_op.append((time.perf_counter() - t0) / ops * 1e6)
        htcore.mark_step()
    htcore.mark_step(sync=True)
    return {"python_us_per_op": median(per_op), "go_us_per_op": _lazy.stats()["record_ns_median"] / 1e3}


# ---- parent ----------------------------------------------------------------------------------

def _tmp_path(suffix: str) -> str:
    fd, path = tempfile.mkstemp(suffix=suffix, prefix="hpusim_bench_")
    os.close(fd)
    return path


def worker_env(kind: str, mode: Mode, args: argparse.Namespace) -> dict[str, str]:
    """The worker's environment: every thread pool sized to --threads (torch's intra-op
    pool, OpenMP, MKL, OpenBLAS), and a CPU worker that does not load hpusim (torch's
    backend autoload would otherwise import it: its Go runtime in the baseline process)."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    if args.omp_wait_policy != "default":
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    elif kind == "gemm":
        # The GEMM worker interleaves torch CPU calls with hpu and OpenBLAS calls in one
        # process: idle OpenMP threads spinning after torch's calls would run into the
        # others' timings (hpu 256^3 measured 0.44x OpenBLAS that way, 0.77x without).
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    if kind == "training" and mode.device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env.update(mode.env)
    return env


def _worker_cmd(kind: str, mode: Mode, args: argparse.Namespace, out_path: str) -> list[str]:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--worker-out", out_path,
           "--device", mode.device, "--threads", str(args.threads), "--models", ",".join(args.models)]
    if args.quick:
        cmd.append("--quick")
    if kind == "training":
        cmd += list(mode.flags)
    return cmd


def _read_worker(kind: str, mode_name: str, proc: subprocess.Popen, log_path: str, out_path: str,
                 elapsed: float) -> dict[str, Any]:
    try:
        if proc.returncode != 0:
            with open(log_path, errors="replace") as f:
                tail = f.read().strip().splitlines()[-15:]
            print(f"  {kind}/{mode_name}: worker failed (exit {proc.returncode}):\n    " + "\n    ".join(tail),
                  file=sys.stderr)
            return {"error": f"exit {proc.returncode}: " + " | ".join(tail[-3:])}
        with open(out_path) as f:
            result = json.load(f)
    finally:
        for path in (out_path, log_path):
            os.unlink(path)
    print(f"  {kind}/{mode_name}: {elapsed:.1f}s", file=sys.stderr)
    return result


def spawn(kind: str, mode_name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Runs one worker process for mode `mode_name` alone; returns its JSON or {'error': ...}."""
    mode = MODES[mode_name]
    out_path = _tmp_path(".json")
    log_path = _tmp_path(".log")
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(_worker_cmd(kind, mode, args, out_path), env=worker_env(kind, mode, args),
                                stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        proc.wait()
    return _read_worker(kind, mode_name, proc, log_path, out_path, time.perf_counter() - t0)


def run_round(mode_names: list[str], args: argparse.Namespace, round_index: int) -> dict[str, dict[str, Any]]:
    """One round of training workers, one process per mode, all up at once but taking
    turns: a worker runs only while it holds the turn and hands it back between timed
    repeats (bench_common.Turns). The turn goes round the modes in alternating order
    (cpu, hpu, ..., hpu, cpu, ...), so each mode's repeats are spread over the round like
    every other mode's and a drift of the machine's speed hits them alike. Returns each
    mode's worker JSON or {'error': ...}."""
    workers: dict[str, dict[str, Any]] = {}
    for m in mode_names:
        mode = MODES[m]
        to_w, from_w = os.pipe(), os.pipe()  # (read, write) each
        out_path = _tmp_path(".json")
        log_path = _tmp_path(".log")
        cmd = _worker_cmd("training", mode, args, out_path) + [
            "--turn-read-fd", str(to_w[0]), "--turn-write-fd", str(from_w[1])]
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, env=worker_env("training", mode, args), stdout=log, stderr=subprocess.STDOUT,
                                    cwd=ROOT, pass_fds=(to_w[0], from_w[1]))
        os.close(to_w[0])
        os.close(from_w[1])
        workers[m] = {"proc": proc, "go": os.fdopen(to_w[1], "w"), "back": os.fdopen(from_w[0], "r"),
                      "out": out_path, "log": log_path, "busy": 0.0}
    results: dict[str, dict[str, Any]] = {}
    live = list(mode_names)
    turn = 0
    while live:
        order = live if turn % 2 == 0 else live[::-1]
        for m in list(order):
            w = workers[m]
            t0 = time.perf_counter()
            try:
                w["go"].write("go\n")
                w["go"].flush()
                handed_back = w["back"].readline() == "pass\n"
            except BrokenPipeError:
                handed_back = False
            w["busy"] += time.perf_counter() - t0
            if not handed_back:  # the worker finished (or died)
                w["proc"].wait()
                for f in (w["go"], w["back"]):
                    try:
                        f.close()
                    except BrokenPipeError:
                        pass
                results[m] = _read_worker("training", f"{m} (round {round_index + 1})", w["proc"], w["log"], w["out"],
                                          w["busy"])
                live.remove(m)
        turn += 1
    return results


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _gemm_lookup(rows: list[dict[str, Any]], shape: str, dtype: str, impl: str, op: str) -> float | None:
    for r in rows:
        if (r["shape"], r["dtype"], r["impl"], r["op"]) == (shape, dtype, impl, op):
            return r["gflops"]
    return None


def merge_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's training results over interleaved rounds: per model, the round with the
    median steps/s, plus every round's steps/s (an error in any round is the result)."""
    for r in rounds:
        if "error" in r:
            return r
    merged: dict[str, Any] = {}
    for model in rounds[0]:
        failed = next((r[model] for r in rounds if "error" in r[model]), None)
        if failed is not None:
            merged[model] = failed
            continue
        per = sorted((r[model] for r in rounds), key=lambda x: x["steps_per_s"])
        mid = per[(len(per) - 1) // 2]
        merged[model] = dict(mid, round_steps_per_s=[r[model]["steps_per_s"] for r in rounds])
        reps = mid.get("repeat_steps_per_s")
        if reps:
            merged[model]["repeat_spread"] = (max(reps) - min(reps)) / median(reps)
    return merged


def _round_ratios(runs: dict[str, list[dict[str, Any]]], num: str, den: str) -> dict[str, list[float]]:
    """Per model, num's steps/s over den's in each round (the rounds' workers took turns,
    so each round's ratio compares like with like); rounds where either failed are left out."""
    out: dict[str, list[float]] = {}
    for a, b in zip(runs.get(num, []), runs.get(den, [])):
        if "error" in a or "error" in b:
            continue
        for model, ra in a.items():
            rb = b.get(model, {})
            if "steps_per_s" in ra and "steps_per_s" in rb:
                out.setdefault(model, []).append(ra["steps_per_s"] / rb["steps_per_s"])
    return out


def training_ratio_pairs(modes: list[str]) -> list[tuple[str, str]]:
    pairs = [(m, "cpu") for m in modes if m != "cpu" and "cpu" in modes]
    pairs += [(a, b) for a, b in COMPARISONS if a in modes and b in modes]
    return pairs


def compute_ratios(results: dict[str, Any]) -> dict[str, Any]:
    """Training ratios are the median over rounds of each round's ratio (their spread is
    in results['ratio_rounds']); GEMM ratios come from the one interleaved GEMM worker."""
    ratios: dict[str, Any] = {}
    for num, den in training_ratio_pairs(list(results.get("training", {}))):
        per_round = results.get("ratio_rounds", {}).get(f"training_{num}_over_{den}", {})
        if per_round:
            ratios[f"training_{num}_over_{den}"] = {m: median(v) for m, v in per_round.items()}
    rows = results.get("gemm", {}).get("rows", [])
    fp32_vs_blas: dict[str, float] = {}
    bf16_vs_fp32: dict[str, float] = {}
    bf16_vs_torch: dict[str, float] = {}
    for shape in dict.fromkeys(r["shape"] for r in rows):
        blas = _gemm_lookup(rows, shape, "float32", "openblas", "sgemm")
        for op in ("mm", "linear"):
            h32 = _gemm_lookup(rows, shape, "float32", "hpu", op)
            h16 = _gemm_lookup(rows, shape, "bfloat16", "hpu", op)
            key = shape if op == "mm" else f"{shape} [F.linear]"
            if h32 and blas:
                fp32_vs_blas[key] = h32 / blas
            if h32 and h16:
                bf16_vs_fp32[key] = h16 / h32
            t16 = _gemm_lookup(rows, shape, "bfloat16", "torch_cpu", op)
            if h16 and t16:
                bf16_vs_torch[key] = h16 / t16
    if rows:
        ratios["gemm_fp32_hpu_over_openblas"] = fp32_vs_blas
        ratios["gemm_bf16_over_fp32_hpu"] = bf16_vs_fp32
        ratios["gemm_bf16_hpu_over_torch_cpu"] = bf16_vs_torch
    return ratios


def format_tables(results: dict[str, Any]) -> str:
    out: list[str] = []
    training = results.get("training", {})
    modes = list(training)
    if modes:
        rounds = results["meta"].get("rounds", 1)
        out.append("Training-step throughput, steps/s (median of timed repeats" +
                   (f", median of {rounds} interleaved rounds" if rounds > 1 else "") + "; ms/step in brackets)")
        header = f"{'model':12s}" + "".join(f"{m:>22s}" for m in modes) + "".join(
            f"{m + '/cpu':>14s}" for m in modes if m != "cpu")
        out.append(header)
        for model in results["meta"]["models"]:
            line = f"{model:12s}"
            for m in modes:
                r = training[m].get(model) if "error" not in training[m] else None
                ok = r is not None and "steps_per_s" in r
                line += f"{r['steps_per_s']:>12.1f} ({r['ms_per_step']:6.1f}ms)" if ok else f"{'error':>22s}"
            for m in modes:
                if m == "cpu":
                    continue
                ratio = results["ratios"].get(f"training_{m}_over_cpu", {}).get(model)
                line += f"{ratio:>14.2f}" if ratio is not None else f"{'-':>14s}"
            out.append(line)
        out.append("Ratios: median over rounds of each round's ratio [lowest-highest round]; "
                   "repeat spread: (max-min)/median of the timed repeats in the median round")
        for key, per_model in results["ratios"].items():
            if not key.startswith("training_"):
                continue
            spans = results.get("ratio_rounds", {}).get(key, {})
            name = key[len("training_"):].replace("_over_", "/")
            out.append(f"  {name:28s}" + ", ".join(
                f"{model} {v:.2f} [{min(spans[model]):.2f}-{max(spans[model]):.2f}]" if spans.get(model)
                else f"{model} {v:.2f}" for model, v in per_model.items()))
        for m in modes:
            per_model = training[m] if "error" not in training[m] else {}
            spread = [f"{model} {r['repeat_spread']:.0%}" for model, r in per_model.items() if "repeat_spread" in r]
            if spread:
                out.append(f"  {m} repeat spread: " + ", ".join(spread))
        for m in modes:
            per_model = training[m] if "error" not in training[m] else {}
            compiled = {model: r["compile_seconds"] for model, r in per_model.items()
                        if r.get("compile_seconds") is not None}
            for model, r in per_model.items():
                if "error" in r:
                    out.append(f"  {m}/{model} failed: {r['error']}")
            if compiled:
                out.append(f"  {m} compile time (first steps beyond a steady step, not in steps/s): "
                           + ", ".join(f"{model} {secs:.1f}s" for model, secs in compiled.items()))
        for m in modes:
            for model, r in training[m].items() if "error" not in training[m] else ():
                if r.get("fallbacks"):
                    out.append(f"  {m}/{model} fell back to the CPU: {r['fallbacks']}")
        out.append("")
    launch = results.get("compile_launch")
    if launch:
        out.append(f"Cached compiled-graph launch (hpu_backend), median host cost per call: "
                   f"{launch['end_to_end_us']:.1f} us end to end (target <= 20 us), of which the graph "
                   f"hpu_backend returned {launch['hpu_backend_graph_us']:.1f} us and its recipe run "
                   f"{launch['recipe_run_us']:.1f} us (the rest is dynamo's guards and AOT autograd's wrapper)")
        if "end_to_end_cpu_us" in launch:  # CPU time of the calling thread: what load does not add
            out.append(f"  in CPU time of the calling thread: {launch['end_to_end_cpu_us']:.1f} us end to end, graph "
                       f"{launch['hpu_backend_graph_cpu_us']:.1f} us, recipe run {launch['recipe_run_cpu_us']:.1f} us")
        out.append("")
    rec = results.get("lazy_record")
    if rec:
        out.append(f"Lazy recording, median host cost per op: {rec['python_us_per_op']:.1f} us end to end "
                   f"from Python, {rec['go_us_per_op']:.2f} us inside Go (target <= 15 us)")
        if "worker_utilisation" in rec:
            out.append(f"Lazy worker busy {rec['worker_utilisation']:.0%} of the training time, host blocked on it "
                       f"{rec['host_wait_fraction']:.0%}, ops run while their graph was recorded "
                       f"{rec['streamed_fraction']:.0%}")
        out.append("")
    gemm = results.get("gemm", {})
    if "rows" in gemm:
        out.append(f"GEMM, GFLOP/s (OpenBLAS direct: {gemm['openblas']['path']}, {gemm['openblas']['threads']} "
                   f"threads; torch CPU {gemm['torch_threads']} threads)")
        cols = [("float32", "openblas", "sgemm"), ("float32", "torch_cpu", "mm"), ("float32", "hpu", "mm"),
                ("float32", "torch_cpu", "linear"), ("float32", "hpu", "linear"), ("bfloat16", "torch_cpu", "mm"),
                ("bfloat16", "hpu", "mm"), ("bfloat16", "torch_cpu", "linear"), ("bfloat16", "hpu", "linear")]
        names = ["f32 openblas", "f32 torch", "f32 hpu mm", "f32 torch lin", "f32 hpu lin", "bf16 torch",
                 "bf16 hpu mm", "bf16 torch lin", "bf16 hpu lin"]
        out.append(f"{'shape':32s}" + "".join(f"{n:>13s}" for n in names))
        for shape in dict.fromkeys(r["shape"] for r in gemm["rows"]):
            line = f"{shape:32s}"
            for dtype, impl, op in cols:
                g = _gemm_lookup(gemm["rows"], shape, dtype, impl, op)
                line += f"{g:>13.1f}" if g is not None else f"{'':>13s}"
            out.append(line)
        out.append("")
        for key, title in (("gemm_fp32_hpu_over_openblas", "fp32 hpu / OpenBLAS direct"),
                           ("gemm_bf16_over_fp32_hpu", "bf16 hpu / fp32 hpu"),
                           ("gemm_bf16_hpu_over_torch_cpu", "bf16 hpu / torch CPU bf16, same op")):
            target = TARGETS[key]
            out.append(f"{title} (target >= {target}):")
            for shape, r in results["ratios"].get(key, {}).items():
                out.append(f"  {shape:44s} {r:6.2f}  {'ok' if r >= target else 'BELOW TARGET'}")
        out.append("")
    elif gemm:
        out.append(f"GEMM: {gemm.get('error')}")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a fast smoke run (few, short repeats)")
    ap.add_argument("--out", default=os.path.join(HERE, "results.json"), help="JSON results file")
    ap.add_argument("--modes", default=None,
                    help=f"comma-separated modes among {', '.join(MODES)} (default: "
                         f"{','.join(m for m, v in MODES.items() if v.default)})")
    ap.add_argument("--models", default=",".join(MODELS), type=lambda s: s.split(","))
    ap.add_argument("--threads", type=int, default=2, help="torch and OpenBLAS threads (both set explicitly)")
    ap.add_argument("--omp-wait-policy", default=os.environ.get("OMP_WAIT_POLICY", "default"),
                    help="OMP_WAIT_POLICY for the workers; 'default' (the default) leaves OpenMP's own "
                         "policy, as torch users run; PASSIVE suits a host whose cores are busy elsewhere "
                         "(it also makes the CPU baseline 1.3-1.5x slower on a quiet 2-core machine)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds of training workers (default 3, 1 with --quick): each round starts one fresh "
                         "process per mode and they take turns repeat by repeat; a ratio is the median of the "
                         "rounds' ratios, reported with its lowest and highest round")
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--skip-gemm", action="store_true")
    # Worker-side arguments (set by the parent).
    ap.add_argument("--worker", choices=("training", "gemm"), help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    ap.add_argument("--autocast", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--compile", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--turn-read-fd", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--turn-write-fd", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        args.models = ",".join(args.models)
        worker_main(args)
        return 0

    modes = args.modes.split(",") if args.modes else [m for m, v in MODES.items() if v.default]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown modes {unknown}; known: {list(MODES)}")
    for m in args.models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r}; known: {MODELS}")

    t0 = time.perf_counter()
    results: dict[str, Any] = {
        "meta": {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "git_commit": _git_commit(), "quick": args.quick,
            "threads": args.threads, "models": args.models, "omp_wait_policy": args.omp_wait_policy,
            "rounds": max(1, args.rounds if args.rounds is not None else (1 if args.quick else 3)),
            "hpusim_lib_dir": os.environ.get("HPUSIM_LIB_DIR", ""), "loadavg_start": list(os.getloadavg()),
        },
        "modes": {m: dataclasses.asdict(MODES[m]) for m in modes},
        "targets": TARGETS,
    }
    failed = False
    if not args.skip_training:
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        results["meta"]["round_loadavg"] = []
        for i in range(results["meta"]["rounds"]):
            load0 = list(os.getloadavg())
            for m, r in run_round(modes, args, i).items():
                runs[m].append(r.get("training", r))
                failed |= "error" in r
                if "lazy_record" in r:
                    results["lazy_record"] = r["lazy_record"]
                if "compile_launch" in r:
                    results["compile_launch"] = r["compile_launch"]
            results["meta"]["round_loadavg"].append([load0, list(os.getloadavg())])
        results["training"] = {m: merge_rounds(rs) for m, rs in runs.items()}
        results["ratio_rounds"] = {f"training_{a}_over_{b}": _round_ratios(runs, a, b)
                                   for a, b in training_ratio_pairs(modes)}
    if not args.skip_gemm:
        r = spawn("gemm", GEMM_MODE, args)
        results["gemm"] = r.get("gemm", r)
        results["meta"]["gemm_mode"] = GEMM_MODE
        failed |= "error" in r
    results["meta"]["loadavg_end"] = list(os.getloadavg())
    results["meta"]["seconds"] = time.perf_counter() - t0
    results["meta"]["torch"] = importlib.metadata.version("torch")
    results["ratios"] = compute_ratios(results)

    print(format_tables(results))
    busy = max((r[0][0] for r in results["meta"].get("round_loadavg", [])), default=results["meta"]["loadavg_start"][0])
    if busy > 0.5 * (os.cpu_count() or 1):
        print(f"WARNING: the machine was busy (1-min load average up to {busy:.1f} on {os.cpu_count()} CPUs at a "
              f"round's start). PyTorch's CPU baseline with {args.threads} OpenMP threads slows down erratically "
              "when one of its threads is descheduled (measured 4-46 steps/s on the MLP at load 12 against 175-430 "
              "with 1 thread), so ratios against cpu are not meaningful: rerun on a quiet machine.")
    print(f"load average {results['meta']['loadavg_start']} -> {results['meta']['loadavg_end']}; "
          f"{results['meta']['seconds']:.0f}s; results in {args.out}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
