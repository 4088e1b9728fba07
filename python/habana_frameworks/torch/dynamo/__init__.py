"""`habana_frameworks.torch.dynamo`: hpu's integration with torch.compile.

Registering needs `torch._dynamo`, whose import costs seconds; like the bridge, which defers
its compilers until a dynamo module is first imported, this package registers everything
the moment `torch._dynamo` finishes importing (at once if it already has):
- the dynamo device interface for "hpu" and "hpu:0" (`device_interface.HpuInterface`),
- the trace rules for `habana_frameworks.torch.hpu` (`trace_rules`),
- the `hpu_backend` compile backend (`compile_backend.backends`).
So `torch.compile(..., backend="hpu_backend")` and `torch._dynamo.list_backends()` see it
after `import torch` alone (the torch.backends autoload imports habana_frameworks.torch),
and a program that never compiles does not pay for dynamo."""
from __future__ import annotations

import importlib._bootstrap as _bootstrap
import sys
import threading
import warnings

_lock = threading.RLock()
_registered = False
_original_find_and_load = None


def _register_all() -> None:
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
        from .compile_backend import backends  # noqa: F401  (runs @register_backend)
        from . import device_interface

        device_interface.register()
        try:
            from . import trace_rules  # noqa: F401
        except ImportError as e:  # dynamo's internals moved: compile still works without them
            warnings.warn(f"hpusim: dynamo trace rules for torch.hpu not installed: {e!r}")
        try:
            from . import optimizer_steps  # noqa: F401
        except (ImportError, AttributeError) as e:  # dynamo's internals moved
            warnings.warn(f"hpusim: dynamo optimizer step-count rule not installed: {e!r}")


def _dynamo_loaded() -> bool:
    mod = sys.modules.get("torch._dynamo")
    spec = getattr(mod, "__spec__", None)
    return mod is not None and not getattr(spec, "_initializing", False)


def _find_and_load_hook(name, import_):
    module = _original_find_and_load(name, import_)
    # A nested import of the package while it initialises returns it half-made: wait for
    # the call that completes it.
    if name == "torch._dynamo" and not _registered and _dynamo_loaded():
        _unhook()
        try:
            _register_all()
        except Exception as e:  # a failed registration must not break the user's import
            warnings.warn(f"hpusim: hpu_backend could not be registered with dynamo: {e!r}")
    return module


def _unhook() -> None:
    global _original_find_and_load
    with _lock:
        if _original_find_and_load is not None and _bootstrap._find_and_load is _find_and_load_hook:
            _bootstrap._find_and_load = _original_find_and_load


def install() -> None:
    """Register now if torch._dynamo is loaded, else when it is."""
    global _original_find_and_load
    with _lock:
        if _registered:
            return
        if _dynamo_loaded():
            _register_all()
            return
        if _bootstrap._find_and_load is not _find_and_load_hook:
            _original_find_and_load = _bootstrap._find_and_load
            _bootstrap._find_and_load = _find_and_load_hook


install()
