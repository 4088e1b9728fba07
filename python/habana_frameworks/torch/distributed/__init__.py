"""habana_frameworks.torch.distributed: import `.hccl` to register the `hccl` backend.

`import habana_frameworks.torch` already registers the backend name, as the bridge does
(public DeepSpeed's HPU accelerator calls `init_process_group("hccl")` without importing
`.hccl`); the first hccl group then loads `.hccl`, with its import-time set-up."""
from __future__ import annotations

from typing import Any


def _create_on_demand(backend_opts: Any, pg_opts: Any) -> Any:
    from . import hccl

    return hccl._create_process_group_hccl(backend_opts, pg_opts)


def register_hccl_backend() -> None:
    import torch.distributed as dist

    if not dist.is_available() or "hccl" in dist.Backend.backend_list:
        return
    dist.Backend.register_backend("hccl", _create_on_demand, extended_api=True, devices=["hpu"])
