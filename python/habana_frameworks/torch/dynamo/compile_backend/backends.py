"""`hpu_backend`, registered with dynamo under its function's name, as in the bridge.

This module is imported the moment torch._dynamo finishes importing, which can be in the
middle of another torch import (torch._inductor.utils imports dynamo, then goes on): so it
imports only what dynamo has already loaded, and the compilers on the first compile."""
from __future__ import annotations

import os
from typing import Any

import torch
from torch._dynamo.backends.registry import register_backend

from .._env_flags import truthy
from . import config, fake_layouts

fake_layouts.install()


def import_compilers() -> None:
    """Import the compilers, partitioner and decompositions (done at the first compile)."""
    from . import compilers, decomposition, partition_fn  # noqa: F401


def import_hpu_partition() -> None:
    from . import partition_fn  # noqa: F401


# Every time dynamo hands hpu_backend a frame it has compiled before (a guard failed: new
# input shapes or dtypes, a changed Python value), in order: {"frame", "compile_id",
# "reason", "inputs"}. Each such call compiles new recipes, which graph_compilation counts.
_recompilations: list[dict[str, Any]] = []


def recompilations() -> list[dict[str, Any]]:
    """The recompilations seen so far (a copy), oldest first."""
    return [dict(r) for r in _recompilations]


def _input_summary(example_inputs: list[Any]) -> str:
    parts = []
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            parts.append(f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}")
        else:
            parts.append(type(x).__name__)
    return ", ".join(parts)


def _note_compile(example_inputs: list[Any]) -> None:
    """Records and logs a recompilation with dynamo's reason (the first guard that failed);
    a frame's first compilation is only logged at debug level."""
    from torch._guards import CompileContext

    from .logger import logger

    compile_id = CompileContext.current_compile_id()
    frame_compile_id = getattr(compile_id, "frame_compile_id", None)
    frame = "?"
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        code = tx.f_code
        frame = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
    except Exception:  # outside a dynamo trace (a direct backend call): no frame to name
        pass
    inputs = _input_summary(example_inputs)
    if not frame_compile_id:
        logger.debug("compiling %s (compile id %s), inputs: %s", frame, compile_id, inputs)
        return
    reason = None
    try:
        from torch._dynamo.utils import get_metrics_context

        reason = get_metrics_context()._metrics.get("recompile_reason")
    except Exception:
        pass
    reason = reason or "unknown (dynamo gave no reason)"
    _recompilations.append({"frame": frame, "compile_id": str(compile_id), "reason": reason,
                            "inputs": inputs})
    logger.info("Recompilation of %s (compile id %s): %s; inputs: %s", frame, compile_id, reason, inputs)


@register_backend
def hpu_backend(graph_module: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any):
    """torch.compile(model, backend="hpu_backend", options={...}): AOT autograd over hpu's
    compilers; `options` are keys of compile_backend.config (an unknown key raises
    AttributeError)."""
    if truthy(os.getenv("PT_HPU_DISALLOW_TORCH_COMPILE")):
        raise RuntimeError("Use of torch.compile is prohibited by PT_HPU_DISALLOW_TORCH_COMPILE.")
    from torch._dynamo.backends.common import aot_autograd

    _note_compile(example_inputs)
    fake_layouts.install(import_modules=True)
    from . import fast_runtime
    from .compilers import hpu_inference_compiler, hpu_training_compiler_bw, hpu_training_compiler_fw
    from .decomposition import get_hpu_decompositions
    from .partition_fn import hpu_partition

    options = kwargs.get("options")
    with config.patch(options or {}):
        patched = config.patch(options or {})
        inference = patched(hpu_inference_compiler) if config.inference else patched(hpu_training_compiler_bw)
        bw_compiler = patched(hpu_training_compiler_bw)
        with fast_runtime.recording(graph_module, example_inputs, bw_compiler) as record:
            compiled = aot_autograd(
                fw_compiler=patched(hpu_training_compiler_fw),
                bw_compiler=bw_compiler,
                inference_compiler=inference,
                decompositions=get_hpu_decompositions(),
                keep_inference_input_mutations=config.keep_input_mutations,
                partition_fn=hpu_partition,
            )(graph_module, example_inputs)
        if not config.use_fast_runtime:
            return compiled
        return fast_runtime.build(record, compiled)
