"""Worker for tests/test_distributed.py: run under torchrun, torch.multiprocessing.spawn or a
plain launcher; checks hccl collectives, DDP and FSDP on hpu against CPU references.

Each mode prints "OK <mode> <rank>" when every check passed; a failed check raises, so the
process exits non-zero with the reason. Usage: distributed_worker.py MODE [MODE...]"""
from __future__ import annotations

import copy
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

import habana_frameworks.torch.core as htcore
import habana_frameworks.torch.distributed.hccl as hccl

LAZY = os.getenv("PT_HPU_LAZY_MODE", "0") not in ("0", "")
HPU = torch.device("hpu", 0)
R = dist.ReduceOp
FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
INTS = (torch.int32, torch.int64, torch.uint8, torch.int8)


def step() -> None:
    if LAZY:
        htcore.mark_step()


def data(rank: int, dtype: torch.dtype, n: int = 6, salt: int = 0) -> torch.Tensor:
    """Deterministic per-rank data, small enough that products and sums stay exact."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * salt + n)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype in FLOATS:
        return (torch.randint(-8, 9, (n,), generator=g).float() / 4).to(dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 12, (n,), generator=g).to(dtype)
    return torch.randint(-11, 12, (n,), generator=g).to(dtype)


def reference(op, tensors: list[torch.Tensor]) -> torch.Tensor:
    """The reduction computed on CPU, pairwise in rank order as Gloo does for two ranks."""
    dtype = tensors[0].dtype
    if dtype == torch.bool:
        stacked = torch.stack(tensors).to(torch.uint8)
        if op in (R.SUM, R.MAX):
            return stacked.amax(0).bool()
        return stacked.amin(0).bool()
    acc = tensors[0].clone()
    for t in tensors[1:]:
        if op in (R.SUM, R.AVG):
            acc = acc + t
        elif op == R.PRODUCT:
            acc = acc * t
        elif op == R.MAX:
            acc = torch.maximum(acc, t)
        elif op == R.MIN:
            acc = torch.minimum(acc, t)
    if op == R.AVG:
        acc = acc / len(tensors) if dtype.is_floating_point else torch.div(acc, len(tensors), rounding_mode="trunc")
    return acc.to(dtype)


def same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.device.type == "hpu", f"{what}: result left hpu ({got.device})"
    got = got.cpu()
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert torch.equal(got, want), f"{what}:\n got {got}\nwant {want}"


def expect_error(fn, text: str, what: str) -> None:
    try:
        fn()
    except (RuntimeError, ValueError, TypeError, AssertionError) as e:
        assert text in str(e), f"{what}: error {e!r} lacks {text!r}"
        return
    raise AssertionError(f"{what}: no error raised")


def check_collectives(rank: int, world: int) -> None:
    ranks = range(world)
    ops = (R.SUM, R.AVG, R.MIN, R.MAX, R.PRODUCT)
    for dtype in FLOATS + INTS + (torch.bool,):
        for op in ops:
            if dtype == torch.bool and op == R.AVG:
                continue
            what = f"{dtype} {op}"
            # all_reduce, sync and async (the future holds the hpu tensor)
            t = data(rank, dtype).to(HPU)
            dist.all_reduce(t, op=op)
            same(t, reference(op, [data(r, dtype) for r in ranks]), f"all_reduce {what}")
            t = data(rank, dtype, salt=1).to(HPU)
            work = dist.all_reduce(t, op=op, async_op=True)
            fut_val = work.get_future().wait()
            work.wait()
            same(fut_val[0], reference(op, [data(r, dtype, salt=1) for r in ranks]), f"async all_reduce {what}")
            # reduce to rank 1
            t = data(rank, dtype, salt=2).to(HPU)
            dist.reduce(t, dst=1, op=op)
            if rank == 1:
                same(t, reference(op, [data(r, dtype, salt=2) for r in ranks]), f"reduce {what}")
            # reduce_scatter (list) and reduce_scatter_tensor
            chunks = [[data(r, dtype, n=4, salt=10 + k) for k in ranks] for r in ranks]
            out = torch.empty(4, dtype=dtype, device=HPU)
            dist.reduce_scatter(out, [c.to(HPU) for c in chunks[rank]], op=op)
            same(out, reference(op, [chunks[r][rank] for r in ranks]), f"reduce_scatter {what}")
            out = torch.empty(4, dtype=dtype, device=HPU)
            dist.reduce_scatter_tensor(out, torch.cat(chunks[rank]).to(HPU), op=op)
            same(out, reference(op, [chunks[r][rank] for r in ranks]), f"reduce_scatter_tensor {what}")
        if dtype == torch.bool:
            expect_error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool, device=HPU), op=R.AVG),
                         "Cannot use ReduceOp.AVG with boolean inputs", "bool AVG")

        # data movement
        t = data(rank, dtype, salt=3).to(HPU)
        dist.broadcast(t, src=1)
        same(t, data(1, dtype, salt=3), f"broadcast {dtype}")
        outs = [torch.empty(5, dtype=dtype, device=HPU) for _ in ranks]
        dist.all_gather(outs, data(rank, dtype, n=5).to(HPU))
        for r in ranks:
            same(outs[r], data(r, dtype, n=5), f"all_gather {dtype} from {r}")
        out = torch.empty(5 * world, dtype=dtype, device=HPU)
        dist.all_gather_into_tensor(out, data(rank, dtype, n=5).to(HPU))
        same(out, torch.cat([data(r, dtype, n=5) for r in ranks]), f"all_gather_into_tensor {dtype}")
        # list all_to_all (Gloo has none: built on all_to_all_single) and all_to_all_single
        ins = [data(rank, dtype, n=3 + k, salt=20) for k in ranks]
        outs = [torch.empty(3 + rank, dtype=dtype, device=HPU) for _ in ranks]
        dist.all_to_all(outs, [x.to(HPU) for x in ins])
        for r in ranks:
            same(outs[r], data(r, dtype, n=3 + rank, salt=20), f"all_to_all {dtype} from {r}")
        inp = torch.cat([data(rank, dtype, n=2, salt=30 + k) for k in ranks]).to(HPU)
        out = torch.empty(2 * world, dtype=dtype, device=HPU)
        dist.all_to_all_single(out, inp)
        same(out, torch.cat([data(r, dtype, n=2, salt=30 + rank) for r in ranks]), f"all_to_all_single {dtype}")
        # uneven splits: rank r sends k+1 elements to rank k
        in_splits = [k + 1 for k in ranks]
        out_splits = [rank + 1 for _ in ranks]
        inp = torch.cat([data(rank, dtype, n=k + 1, salt=40) for k in ranks]).to(HPU)
        out = torch.empty(sum(out_splits), dtype=dtype, device=HPU)
        dist.all_to_all_single(out, inp, out_splits, in_splits)
        same(out, torch.cat([data(r, dtype, n=rank + 1, salt=40) for r in ranks]), f"uneven all_to_all_single {dtype}")
        # gather / scatter with root 0
        gl = [torch.empty(4, dtype=dtype, device=HPU) for _ in ranks] if rank == 0 else None
        dist.gather(data(rank, dtype, n=4, salt=50).to(HPU), gl, dst=0)
        if rank == 0:
            for r in ranks:
                same(gl[r], data(r, dtype, n=4, salt=50), f"gather {dtype} from {r}")
        out = torch.empty(4, dtype=dtype, device=HPU)
        sl = [data(k, dtype, n=4, salt=60).to(HPU) for k in ranks] if rank == 0 else None
        dist.scatter(out, sl, src=0)
        same(out, data(rank, dtype, n=4, salt=60), f"scatter {dtype}")
        # point to point: a ring of send/recv, and isend/irecv
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        got = torch.empty(7, dtype=dtype, device=HPU)
        if rank % 2 == 0:
            dist.send(data(rank, dtype, n=7, salt=70).to(HPU), nxt)
            dist.recv(got, prv)
        else:
            dist.recv(got, prv)
            dist.send(data(rank, dtype, n=7, salt=70).to(HPU), nxt)
        same(got, data(prv, dtype, n=7, salt=70), f"send/recv {dtype}")
        got = torch.empty(7, dtype=dtype, device=HPU)
        reqs = [dist.isend(data(rank, dtype, n=7, salt=71).to(HPU), nxt), dist.irecv(got, prv)]
        for q in reqs:
            q.wait()
        same(got, data(prv, dtype, n=7, salt=71), f"isend/irecv {dtype}")

    # fp8: reductions run in float32 and round once, data moves as bytes (as on Gaudi)
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        vals = [data(r, torch.float32, n=8, salt=80).to(dtype) for r in ranks]
        t = vals[rank].to(HPU)
        dist.all_reduce(t, op=R.AVG)
        want = (sum(v.float() for v in vals) / world).to(dtype)
        assert torch.equal(t.cpu().view(torch.uint8), want.view(torch.uint8)), f"fp8 all_reduce {dtype}"
        out = torch.empty(8 * world, dtype=dtype, device=HPU)
        dist.all_gather_into_tensor(out, vals[rank].to(HPU))
        assert torch.equal(out.cpu().view(torch.uint8), torch.cat(vals).view(torch.uint8)), f"fp8 all_gather {dtype}"

    # batch_isend_irecv goes through the backend's coalescing
    got = torch.empty(3, device=HPU)
    ops_ = [dist.P2POp(dist.isend, torch.full((3,), float(rank), device=HPU), (rank + 1) % world),
            dist.P2POp(dist.irecv, got, (rank - 1) % world)]
    for q in dist.batch_isend_irecv(ops_):
        q.wait()
    same(got, torch.full((3,), float((rank - 1) % world)), "batch_isend_irecv")

    # coalesced all_reduce (the fast path) and other collectives issued while coalescing
    a, b = torch.full((3,), rank + 1.0, device=HPU), torch.full((2,), rank + 2.0, device=HPU)
    with dist._coalescing_manager(device=HPU, async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    same(a, torch.full((3,), float(sum(r + 1 for r in ranks))), "coalesced all_reduce a")
    same(b, torch.full((2,), float(sum(r + 2 for r in ranks))), "coalesced all_reduce b")

    # non-contiguous hpu tensors: Gloo gets dense copies, results land in the strided view
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (rank + 1)
    t = base.to(HPU).t()
    dist.all_reduce(t)
    same(t.contiguous(), sum(torch.arange(12, dtype=torch.float32).reshape(3, 4) * (r + 1) for r in ranks).t().contiguous(),
         "strided all_reduce")
    out = torch.zeros(2 * world, 3, device=HPU)[:, 1]  # strided output
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank), device=HPU))
    same(out.contiguous(), torch.tensor([float(r) for r in ranks for _ in range(2)]), "strided all_gather_into_tensor")

    # object collectives travel as hpu byte tensors
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "text": "x" * (rank + 3)})
    assert objs == [{"rank": r, "text": "x" * (r + 3)} for r in ranks], objs
    lst = [rank, "hello"] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [0, "hello"], lst

    # a subgroup gets its own hccl backend
    sub = dist.new_group(list(ranks))
    t = torch.ones(2, device=HPU)
    dist.all_reduce(t, group=sub)
    same(t, torch.full((2,), float(world)), "subgroup all_reduce")
    dist.barrier()
    dist.barrier(group=sub)

    # bad input: the bridge's and torch's own errors, no hang
    expect_error(lambda: dist.all_reduce(torch.ones(2, device=HPU), op=dist._make_nccl_premul_sum(2.0)),
                 "Unsupported ReduceOp for HCCL process group", "PREMUL_SUM")
    expect_error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16, device=HPU)),
                 "Input tensor data type is not supported for HCCL process group", "int16")
    expect_error(lambda: dist.all_reduce(torch.ones(2)), "No backend type associated with device type cpu",
                 "cpu tensor on an hccl group")
    assert dist.get_backend() == "hccl"
    assert dist.group.WORLD._get_backend(HPU).name() == "hccl"


# --- training -------------------------------------------------------------------------------

class Net(nn.Module):
    def __init__(self, unused: bool = False):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc1 = nn.Linear(4 * 8 * 8, 32)
        self.fc2 = nn.Linear(32, 10)
        self.unused = nn.Linear(3, 3) if unused else None

    def forward(self, x):
        x = torch.relu(self.conv(x))
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def batches(steps: int, n: int = 8):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g)) for _ in range(steps)]


def reference_training(model: nn.Module, data_, lr: float, accumulate: int = 1) -> dict:
    """Single-process full-batch SGD on CPU: the result DDP and FSDP must reproduce."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for i in range(0, len(data_), accumulate):
        opt.zero_grad()
        for x, y in data_[i:i + accumulate]:
            (nn.functional.cross_entropy(model(x), y) / accumulate).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def shard(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    return x.chunk(world)[rank]


def close(got: dict, want: dict, what: str, atol: float = 2e-6, rtol: float = 2e-5) -> None:
    assert got.keys() == want.keys(), f"{what}: keys {sorted(got)} != {sorted(want)}"
    for k in want:
        torch.testing.assert_close(got[k].detach().cpu(), want[k], atol=atol, rtol=rtol, msg=lambda m: f"{what} {k}: {m}")


def setup_training(steps: int, lr: float):
    """The data, the initial Net and the CPU reference result every wrapper must reproduce."""
    data_ = batches(steps)
    torch.manual_seed(0)
    init = Net()
    return data_, init, reference_training(init, data_, lr)


def loss_on_shard(model, x, y, rank: int, world: int) -> torch.Tensor:
    """This rank's part of the global batch, on hpu."""
    return nn.functional.cross_entropy(model(shard(x, rank, world).to(HPU)), shard(y, rank, world).to(HPU))


def train_sharded(model, data_, lr: float, rank: int, world: int) -> None:
    """SGD over the data, each rank on its shard of every batch."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in data_:
        opt.zero_grad()
        loss_on_shard(model, x, y, rank, world).backward()
        opt.step()
        step()


def check_ddp(rank: int, world: int) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    lr, steps = 0.1, 4
    data_, init, want = setup_training(steps, lr)
    configs = [
        dict(gradient_as_bucket_view=True, bucket_cap_mb=0.005),  # several buckets
        dict(broadcast_buffers=False, static_graph=True),
        dict(find_unused_parameters=True),
    ]
    for cfg in configs:
        net = copy.deepcopy(init)
        if cfg.get("find_unused_parameters"):
            net.unused = nn.Linear(3, 3)
        ddp = DDP(net.to(HPU), **cfg)
        train_sharded(ddp, data_, lr, rank, world)
        got = {k: v for k, v in ddp.module.state_dict().items() if not k.startswith("unused")}
        close(got, want, f"DDP {cfg}")

    # no_sync: gradients of two micro-batches accumulate locally, the second backward syncs
    want = reference_training(init, data_, lr, accumulate=2)
    ddp = DDP(copy.deepcopy(init).to(HPU))
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    for i in range(0, steps, 2):
        opt.zero_grad()
        with ddp.no_sync():
            (loss_on_shard(ddp, *data_[i], rank, world) / 2).backward()
        (loss_on_shard(ddp, *data_[i + 1], rank, world) / 2).backward()
        opt.step()
        step()
    close(ddp.module.state_dict(), want, "DDP no_sync")


def check_fsdp(rank: int, world: int) -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy, StateDictType

    lr, steps = 0.1, 3
    data_, init, want = setup_training(steps, lr)
    for strategy in (ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP, ShardingStrategy.NO_SHARD,
                     ShardingStrategy.HYBRID_SHARD):
        mesh = None
        if strategy == ShardingStrategy.HYBRID_SHARD:  # shards across the ranks, one replica (FSDP treats
            # a shard group of size 1 as NO_SHARD, which would skip the replicas' all_reduce)
            from torch.distributed.device_mesh import init_device_mesh

            mesh = init_device_mesh("hpu", (1, world), mesh_dim_names=("replicate", "shard"))
        model = FSDP(copy.deepcopy(init), device_id=HPU, sharding_strategy=strategy, use_orig_params=True,
                     device_mesh=mesh)
        train_sharded(model, data_, lr, rank, world)
        with FSDP.summon_full_params(model):
            got = {k: v.detach().clone() for k, v in model.named_parameters()}
        close(got, {k: want[k] for k in got}, f"FSDP {strategy.name} summon_full_params")
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
            full = model.state_dict()
        close(full, want, f"FSDP {strategy.name} full state dict")
        if strategy == ShardingStrategy.FULL_SHARD:
            with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
                sharded = model.state_dict()
            for k, v in sharded.items():  # ShardedTensors: this rank's chunk of each tensor
                for sh in v.local_shards():
                    assert sh.tensor.device.type == "hpu", f"sharded {k} on {sh.tensor.device}"
                    ref = want[k]
                    for dim, (off, size) in enumerate(zip(sh.metadata.shard_offsets, sh.metadata.shard_sizes)):
                        ref = ref.narrow(dim, off, size)
                    close({k: sh.tensor}, {k: ref}, f"FSDP sharded state dict {k}")


def check_fsdp2(rank: int, world: int) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    lr, steps = 0.1, 3
    data_, init, want = setup_training(steps, lr)
    mesh = init_device_mesh("hpu", (world,))
    model = copy.deepcopy(init).to(HPU)
    fully_shard(model.fc1, mesh=mesh)
    fully_shard(model, mesh=mesh)
    train_sharded(model, data_, lr, rank, world)
    got = {k: v.full_tensor() for k, v in model.state_dict().items()}
    close(got, want, "FSDP2 fully_shard")


def check_failure(rank: int, world: int) -> None:
    """Rank 1 stalls past the group timeout, then dies. Rank 0's collectives must fail with
    clear errors (first the timeout, then the dead peer), not hang."""
    import time

    timeout = float(os.getenv("HCCL_TEST_TIMEOUT", "60"))
    spare = dist.new_group(list(range(world)))  # fresh connections for the dead-peer phase
    if rank == 1:
        time.sleep(2 * timeout)
        raise SystemExit(3)
    t = torch.ones(1 << 16, device=HPU)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        raise AssertionError("all_reduce with a stalled peer did not time out")
    except RuntimeError as e:
        waited = time.monotonic() - start
        assert "Timed out" in str(e) or "timed out" in str(e), e
        assert waited < 4 * timeout, f"timeout of {timeout}s honoured only after {waited:.1f}s"
        print(f"PEER-TIMEOUT-SEEN after {waited:.1f}s: {str(e).splitlines()[0]}", flush=True)
    try:
        for _ in range(50):
            dist.all_reduce(t, group=spare)
            time.sleep(0.5)
    except RuntimeError as e:
        print(f"PEER-FAILURE-SEEN {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
        os._exit(0)
    raise AssertionError("all_reduce with a dead peer did not fail")


MODES = {"collectives": check_collectives, "ddp": check_ddp, "fsdp": check_fsdp, "fsdp2": check_fsdp2,
         "failure": check_failure}


def run(modes: list[str], world_size: int | None = None, rank: int | None = None) -> None:
    if rank is not None:
        hccl.initialize_distributed_hpu(world_size, rank, rank)
    timeout = timedelta(seconds=float(os.getenv("HCCL_TEST_TIMEOUT", "60")))
    dist.init_process_group(backend="hccl", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    for mode in modes:
        MODES[mode](rank, world)
        print(f"OK {mode} {rank} lazy={int(LAZY)} module={os.getenv('HLS_MODULE_ID')}", flush=True)
    dist.destroy_process_group()


def spawned(local_rank: int, world_size: int, modes: list[str]) -> None:
    """Entry point for torch.multiprocessing.spawn (MASTER_ADDR/PORT come from the parent)."""
    run(modes, world_size, local_rank)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--spawn":
        import torch.multiprocessing as mp

        n = int(args[1])
        mp.spawn(spawned, args=(n, args[2:]), nprocs=n, join=True)
    elif args and args[0] == "--rank":
        run(args[3:], int(args[2]), int(args[1]))
    else:
        run(args)
