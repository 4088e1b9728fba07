"""hccl benchmark: all_reduce bus bandwidth on hpu tensors (hccl) against Gloo on CPU tensors
in the same processes, and one DDP training step of the reference CNN on 2 processes against
1 process.

    python bench/allreduce.py [--size-mib 64] [--iters 5] [--ranks 2] [--batch 64] [--steps 8]

Bus bandwidth follows the usual convention for all_reduce: bytes * 2 (n - 1) / n / seconds.
hccl and Gloo runs alternate, so a change of machine load hits both alike; the machine's
other load still makes absolute figures noisy."""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(fn, iters: int, group) -> list[float]:
    times = []
    for _ in range(iters):
        dist.barrier(group=group)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _allreduce(rank: int, world: int, args, out) -> dict:
    import habana_frameworks.torch.distributed.hccl  # noqa: F401

    cpu_group = dist.new_group(backend="gloo")
    n_bytes = args.size_mib << 20
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        numel = n_bytes // torch.tensor([], dtype=dtype).element_size()
        hpu_t = torch.ones(numel, dtype=dtype, device="hpu")
        cpu_t = torch.ones(numel, dtype=dtype)
        # one warm-up each (connections, first-touch of pages)
        dist.all_reduce(hpu_t)
        dist.all_reduce(cpu_t, group=cpu_group)
        hpu_times, cpu_times = [], []
        for _ in range(args.iters):  # alternate the two
            hpu_times += _timed(lambda: dist.all_reduce(hpu_t), 1, cpu_group)
            cpu_times += _timed(lambda: dist.all_reduce(cpu_t, group=cpu_group), 1, cpu_group)
        factor = n_bytes * 2 * (world - 1) / world / 1e9
        h, c = statistics.median(hpu_times), statistics.median(cpu_times)
        results[str(dtype).replace("torch.", "")] = {
            "hccl_hpu_GBps": factor / h, "gloo_cpu_GBps": factor / c, "ratio": c / h,
            "hccl_hpu_s": h, "gloo_cpu_s": c}
    return results


def _ddp_step(rank: int, world: int, args, out) -> dict:
    import habana_frameworks.torch.distributed.hccl  # noqa: F401
    from hpusim_models.data import make_batches
    from hpusim_models.models import build
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = build("cnn").to("hpu")
    if world > 1:
        model = DDP(model, gradient_as_bucket_view=True, broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    per_rank = args.batch // world
    batches = make_batches("cnn", args.batch, args.steps + 2, seed=0)

    def step(x, y):
        opt.zero_grad()
        x, y = x[rank * per_rank:(rank + 1) * per_rank].to("hpu"), y[rank * per_rank:(rank + 1) * per_rank].to("hpu")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for x, y in batches[:2]:  # warm-up
        step(x, y)
    times = []
    for x, y in batches[2:]:
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - t0)
    return {"step_s": statistics.median(times), "global_batch": args.batch, "per_rank_batch": per_rank}


def _worker(rank: int, world: int, mode: str, args, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import habana_frameworks.torch.distributed.hccl as hccl

    hccl.initialize_distributed_hpu(world, rank, rank)
    dist.init_process_group("hccl")
    res = (_allreduce if mode == "allreduce" else _ddp_step)(rank, world, args, None)
    if rank == 0:
        queue.put(res)
    dist.destroy_process_group()


def run(mode: str, world: int, args) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, mode, args, port, queue)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"{mode} worker exited {p.exitcode}")
    return queue.get()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--skip-ddp", action="store_true")
    args = ap.parse_args()

    report = {"allreduce": run("allreduce", args.ranks, args)}
    for dtype, r in report["allreduce"].items():
        print(f"all_reduce {args.size_mib} MiB {dtype:9s} x{args.ranks}: hccl on hpu {r['hccl_hpu_GBps']:.2f} GB/s, "
              f"Gloo on cpu {r['gloo_cpu_GBps']:.2f} GB/s, ratio {r['ratio']:.2f}x")
    if not args.skip_ddp:
        one = run("ddp", 1, args)
        many = run("ddp", args.ranks, args)
        report["ddp"] = {"1": one, str(args.ranks): many, "speedup": one["step_s"] / many["step_s"]}
        print(f"CNN step, global batch {args.batch}: 1 process {one['step_s'] * 1e3:.1f} ms, "
              f"{args.ranks} processes (DDP) {many['step_s'] * 1e3:.1f} ms, speed-up {report['ddp']['speedup']:.2f}x")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
