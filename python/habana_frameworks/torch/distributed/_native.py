"""Loads `_hccl_C`, the Python module of the hccl backend (csrc/hpu_hccl.cpp).

Its init function lives in the glue library, which _native already loaded with ctypes;
importing the same file as an extension module reuses that copy (and its registrations)."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType

import torch.distributed  # noqa: F401  (registers c10d's Backend class, the base of ProcessGroupHCCL)

from .. import _native

MODULE = "habana_frameworks.torch.distributed._hccl_C"


def load() -> ModuleType:
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    _native.load()
    path = os.path.join(_native.LIB_DIR, "libhpu_glue.so")
    loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
    spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[MODULE] = module
    return module
