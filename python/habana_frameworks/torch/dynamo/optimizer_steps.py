"""Optimizer step counts stay where the optimizer put them when a compiled step retraces.

Dynamo's OptimizerVariable calls `move_step_if_cpu()` before every traced `_init_group`: it
replaces each host step count in the optimizer's state with a copy on the parameter's
device. That suits CUDA, where dynamo first makes the groups capturable so the counts are
created on the device. Parameters on hpu are not made capturable, so torch creates host
step counts (as in eager mode); moving them while a step is being traced breaks the
optimizer: with two param groups the second group's `_init_group` replaces the first
group's counts after the graph has already captured them, the graph keeps incrementing the
old host tensors, and `optimizer.state[p]["step"]` stays a 0 on hpu forever (the parameters
update correctly; saved state dicts and LR logic reading the count do not). A recompile
(e.g. after an LR scheduler changes lr) moved them too, switching the step math mid-run.

For an hpu parameter whose group is neither capturable nor fused the count stays a host
tensor, as eager torch.optim keeps it; every other state is left to dynamo."""
from __future__ import annotations

from typing import Any


def _keeps_host_step(opt: Any, param: Any) -> bool:
    if getattr(param, "device", None) is None or param.device.type != "hpu":
        return False
    for group in opt.param_groups:
        if any(p is param for p in group["params"]):
            return not (group.get("capturable") or group.get("fused"))
    return False


def _install() -> None:
    from torch._dynamo.variables.optimizer import OptimizerVariable

    original = OptimizerVariable.move_step_if_cpu
    if getattr(original, "_hpusim", False):
        return

    def move_step_if_cpu(self) -> None:
        opt = self.value
        for p, state in opt.state.items():
            if "step" in state and state["step"].is_cpu and not _keeps_host_step(opt, p):
                state["step"] = state["step"].to(p.device)

    move_step_if_cpu._hpusim = True  # type: ignore[attr-defined]
    OptimizerVariable.move_step_if_cpu = move_step_if_cpu


_install()
