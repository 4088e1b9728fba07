"""Helpers of the config module: the bridge's parsing of boolean env flags, and the
dict-like `configuration_flags` view of the options."""
from __future__ import annotations

import os
from collections.abc import MutableMapping
from types import ModuleType
from typing import Any, Iterator

TRUE_VALUES = ("on", "1", "yes", "true", "y", "t")
FALSE_VALUES = ("off", "0", "no", "false", "n", "f")


def env_bool(name: str, default: bool) -> bool:
    raw = os.getenv(name)
    if raw is None or raw.strip() == "":
        return default
    v = raw.strip().lower()
    assert v in TRUE_VALUES or v in FALSE_VALUES, f"Unrecognized boolean value in env config: {name}={raw}"
    return v in TRUE_VALUES


def env_str(name: str, default: str) -> str:
    raw = os.getenv(name)
    return default if raw is None or raw.strip() == "" else raw.strip()


class ConfigFlags(MutableMapping):
    """`configuration_flags[key]`: the options as a dict (an alias the bridge keeps)."""

    def __init__(self, module: ModuleType):
        self._module = module

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self._module, key)
        except AttributeError:
            raise KeyError(key) from None

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self._module, key, value)

    def __delitem__(self, key: str) -> None:
        raise TypeError("hpu_backend options cannot be deleted")

    def __iter__(self) -> Iterator[str]:
        return iter(self._module.get_config_copy())

    def __len__(self) -> int:
        return len(self._module.get_config_copy())
