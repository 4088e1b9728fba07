"""The hpu random generator. Only device 0 has one, as in the bridge.

As in the bridge, hpu generators are CPU generators (a Mersenne-Twister state held on the
host, device "cpu"), made in C++ (csrc/hpu_random.cpp): the HPU hooks' default generator,
which is `default_generators[0]`, and a new one for each `torch.Generator(device="hpu")`,
seeded like the bridge's with the CPU default generator's current seed. Every random op on
hpu draws a (seed, offset) pair for its Philox kernel from the generator it is given (this
one when none), so torch.hpu.manual_seed makes hpu randomness reproducible independently of
the CPU's. For a given seed, any generator (this one, an hpu one, a plain CPU one) gives the
same hpu numbers; they differ from CPU's numbers for that seed (a different algorithm, as on
Gaudi).
"""
from __future__ import annotations

from typing import Any, Iterable

import torch

from .. import _native
from ._utils import _get_device_index


def _hooks_default_generator() -> torch.Generator:
    try:
        return _native.glue_module("habana_frameworks.torch._random_C").default_generator()
    except ImportError:  # a glue library built before csrc/hpu_random.cpp: rebuild it (setup.py build_native)
        import warnings
        warnings.warn("hpusim: the glue library has no _random_C (built before csrc/hpu_random.cpp); "
                      "torch.hpu's default generator is a Python one until it is rebuilt")
        g = torch.Generator()
        g.manual_seed(torch.initial_seed())
        return g


default_generators: tuple[torch.Generator, ...] = (_hooks_default_generator(),)


def _only_device0(device: Any, what: str) -> None:
    idx = _get_device_index(device) if not isinstance(device, str) or device != "hpu" else 0
    if idx != 0:
        raise RuntimeError(f"hpu {what} supports only device 0")


def get_rng_state(device: Any = "hpu") -> torch.Tensor:
    _only_device0(device, "get_rng_state")
    return default_generators[0].get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "hpu") -> None:
    _only_device0(device, "set_rng_state")
    default_generators[0].set_state(new_state.cpu() if new_state.device.type != "cpu" else new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state()]


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    states = list(new_states)
    if len(states) != 1:
        raise RuntimeError("hpu set_rng_state_all supports only device 0")
    set_rng_state(states[0])


def manual_seed(seed: int) -> None:
    default_generators[0].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    default_generators[0].seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    return default_generators[0].initial_seed()
