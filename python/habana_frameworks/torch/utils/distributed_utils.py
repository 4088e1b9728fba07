"""Deprecated home of initialize_distributed_hpu (kept, as in the bridge, for old scripts)."""
from __future__ import annotations

import warnings
from typing import Optional, Tuple


def initialize_distributed_hpu(world_size: Optional[int] = None, rank: Optional[int] = None,
                               local_rank: Optional[int] = None) -> Tuple[int, int, int]:
    warnings.warn(
        "habana_frameworks.torch.utils.distributed_utils.initialize_distributed_hpu is deprecated. "
        "Please use habana_frameworks.torch.distributed.hccl.initialize_distributed_hpu")
    from habana_frameworks.torch.distributed import hccl

    return hccl.initialize_distributed_hpu(world_size, rank, local_rank)
