"""The hccl backend: collectives, DDP and FSDP across processes, launched as users do.

Each test starts real processes (torchrun, torch.multiprocessing.spawn, or a plain launcher
calling initialize_distributed_hpu) running tests/distributed_worker.py, which checks its
results against CPU references and prints "OK <mode> <rank>" per passed mode."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
WORKER = str(HERE / "distributed_worker.py")
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict:
    env = dict(os.environ)
    # A clean launcher environment: nothing inherited from an outer distributed run.
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "HLS_MODULE_ID", "ID",
              "PT_HPU_LAZY_MODE", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
              "HABANA_VISIBLE_MODULES"):
        env.pop(k, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parent / "python"), env.get("PYTHONPATH")) if p)
    env.setdefault("HCCL_TEST_TIMEOUT", "60")
    env.update(extra)
    return env


def _ok(out: str, modes: list[str], ranks: int) -> None:
    for mode in modes:
        for r in range(ranks):
            # (the ranks' lines may interleave)
            assert f"OK {mode} {r} " in out, f"no 'OK {mode} {r}' in output:\n{out[-6000:]}"


def _run(cmd: list[str], env: dict, timeout: float = 240) -> str:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{out[-8000:]}"
    return out


def test_import_env_and_registration(tmp_path):
    """Importing the module normalises the launcher environment as the bridge does and
    registers hccl for hpu; the deprecated alias warns and forwards; hl-smi shows the
    process on its module while it runs."""
    code = textwrap.dedent("""
        import os, warnings
        os.environ.update(OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_LOCAL_RANK="1",
                          HABANA_VISIBLE_MODULES="5,6")
        import torch, torch.distributed as dist
        import habana_frameworks.torch.distributed.hccl as hccl
        # Open MPI's variables were mapped on import; the local rank picked module 6.
        assert (os.environ["WORLD_SIZE"], os.environ["RANK"], os.environ["LOCAL_RANK"]) == ("4", "3", "1")
        assert os.environ["HLS_MODULE_ID"] == "6" and os.environ["ID"] == "3"
        assert (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]) == ("localhost", "12345")
        # hl-smi lists this process on its card (module 6), among the card's compute processes
        import subprocess, habana_frameworks.torch as ht
        hl = os.path.join(os.path.dirname(ht.__file__), "lib", "hl-smi")
        env = {k: v for k, v in os.environ.items() if k != "HABANA_VISIBLE_MODULES"}
        table = subprocess.run([hl], env=dict(env, HPUSIM_DEVICE_COUNT="8"), capture_output=True, text=True).stdout
        mine = [l for l in table.splitlines() if f" {os.getpid()} " in l]
        assert len(mine) == 1 and mine[0].startswith("|   6") and " C " in mine[0], table
        assert hccl.initialize_distributed_hpu() == (4, 3, 1)
        assert hccl.initialize_distributed_hpu(2, 1, 0) == (2, 1, 0)
        assert (os.environ["WORLD_SIZE"], os.environ["RANK"], os.environ["LOCAL_RANK"]) == ("2", "1", "0")
        for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "HLS_MODULE_ID"):
            del os.environ[k]
        os.environ["OMPI_COMM_WORLD_LOCAL_RANK"] = "2"
        try:
            hccl.initialize_distributed_hpu()
            raise SystemExit("no assertion for too few visible modules")
        except AssertionError as e:
            # The bridge's exact text (lightning-habana's multi-tenancy test matches it).
            assert str(e) == ("There is not enough devices\\n        available for training. Please verify if "
                              "HABANA_VISIBLE_MODULES\\n        is set correctly."), repr(str(e))
        for k in list(os.environ):
            if k.startswith("OMPI_") or k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
                del os.environ[k]
        assert hccl.initialize_distributed_hpu() == (1, -1, -1)
        from habana_frameworks.torch.utils import distributed_utils
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert distributed_utils.initialize_distributed_hpu() == (1, -1, -1)
        assert any("distributed_utils.initialize_distributed_hpu is deprecated" in str(x.message) for x in w)
        # registration, as register_backend("hccl", ..., devices=["hpu"], extended_api=True) does
        assert dist.Backend.HCCL == "hccl" and "hccl" in dist.Backend.backend_list
        assert dist.Backend.default_device_backend_map["hpu"] == "hccl"
        assert dist.Backend.backend_capability["hccl"] == ["hpu"]
        assert dist.Backend._plugins["HCCL"].extended_api
        # barrier() asks torch which accelerator it runs on
        assert torch._C._get_accelerator().type == "hpu"
        assert torch.ops.c10d.allreduce_.default.has_kernel_for_dispatch_key("HPU")
        print("IMPORT-OK")
    """)
    out = _run([sys.executable, "-c", code], _env(HPUSIM_STATUS_DIR=str(tmp_path)))
    assert "IMPORT-OK" in out, out
    assert not list(tmp_path.iterdir()), "the module claim outlived its process"


def test_torchrun_ddp_fsdp():
    """torchrun --nproc_per_node=2: DDP (buckets, gradient_as_bucket_view, no_sync,
    find_unused_parameters, static_graph), FSDP (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD,
    HYBRID_SHARD, state dicts) and FSDP2 equal single-process full-batch SGD on CPU."""
    modes = ["ddp", "fsdp", "fsdp2"]
    out = _run([TORCHRUN, "--standalone", "--nproc_per_node=2", WORKER, *modes], _env())
    _ok(out, modes, 2)
    # one module per process: the local rank chose it
    assert "OK ddp 0 lazy=0 module=0" in out and "OK ddp 1 lazy=0 module=1" in out


def test_two_nodes_over_loopback_collectives():
    """Two torchrun launchers (--nnodes 2, node ranks 0 and 1) on 127.0.0.1 run every
    collective x dtype x reduce op against CPU references, plus the bad-input checks."""
    port = str(_free_port())
    procs = []
    for node in (0, 1):
        cmd = [TORCHRUN, "--nnodes=2", f"--node_rank={node}", "--nproc_per_node=1", "--master_addr=127.0.0.1",
               f"--master_port={port}", WORKER, "collectives"]
        procs.append(subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=240)
            outs.append(out)
            assert p.returncode == 0, f"node exited {p.returncode}:\n{out[-8000:]}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    _ok("\n".join(outs), ["collectives"], 2)


def test_spawn_lazy_mode():
    """torch.multiprocessing.spawn in lazy mode: pending graphs are flushed before Gloo reads
    the gradients, and DDP and FSDP still equal single-process training."""
    modes = ["ddp", "fsdp"]
    env = _env(PT_HPU_LAZY_MODE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    out = _run([sys.executable, WORKER, "--spawn", "2", *modes], env)
    _ok(out, modes, 2)
    assert "lazy=1" in out


def test_dead_rank_does_not_hang_the_others():
    """A stalled rank makes the others' collectives time out as the group's timeout says; a
    rank that dies makes them fail at once. Errors, never a hang."""
    port = str(_free_port())
    env = _env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, HCCL_TEST_TIMEOUT="5")
    procs = [subprocess.Popen([sys.executable, WORKER, "--rank", str(r), "2", "failure"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    try:
        out0, _ = procs[0].communicate(timeout=120)
        out1, _ = procs[1].communicate(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[1].returncode == 3, out1[-3000:]
    assert procs[0].returncode == 0 and "PEER-TIMEOUT-SEEN" in out0 and "PEER-FAILURE-SEEN" in out0, out0[-6000:]
