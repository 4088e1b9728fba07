"""bench/run.py --quick runs end to end (one worker process per mode, plus the GEMM worker)
and writes results JSON of the documented structure. Not a timing test: only that every
figure is there, positive and finite."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("mlp", "cnn", "transformer")
MODES = ("cpu", "hpu")
SHAPES = ("256^3", "512^3", "1024^3", "linear 64x1024 @ (1024x1024)^T")


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_bench_quick_writes_results(tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "run.py"), "--quick", "--modes", ",".join(MODES),
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "fp32 hpu / OpenBLAS direct" in proc.stdout and "bf16 hpu / fp32 hpu" in proc.stdout
    res = json.loads(out.read_text())

    assert res["meta"]["quick"] is True and res["meta"]["threads"] == 2 and res["meta"]["rounds"] == 1
    assert res["training"]["cpu"]["mlp"]["warmup_steps"] >= 3
    assert set(res["modes"]) == set(MODES)
    assert res["modes"]["hpu"]["device"] == "hpu" and res["modes"]["cpu"]["device"] == "cpu"

    for mode in MODES:
        for model in MODELS:
            r = res["training"][mode][model]
            assert _positive(r["steps_per_s"]) and _positive(r["ms_per_step"]), (mode, model, r)
            assert len(r["repeat_steps_per_s"]) == r["repeats"] >= 2
            assert r["batch_size"] in (16, 64) and isinstance(r["fallbacks"], dict)
        assert set(res["ratios"].get("training_hpu_over_cpu", {})) == set(MODELS)

    gemm = res["gemm"]
    assert gemm["openblas"]["threads"] == 2 and "openblas" in gemm["openblas"]["path"]
    have = {(r["shape"], r["dtype"], r["impl"], r["op"]) for r in gemm["rows"]}
    for shape in SHAPES:
        assert (shape, "float32", "openblas", "sgemm") in have
        for dtype in ("float32", "bfloat16"):
            assert (shape, dtype, "hpu", "mm") in have and (shape, dtype, "torch_cpu", "mm") in have
    for dtype in ("float32", "bfloat16"):
        assert (SHAPES[-1], dtype, "hpu", "linear") in have
    assert all(_positive(r["gflops"]) for r in gemm["rows"])
    for key in ("gemm_fp32_hpu_over_openblas", "gemm_bf16_over_fp32_hpu", "gemm_bf16_hpu_over_torch_cpu"):
        ratios = res["ratios"][key]
        assert set(SHAPES) <= set(ratios) and f"{SHAPES[-1]} [F.linear]" in ratios
        assert all(_positive(v) for v in ratios.values())


def test_bench_rounds_take_each_models_median_round():
    """--rounds N: each mode's result per model is its median round (the whole record of
    that round, so repeats and ms/step stay consistent), with every round's steps/s kept."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import run as bench_run
    finally:
        sys.path.pop(0)
    rounds = [{"cnn": {"steps_per_s": s, "ms_per_step": 1e3 / s}, "mlp": {"steps_per_s": 10 * s, "ms_per_step": 1}}
              for s in (3.0, 1.0, 2.0)]
    merged = bench_run.merge_rounds(rounds)
    assert merged["cnn"]["steps_per_s"] == 2.0 and merged["cnn"]["ms_per_step"] == 500.0
    assert merged["cnn"]["round_steps_per_s"] == [3.0, 1.0, 2.0]
    assert merged["mlp"]["steps_per_s"] == 20.0
    assert bench_run.merge_rounds([rounds[0], {"error": "boom"}]) == {"error": "boom"}


def test_bench_ratios_are_medians_of_round_ratios():
    """Each round's ratio compares that round's workers (they took turns); the reported
    ratio is the median of those, and a failed round is left out, not averaged in."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import run as bench_run
    finally:
        sys.path.pop(0)
    cpu = [{"mlp": {"steps_per_s": s}} for s in (100.0, 50.0, 200.0, 10.0)]
    hpu = [{"mlp": {"steps_per_s": s}} for s in (80.0, 45.0, 120.0)] + [{"error": "boom"}]
    per_round = bench_run._round_ratios({"cpu": cpu, "hpu": hpu}, "hpu", "cpu")
    assert per_round == {"mlp": [0.8, 0.9, 0.6]}
    ratios = bench_run.compute_ratios({"training": {"cpu": {}, "hpu": {}},
                                       "ratio_rounds": {"training_hpu_over_cpu": per_round}})
    assert ratios["training_hpu_over_cpu"]["mlp"] == 0.8


def test_bench_cpu_worker_is_plain_pytorch():
    """The CPU baseline's worker does not autoload hpusim, and every worker's thread pools
    are sized alike."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import run as bench_run
    finally:
        sys.path.pop(0)
    args = bench_run.argparse.Namespace(threads=2, omp_wait_policy="default")
    cpu = bench_run.worker_env("training", bench_run.MODES["cpu"], args)
    hpu = bench_run.worker_env("training", bench_run.MODES["hpu"], args)
    assert cpu["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0" and hpu.get("TORCH_DEVICE_BACKEND_AUTOLOAD") != "0"
    for env in (cpu, hpu):
        assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "2"
