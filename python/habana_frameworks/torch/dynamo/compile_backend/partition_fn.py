"""The joint-graph partitioner of hpu_backend: torch's `default_partition` (what the bridge
uses; no min-cut rematerialisation). The bridge first removes clones it proves
unnecessary (`remove_unnecessary_clones`); hpusim keeps every clone (the option is
accepted, and changes nothing)."""
from __future__ import annotations

from typing import Any

import torch
from torch._functorch.partitioners import default_partition

from . import fast_runtime


def hpu_partition(joint_module: torch.fx.GraphModule, _joint_inputs: Any, *, num_fwd_outputs: int,
                  **kwargs: Any):
    fw_module, bw_module = default_partition(joint_module, _joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)
    fast_runtime.note_partition(fw_module, bw_module)
    return fw_module, bw_module
