"""Trace rules for `habana_frameworks.torch.hpu`, as the bridge sets them: dynamo does not
trace into the module's files (a call of anything else there is a graph break), and the
device queries are put in the graph as torch functions and folded into constants."""
from __future__ import annotations

import os

import torch._dynamo.trace_rules as _rules
import torch._dynamo.variables.torch as _torch_vars

from .. import hpu as _hpu
from ..hpu import _utils as _hpu_utils

# Answered once at trace time and baked into the graph, as torch.cuda.is_available is.
CONSTANT_FOLDED = (_hpu.is_available, _hpu.current_device, _hpu.device_count,
                   _hpu_utils._get_device_index)


def _install() -> None:
    hpu_dir = os.path.dirname(_hpu.__file__) + "/"
    if hpu_dir not in _rules.SKIP_DIRS:
        _rules.SKIP_DIRS.append(hpu_dir)
        _rules._recompile_re()
    for fn in CONSTANT_FOLDED:
        _rules._allowed_callable_ids.add(id(fn))
        _torch_vars.constant_fold_functions[fn] = None


_install()
