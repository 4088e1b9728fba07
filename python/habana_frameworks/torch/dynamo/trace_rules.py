"""Trace rules for `habana_frameworks.torch.hpu`, as the bridge sets them: dynamo does not
trace into the module's files (a call of anything else there is a graph break), and the
device queries are put in the graph as torch functions and folded into constants.

hpusim's own runtime (the Python op kernels, the Go bindings, recipes, autocast kernels)
is skipped too: those frames run under the dispatcher, also while a compiled function
runs its eager parts (the `ones_like` of `loss.backward()`, a CPU fallback), and dynamo
would otherwise trace them into graphs of their own, guarded and called on every step."""
from __future__ import annotations

import os

import torch._dynamo.trace_rules as _rules
import torch._dynamo.variables.torch as _torch_vars

from .. import hpu as _hpu
from ..hpu import _utils as _hpu_utils

# Answered once at trace time and baked into the graph, as torch.cuda.is_available is.
CONSTANT_FOLDED = (_hpu.is_available, _hpu.current_device, _hpu.device_count,
                   _hpu_utils._get_device_index)


# Put in the graph as the bridge does (dynamo wraps their results as stream objects):
# a compiled region may ask for the current stream or enter a stream context.
IN_GRAPH = (_hpu.current_stream, _hpu.stream)


# Never called from user code: kernels and the runtime under them (paths relative to
# habana_frameworks/torch; a directory ends with "/").
RUNTIME_PATHS = ("_ops/", "_native.py", "_recipe.py", "_lazy.py", "_autocast.py")


def skipped_paths() -> list[str]:
    # The same spelling as the code objects' co_filename (what dynamo matches).
    root = os.path.dirname(os.path.dirname(__file__))
    return [os.path.dirname(_hpu.__file__) + "/"] + [os.path.join(root, p) for p in RUNTIME_PATHS]


def _install() -> None:
    added = [p for p in skipped_paths() if p not in _rules.SKIP_DIRS]
    if added:
        _rules.SKIP_DIRS.extend(added)
        _rules._recompile_re()
    for fn in CONSTANT_FOLDED + IN_GRAPH:
        _rules._allowed_callable_ids.add(id(fn))
    for fn in CONSTANT_FOLDED:
        _torch_vars.constant_fold_functions[fn] = None


_install()
