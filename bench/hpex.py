"""hpex benchmarks: FusedAdamW's step over 10M parameters on hpu against
torch.optim.AdamW(foreach=True) on CPU, and FusedSDPA forward+backward against PyTorch's
CPU scaled_dot_product_attention (with peak extra memory). Short runs; timings on a
shared machine are noisy, so each figure is the median of a few repeats.

    python bench/hpex.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc  # noqa: F401  (host allocations of the CPU path are not traced; see peak below)

import torch

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch.hpex.kernels import FusedSDPA
from habana_frameworks.torch.hpex.optimizers import FusedAdamW


def timed(fn, reps):
    fn()  # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


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
    t_cpu = timed(topt.step, reps)
    # torch's intra-op threads spin badly on a loaded machine; its single-thread time is
    # the fairer reference there.
    nt = torch.get_num_threads()
    torch.set_num_threads(1)
    t_cpu1 = timed(topt.step, reps)
    torch.set_num_threads(nt)

    def hstep():
        fopt.step()
        torch.hpu.synchronize()
    t_hpu = timed(hstep, reps)
    return {"params": numel, "torch_cpu_foreach_ms": t_cpu * 1e3, "torch_cpu_foreach_1thread_ms": t_cpu1 * 1e3,
            "fused_hpu_ms": t_hpu * 1e3, "speedup": t_cpu / t_hpu, "speedup_vs_1thread": t_cpu1 / t_hpu}


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
    t_cpu = timed(cpu_step, reps)
    torch.hpu.reset_peak_memory_stats()
    base = torch.hpu.memory_allocated()
    t_hpu = timed(hpu_step, reps)
    peak = torch.hpu.max_memory_allocated() - base
    return {"B": B, "H": H, "S": S, "D": D, "torch_cpu_ms": t_cpu * 1e3, "fused_hpu_ms": t_hpu * 1e3,
            "speedup": t_cpu / t_hpu, "hpu_peak_extra_MB": peak / 2**20,
            "score_matrix_MB": B * H * S * S * 4 / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    reps = 2 if a.quick else 5
    r = bench_adamw(10_000_000, reps)
    print(f"FusedAdamW 10M params: torch CPU AdamW(foreach) {r['torch_cpu_foreach_ms']:.1f} ms "
          f"(1 thread {r['torch_cpu_foreach_1thread_ms']:.1f} ms), hpu FusedAdamW {r['fused_hpu_ms']:.1f} ms, "
          f"speedup {r['speedup']:.2f}x ({r['speedup_vs_1thread']:.2f}x vs 1 thread)")
    for S in (1024, 4096):
        r = bench_sdpa(1, 4, S, 64, max(1, reps // 2) if S == 4096 else reps)
        print(f"SDPA causal fwd+bwd B1 H4 S{S} D64: torch CPU {r['torch_cpu_ms']:.1f} ms, "
              f"hpu FusedSDPA {r['fused_hpu_ms']:.1f} ms, speedup {r['speedup']:.2f}x, "
              f"hpu peak extra {r['hpu_peak_extra_MB']:.1f} MB (a full score matrix: {r['score_matrix_MB']:.0f} MB)")


if __name__ == "__main__":
    main()
