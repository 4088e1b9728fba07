"""The hpu random generator. Only device 0 has one, as in the bridge.

The generator is a Philox/MT state held on the host; every random op on hpu draws from it,
so torch.hpu.manual_seed makes hpu randomness reproducible independently of the CPU's.
"""
from __future__ import annotations

from typing import Any, Iterable

import torch

from ._utils import _get_device_index

default_generators: tuple[torch.Generator, ...] = (torch.Generator(),)
default_generators[0].manual_seed(67280421310721)  # torch's default seed


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
