"""The `hccl` process-group backend, as `habana_frameworks.torch.distributed.hccl` on Gaudi.

Importing it (as Gaudi scripts do before `init_process_group(backend="hccl")`):
1. normalises the launcher's environment (`initialize_distributed_hpu()`: torchrun's or Open
   MPI's variables, `MASTER_ADDR`/`MASTER_PORT` defaults, the module id of this process);
2. registers `hccl` for the `hpu` device with `torch.distributed.Backend.register_backend`;
3. keeps collectives out of dynamo graphs, as the bridge does.

The collectives run in C++ (csrc/hpu_hccl.cpp) over torch's own Gloo backend, on CPU aliases
of the hpu tensors' host memory.
"""
from __future__ import annotations

import atexit
import ctypes
import ipaddress
import os
import socket
from datetime import timedelta
import warnings
from typing import Any, Optional, Tuple

import torch
import torch.distributed as dist

from ... import _native
from .. import _native as _hccl_native

_hccl_C = _hccl_native.load()
ProcessGroupHCCL = _hccl_C.ProcessGroupHCCL

__all__ = ["initialize_distributed_hpu", "ProcessGroupHCCL"]


def _setup_module_id(world_size: int, local_rank: int) -> None:
    """One card per process: the local rank picks this process's module, through
    HABANA_VISIBLE_MODULES when it is set (the process still sees its card as hpu:0)."""
    if os.getenv("HLS_MODULE_ID") is not None or local_rank == -1 or world_size == 1:
        return
    visible = os.getenv("HABANA_VISIBLE_MODULES")
    if visible:
        modules = [m.strip() for m in visible.split(",") if m.strip()]
        # The bridge's text, line breaks and indentation included (clients match on it).
        assert len(modules) > local_rank, (
            "There is not enough devices\n        available for training. Please verify if "
            "HABANA_VISIBLE_MODULES\n        is set correctly.")
        os.environ["HLS_MODULE_ID"] = modules[local_rank]
    else:
        os.environ["HLS_MODULE_ID"] = str(local_rank)


def initialize_distributed_hpu(world_size: Optional[int] = None, rank: Optional[int] = None,
                               local_rank: Optional[int] = None) -> Tuple[int, int, int]:
    """Return (world_size, rank, local_rank) from the launcher's environment, as the bridge.

    With all three arguments given they are written to WORLD_SIZE, RANK and LOCAL_RANK (for
    custom launchers). Otherwise Open MPI's OMPI_COMM_WORLD_* fill in for torchrun's
    variables. Not launched distributed: (1, -1, -1)."""
    if world_size is not None and rank is not None and local_rank is not None:
        os.environ["WORLD_SIZE"] = str(world_size)
        os.environ["RANK"] = str(rank)
        os.environ["LOCAL_RANK"] = str(local_rank)
    else:
        torch_vars = ("LOCAL_RANK", "WORLD_SIZE", "RANK")
        mpi_vars = ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")
        if not all(v in os.environ for v in torch_vars) and all(v in os.environ for v in mpi_vars):
            for tv, mv in zip(torch_vars, mpi_vars):
                os.environ[tv] = os.environ[mv]
        os.environ.setdefault("MASTER_ADDR", "localhost")
        os.environ.setdefault("MASTER_PORT", "12345")
    world_size = int(os.getenv("WORLD_SIZE") or 1)
    rank = int(os.getenv("RANK") or -1)
    local_rank = int(os.getenv("LOCAL_RANK") or -1)
    _setup_module_id(world_size, local_rank)
    if rank != -1:
        os.environ["ID"] = str(rank)
    _claim_module()
    return world_size, rank, local_rank


