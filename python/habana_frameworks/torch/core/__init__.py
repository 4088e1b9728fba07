"""`habana_frameworks.torch.core` (htcore): registers torch.hpu, mark_step and friends."""
from __future__ import annotations

import os

import torch

from habana_frameworks.torch import hpu
from habana_frameworks.torch.utils.internal import is_lazy, lazy_only  # noqa: F401

from . import step_closure  # noqa: F401

if not hasattr(torch, "hpu"):
    torch._register_device_module("hpu", hpu)

from habana_frameworks.torch.hpu import accelerator as _accelerator  # noqa: E402

_accelerator.install()  # torch.accelerator is hpu, as on Gaudi (unless CUDA works)

os.environ.setdefault("HABANA_PROFILE", "profile_api_light")


@lazy_only
def add_step_closure(closure, args=(), run_async=False):
    step_closure.add_step_closure(closure, args, run_async)


@lazy_only
def mark_step(device_str: str = "", sync: bool = False):
    step_closure.mark_step(device_str, sync)


@lazy_only
def iter_mark_step():
    step_closure.iter_mark_step()


def _wrap_manual_seed() -> None:
    """As in the bridge, torch.manual_seed also seeds the hpu generator."""
    original = torch.manual_seed
    if getattr(original, "_hpusim_wrapped", False):
        return

    def manual_seed(seed):
        gen = original(seed)
        hpu.manual_seed_all(int(seed))
        return gen

    manual_seed._hpusim_wrapped = True  # type: ignore[attr-defined]
    manual_seed.__doc__ = original.__doc__
    torch.manual_seed = manual_seed
    torch.random.manual_seed = manual_seed


_wrap_manual_seed()

from habana_frameworks.torch import dynamo as _dynamo  # noqa: E402,F401  (hpu_backend, at torch._dynamo's import)

from . import quantization  # noqa: E402,F401  (inference/quantization setup, also re-exported here)
from .quantization import (  # noqa: E402,F401
    hpu_inference_initialize, hpu_initialize, hpu_reset_env, hpu_set_env, hpu_set_inference_env,
    hpu_teardown_inference_env, hpu_inference_set_env, hpu_inference_reset_env,
)
