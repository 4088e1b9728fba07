"""`habana_frameworks.torch.core.quantization`: the inference/quantization setup calls that
quantization tools (habana_quantization_toolkit, neural-compressor) and lightning-habana's
fp8 inference make around a model.

On Gaudi these switch the graph compiler into inference mode (weights may be folded as
constants, quantized dtypes kept, 3-D matmuls reshaped to 2-D GEMMs) and mark tensors as
constants for the recipe's const section. hpusim computes the same numbers either way, so
the switches are state in `torch.hpu` and the const marks are a record of which tensors a
client declared constant (`is_const`), both readable back.
"""
from __future__ import annotations

import weakref
from typing import Any, Iterable, Optional

import torch

from habana_frameworks.torch import hpu
from habana_frameworks.torch.hpex.kernels import Fp8Ops  # noqa: F401  (torch.ops.hpu's fp8 ops exist once the bridge loads)

# Tensors marked constant by hpu_initialize/hpu_inference_initialize, by id and held weakly
# (a WeakSet would compare tensors with ==, which is elementwise).
_const_tensors: "dict[int, weakref.ref[torch.Tensor]]" = {}


def _add_const(tensor: torch.Tensor) -> None:
    key = id(tensor)
    _const_tensors[key] = weakref.ref(tensor, lambda _ref, key=key: _const_tensors.pop(key, None))


def is_const(tensor: torch.Tensor) -> bool:
    """Whether `tensor` was marked constant by hpu_initialize / hpu_inference_initialize."""
    ref = _const_tensors.get(id(tensor))
    return ref is not None and ref() is tensor


def _scale_tensors(model: torch.nn.Module) -> Iterable[torch.Tensor]:
    # Quantization tools keep their scales as buffers or parameters named *scale*.
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if "scale" in name.rsplit(".", 1)[-1]:
            yield t


def _mark_const(model: Optional[torch.nn.Module], mark_only_scales_as_const: bool) -> None:
    if model is None:
        return
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"expected a torch.nn.Module, got {type(model).__name__}")
    tensors = _scale_tensors(model) if mark_only_scales_as_const else \
        list(model.parameters()) + list(model.buffers())
    for t in tensors:
        if t.device.type == "hpu":  # only device tensors go into a recipe's const section
            _add_const(t)


def hpu_set_env(model: Optional[torch.nn.Module] = None) -> Optional[torch.nn.Module]:
    """Inference environment for a model about to be quantized: inference mode and the
    3-D matmul reshape on. Returns the model."""
    hpu.enable_inference_mode()
    hpu.enable_matmul3d_2d_reshape()
    return model


def hpu_set_inference_env(model: Optional[torch.nn.Module] = None) -> Optional[torch.nn.Module]:
    """As hpu_set_env, plus quantized dtypes kept through the graph. Returns the model."""
    hpu.enable_inference_mode()
    hpu.enable_quantization()
    hpu.enable_matmul3d_2d_reshape()
    return model


def hpu_inference_set_env(model: Optional[torch.nn.Module] = None) -> Optional[torch.nn.Module]:
    """The newer bridge's name for hpu_set_inference_env (vLLM and neural-compressor call it,
    falling back to hpu_set_env where it is missing)."""
    return hpu_set_inference_env(model)


def hpu_reset_env() -> None:
    hpu.disable_inference_mode()
    hpu.disable_matmul3d_2d_reshape()


def hpu_teardown_inference_env() -> None:
    """Undo hpu_set_inference_env."""
    hpu.disable_inference_mode()
    hpu.disable_quantization()
    hpu.disable_matmul3d_2d_reshape()


def hpu_inference_reset_env() -> None:
    """The newer bridge's name for hpu_teardown_inference_env."""
    hpu_teardown_inference_env()


def hpu_initialize(model: Optional[torch.nn.Module] = None, mark_only_scales_as_const: bool = False,
                   optimizer: Any = None, args: Any = None) -> None:
    """Mark the (quantized) model's parameters and buffers, or only its scales, constant."""
    _mark_const(model, mark_only_scales_as_const)


def hpu_inference_initialize(model: Optional[torch.nn.Module] = None, mark_only_scales_as_const: bool = False,
                             optimizer: Any = None, args: Any = None) -> None:
    """hpu_initialize for inference, with the inference environment switched on."""
    hpu_set_inference_env()
    _mark_const(model, mark_only_scales_as_const)
