"""`habana_frameworks.torch.core.weight_sharing`: the lazy bridge's weight-sharing support.

On Gaudi a lazy-mode parameter's `.data` cannot be swapped for a device tensor, so
`Module.to("hpu")` would untie parameters shared between modules (tied embeddings and LM
heads). With PT_HPU_WEIGHT_SHARING=1 (the default) the bridge's `enable_weight_sharing()`
patches `Module.to`/`__getattr__` and turns parameters into `HabanaParameterWrapper`s that
keep such ties. Clients only look at the class: neural-compressor checks
`type(param) == weight_sharing.HabanaParameterWrapper` before rebuilding a parameter.

hpusim's `.to("hpu")` swaps `.data` in place exactly as torch does on CPU, so a tied
parameter stays one Parameter object on the device and nothing needs wrapping:
`enable_weight_sharing()` checks that this holds and installs no patches, and parameters
stay plain `torch.nn.Parameter` (so the client's class check is simply False).
"""
from __future__ import annotations

import torch

__all__ = ["HabanaParameterWrapper", "enable_weight_sharing"]


class HabanaParameterWrapper(torch.nn.Parameter):
    """The bridge's parameter class for weight sharing. hpusim never converts parameters to
    it (ties survive `.to("hpu")` without it); it exists for clients' type checks and
    behaves as a plain Parameter if a client builds one."""


def _ties_survive_move() -> bool:
    # Two modules sharing one Parameter, moved to hpu: still one Parameter, on hpu.
    a, b = torch.nn.Linear(2, 2, bias=False), torch.nn.Linear(2, 2, bias=False)
    b.weight = a.weight
    holder = torch.nn.Sequential(a, b).to("hpu")
    return holder[0].weight is holder[1].weight and holder[0].weight.device.type == "hpu"


def enable_weight_sharing() -> None:
    """The bridge's switch. Here tied parameters already survive moves, so it installs
    nothing; it raises if that ever stops being true. (Not called at import: the check runs
    device ops, and a fresh lazy-mode process records none.)"""
    if not _ties_survive_move():
        raise RuntimeError("hpusim: parameters shared between modules were untied by Module.to('hpu')")
