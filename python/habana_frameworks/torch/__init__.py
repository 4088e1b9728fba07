"""habana_frameworks.torch, emulated by hpusim on an ordinary x86-64 machine.

Importing it loads the Go core and the C++ glue (device guard, hooks, allocator), installs
the HPU op dispatch, and registers `torch.hpu`.
"""
from __future__ import annotations

import atexit
import os

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402

from . import _native  # noqa: E402

_native.load()

from ._ops import registry as _registry  # noqa: E402

_registry.install()

from . import _autocast  # noqa: E402,F401  (AutocastHPU kernels and the ops lists)

from . import core, hpu  # noqa: E402,F401
from .utils import hl_smi as _hl_smi  # noqa: E402

_hl_smi.ensure_on_path()

from .distributed import register_hccl_backend as _register_hccl_backend  # noqa: E402

_register_hccl_backend()

from . import activity_profiler as _activity_profiler  # noqa: E402

_activity_profiler.install()

if os.getenv("PT_HPU_GPU_MIGRATION", "0").strip().lower() in ("1", "true"):
    from . import gpu_migration  # noqa: E402,F401  (torch.cuda calls run on the HPU)
from .utils import internal as _internal  # noqa: E402

__version__ = "1.22.0.1"



def _probe_autograd_accelerator() -> None:
    """Newer torch releases route autograd through `at::getAccelerator()`, which needs the
    HPU hooks to report a device. Run one tiny backward; turn the hooks on only if needed."""
    from ._ops import fallback

    def attempt() -> None:
        with fallback.quiet():
            x = torch.ones(2, device="hpu", requires_grad=True)
            x.view(2).backward(torch.ones(2, device="hpu"))

    try:
        attempt()
        return
    except RuntimeError as e:
        first = e
    _native.glue().hpusim_glue_set_has_hpu(1)
    try:
        attempt()
    except RuntimeError as e:
        _native.glue().hpusim_glue_set_has_hpu(0)
        raise RuntimeError(f"hpusim: autograd on hpu does not work with this torch: {first}") from e


def _ensure_autograd_device_queues() -> None:
    """torch's autograd engine makes its per-device queues on the first backward; if one ran
    before this import, add hpu's (see csrc/hpu_autograd_engine.cpp)."""
    import ctypes

    fn = getattr(_native.glue(), "hpusim_glue_autograd_device_queues", None)
    if fn is None:
        return  # a glue library built before this entry point: late imports stay unsupported
    fn.argtypes, fn.restype = [], ctypes.c_int
    if fn() < 0:
        raise RuntimeError("hpusim: the autograd engine refused hpu device threads (forked after autograd started?)")


_ensure_autograd_device_queues()
_probe_autograd_accelerator()

# torch's autograd engine gives every non-CPU device type its own backward thread. On the
# emulated device that thread runs the same kernels on the same two cores as the caller,
# and handing the step between threads (and their caches) made the CNN's backward 1.5x
# slower. So backward runs on the thread that calls it, as on CPU (a thread-local torch
# setting: this importing thread). HPUSIM_AUTOGRAD_THREAD=1 keeps torch's device thread.
if os.environ.get("HPUSIM_AUTOGRAD_THREAD", "0") != "1":
    torch.autograd.set_multithreading_enabled(False)

# Recording starts after the import-time probe, so a fresh process shows no graphs.
if _internal.is_lazy():
    from . import _lazy
    from .core import step_closure as _step_closure

    _lazy.enable()
    atexit.register(_step_closure.flush_at_exit)
    # The lazy bridge's aten::linear: an activation and weights of two float dtypes mix
    # (csrc/hpu_lazy_linear.cpp).
    if _native.glue().hpusim_glue_lazy_linear() != 0:
        raise RuntimeError("hpusim: could not register lazy mode's aten::linear")
