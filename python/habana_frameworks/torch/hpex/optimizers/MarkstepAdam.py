"""Adam / AdamW with a mark_step around each update in lazy mode (hpex.optimizers.Adam and
AdamW): torch's algorithms, graph-cut so the update runs as its own graph."""
from __future__ import annotations

import torch

from habana_frameworks.torch.core import step_closure


class _MarkStepAround:
    """Mixin: the base optimizer's step between two lazy-mode mark_steps."""

    @torch.no_grad()
    def step(self, closure=None):
        step_closure._mark_step_if_lazy()
        loss = super().step(closure)
        step_closure._mark_step_if_lazy()
        return loss


class MarkstepAdam(_MarkStepAround, torch.optim.Adam):
    pass


class MarkstepAdamW(_MarkStepAround, torch.optim.AdamW):
    pass
