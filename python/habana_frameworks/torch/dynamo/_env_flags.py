"""Truthy env values as the bridge's flags read them."""
from __future__ import annotations

TRUE_VALUES = ("1", "true", "yes", "on", "y", "t")


def truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in TRUE_VALUES