def _claim_module() -> None:
    """Tell hl-smi which card this process uses (it lists it among the card's compute
    processes); the claim goes when the process exits."""
    try:
        module = int(os.getenv("HLS_MODULE_ID") or 0)
    except ValueError:
        return
    lib = _native.go()
    if not getattr(lib, "_hpusim_claims_bound", False):
        lib.hpusim_claim_module.argtypes, lib.hpusim_claim_module.restype = [ctypes.c_int], ctypes.c_int
        lib.hpusim_release_modules.argtypes, lib.hpusim_release_modules.restype = [], ctypes.c_int
        lib._hpusim_claims_bound = True
        atexit.register(lib.hpusim_release_modules)
    if lib.hpusim_claim_module(module) != 0:
        # Only hl-smi's view depends on it: a read-only /tmp must not stop training.
        warnings.warn(f"hccl: could not record module {module} for hl-smi: {_native.last_error()}")


def _is_local_address(addr: str) -> bool:
    if addr in ("", "localhost", socket.gethostname()):
        return True
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def _gloo_device() -> Any:
    """Gloo's transport device: loopback for runs on this host (no hostname resolution needed
    in sandboxes), else Gloo's default (which honours GLOO_SOCKET_IFNAME)."""
    G = dist.ProcessGroupGloo
    if os.getenv("GLOO_SOCKET_IFNAME"):
        return G.create_default_device()
    if _is_local_address(os.getenv("MASTER_ADDR", "localhost")):
        return G.create_device(hostname="127.0.0.1")
    return G.create_default_device()


def _create_process_group_hccl(backend_opts: Any, pg_opts: Any) -> "ProcessGroupHCCL":
    """The extended-API creator torch calls for each hccl group (the default group and every
    new_group / DeviceMesh subgroup), with that group's store, rank and size."""
    opts = dist.ProcessGroupGloo._Options()
    timeout = backend_opts.timeout
    opts._timeout = timeout if isinstance(timeout, timedelta) else timedelta(seconds=float(timeout))
    opts._devices = [_gloo_device()]
    opts._threads = int(os.getenv("HPUSIM_HCCL_GLOO_THREADS", "2"))
    store = dist.PrefixStore("hccl/", backend_opts.store)
    gloo = dist.ProcessGroupGloo(store, backend_opts.group_rank, backend_opts.group_size, opts)
    return ProcessGroupHCCL(gloo, backend_opts.group_rank, backend_opts.group_size, str(backend_opts.group_id))


def _register() -> None:
    if "hccl" in dist.Backend.backend_list:
        return
    dist.Backend.register_backend("hccl", _create_process_group_hccl, extended_api=True, devices=["hpu"])


_COLLECTIVE_NAMES = ("all_gather", "all_reduce", "all_to_all", "barrier", "broadcast", "gather",
                     "irecv", "isend", "recv", "reduce", "scatter", "send")


def _disallow_collectives_in_graph() -> None:
    """As the bridge: dynamo must not trace torch.distributed's collectives (pytorch#102478)."""
    try:
        import torch._dynamo
    except Exception:  # dynamo is optional for eager and lazy training
        return
    for name in dir(dist):
        if name.startswith("_") or not any(c in name for c in _COLLECTIVE_NAMES):
            continue
        fn = getattr(dist, name)
        if not callable(fn):
            continue
        try:
            torch._dynamo.disallow_in_graph(fn)
        except (torch._dynamo.exc.IncorrectUsage, AssertionError, TypeError):
            pass


def _accelerator_is_hpu() -> None:
    """torch.distributed asks `torch._C._get_accelerator()` which device barrier() runs on;
    it must say hpu, or barrier() picks cpu, which an hccl-only group has no backend for.

    The HPU hooks would say so, but torch 2.7.1 reads them once, before the glue registers
    them, so the answer is given here, where torch's Python code asks."""
    _native.glue().hpusim_glue_set_has_hpu(1)
    original = torch._C._get_accelerator
    if getattr(original, "_hpusim", False):
        return

    def _get_accelerator(check: Optional[bool] = None) -> torch.device:
        device = original() if check is None else original(check)
        if device.type == "cpu" and torch.hpu.is_available():
            return torch.device("hpu", torch.hpu.current_device())
        return device

    _get_accelerator._hpusim = True  # type: ignore[attr-defined]
    torch._C._get_accelerator = _get_accelerator


initialize_distributed_hpu()
_register()
_disallow_collectives_in_graph()
_accelerator_is_hpu()
