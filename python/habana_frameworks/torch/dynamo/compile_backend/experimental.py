"""`enable_compiled_autograd`: backward graphs captured by compiled autograd and compiled
with hpu_backend (PT_HPU_ENABLE_COMPILED_AUTOGRAD=1 calls it at import)."""
from __future__ import annotations

import warnings
from typing import Any

import torch

_state: dict[str, Any] = {}


def enable_compiled_autograd(**compile_kwargs: Any) -> None:
    def compiler_fn(gm):
        return torch.compile(gm, backend="hpu_backend", options={"inference": False}, **compile_kwargs)

    warnings.warn("Enabling CompiledAutograd for hpu_backend with torch.compile")
    torch._dynamo.reset()
    torch._dynamo.config.optimize_ddp = "python_reducer"
    torch._C._set_autograd_fallback_mode("nothing")
    ctx = torch._dynamo.compiled_autograd._enable(compiler_fn)
    ctx.__enter__()
    _state["ctx"] = ctx
