"""Fake hpu tensors lay out results as hpusim's kernels do.

torch's fake tensors assume Gaudi's kernels write dense outputs: for device type hpu
(`torch._refs.is_noncontiguous_supported`, `torch._subclasses.fake_impls.
is_noncontiguous_supported`) elementwise results, `slice_scatter`, `copy` and
`_unsafe_index_put` are traced contiguous whatever their inputs' layout. hpusim's kernels
keep their inputs' layout as CPU's do, so the traced strides then differ from the run-time
ones, and AOT's functionalisation itself breaks on them: an in-place op on a permuted
view (Funnel's `positional_attn *= cls_mask`) is written back through the inverse of the
view chain, whose `view` cannot be taken on the dense `slice_scatter` result ("Cannot view
a tensor with shape [2, 2, 12, 1, 24] and strides (288, 576, 24, 1, 1)"). `install()`
makes fake hpu tensors follow CPU's layout rules, which are the rules the kernels follow;
it is called when hpu_backend registers and at each compile."""
from __future__ import annotations

import sys
from typing import Any


def _cpu_rules(device: Any) -> bool:
    return True


_MODULES = ("torch._refs", "torch._subclasses.fake_impls")


def install(import_modules: bool = False) -> None:
    """Patch the modules already loaded (all of them when import_modules)."""
    for name in _MODULES:
        mod = sys.modules.get(name)
        if mod is None and import_modules:
            import importlib

            mod = importlib.import_module(name)
        if mod is not None and getattr(mod, "is_noncontiguous_supported", None) is not _cpu_rules:
            mod.is_noncontiguous_supported = _cpu_rules


def installed() -> bool:
    return all(getattr(sys.modules.get(n), "is_noncontiguous_supported", None) is _cpu_rules for n in _MODULES)
