"""hpex benchmarks: FusedAdamW's step over 10M parameters on hpu against
torch.optim.AdamW(foreach=True) on CPU, and FusedSDPA forward+backward against PyTorch's
CPU scaled_dot_product_attention (with the hpu side's measured peak extra memory, whose
growth from sequence 1024 to 4096 shows it linear, not quadratic). torch on CPU runs with 2
threads. The two sides are timed interleaved (A/B/A/B) so load on a shared machine hits
both alike; each ratio is the median of the per-pair ratios, printed with the load average.

    python bench/hpex.py [--quick] [--sdpa-only]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch.hpex.kernels import FusedSDPA
from habana_frameworks.torch.hpex.optimizers import FusedAdamW


def interleaved(a, b, reps):
    """Median times of a and b and the median of the per-pair ratios a/b, timed A/B/A/B."""
    a()
    b()  # warm-up
    ta, tb = [], []
    for _ in range(reps):
        for fn, ts in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb), statistics.median(x / y for x, y in zip(ta, tb))


def load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


def bench_adamw(numel: int, reps: int) -> dict:
    sizes = [numel // 40] * 40  # a model-like list of tensors
    cpu = [torch.nn.Parameter(torch.randn(n)) for n in sizes]
    for p in cpu:
        p.grad = torch.randn_like(p)
    hpu = [torch.nn.Parameter(p.detach().to("hpu")) for p in cpu]
    for p, c in zip(hpu, cpu):
        p.grad = c.grad.to("hpu")
    topt = torch.optim.AdamW(cpu, lr=1e-3, weight_decay=0.01, foreach=True)
    fopt = FusedAdamW(hpu, lr=1e-3, weight_decay=0.01)

    def hstep():
        fopt.step()
        torch.hpu.synchronize()
    t_cpu, t_hpu, ratio = interleaved(topt.step, hstep, reps)
    return {"params": numel, "torch_cpu_foreach_ms": t_cpu * 1e3, "fused_hpu_ms": t_hpu * 1e3, "speedup": ratio,
            "load": load()}


def bench_sdpa(B: int, H: int, S: int, D: int, reps: int) -> dict:
    q, k, v = (torch.randn(B, H, S, D) for _ in range(3))
    g = torch.randn(B, H, S, D)

    def cpu_step():
        qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
        torch.nn.functional.scaled_dot_product_attention(qc, kc, vc, is_causal=True).backward(g)

    qh, kh, vh, gh = (t.to("hpu") for t in (q, k, v, g))

    def hpu_step():
        a, b, c = (t.detach().requires_grad_() for t in (qh, kh, vh))
        FusedSDPA.apply(a, b, c, None, 0.0, True).backward(gh)
        torch.hpu.synchronize()
    def cpu_fwd():
        with torch.no_grad():
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def hpu_fwd():
        with torch.no_grad():
            FusedSDPA.apply(qh, kh, vh, None, 0.0, True)
        torch.hpu.synchronize()
    torch.hpu.reset_peak_memory_stats()
    base = torch.hpu.memory_allocated()
    t_cpu, t_hpu, ratio = interleaved(cpu_step, hpu_step, reps)
    peak = torch.hpu.max_memory_allocated() - base
    # The forward alone (no autograd record), to split each side's time into forward and
    # backward (= forward+backward - forward).
    f_cpu, f_hpu, f_ratio = interleaved(cpu_fwd, hpu_fwd, reps)
    return {"B": B, "H": H, "S": S, "D": D, "torch_cpu_ms": t_cpu * 1e3, "fused_hpu_ms": t_hpu * 1e3,
            "speedup": ratio, "torch_cpu_fwd_ms": f_cpu * 1e3, "fused_hpu_fwd_ms": f_hpu * 1e3, "fwd_speedup": f_ratio,
            "hpu_peak_extra_MB": peak / 2**20, "score_matrix_MB": B * H * S * S * 4 / 2**20, "load": load()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sdpa-only", action="store_true", help="skip the FusedAdamW benchmark")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    reps = 3 if a.quick else 7
    if not a.sdpa_only:
        r = bench_adamw(10_000_000, reps)
        print(f"FusedAdamW 10M params: torch CPU AdamW(foreach, {a.threads} threads) {r['torch_cpu_foreach_ms']:.1f} ms, "
              f"hpu FusedAdamW {r['fused_hpu_ms']:.1f} ms, speedup {r['speedup']:.2f}x (level 1.5x) [{r['load']}]")
    peaks = {}
    for S in (1024, 4096):
        r = bench_sdpa(1, 4, S, 64, max(2, reps // 2) if S == 4096 else reps)
        peaks[S] = r["hpu_peak_extra_MB"]
        print(f"SDPA causal fwd+bwd B1 H4 S{S} D64: torch CPU {r['torch_cpu_ms']:.1f} ms, "
              f"hpu FusedSDPA {r['fused_hpu_ms']:.1f} ms, speedup {r['speedup']:.2f}x (level 1.0x), "
              f"hpu peak extra {r['hpu_peak_extra_MB']:.1f} MB (a full score matrix: {r['score_matrix_MB']:.0f} MB) "
              f"[{r['load']}]")
        print(f"  forward alone: torch CPU {r['torch_cpu_fwd_ms']:.1f} ms, hpu {r['fused_hpu_fwd_ms']:.1f} ms, "
              f"speedup {r['fwd_speedup']:.2f}x; backward (total - forward): torch CPU "
              f"{r['torch_cpu_ms'] - r['torch_cpu_fwd_ms']:.1f} ms, hpu {r['fused_hpu_ms'] - r['fused_hpu_fwd_ms']:.1f} ms")
    print(f"hpu peak memory S4096/S1024: {peaks[4096] / max(peaks[1024], 1e-9):.2f}x for 4x the sequence "
          f"(linear: 4x; a score matrix: 16x)")


if __name__ == "__main__":
    main()
