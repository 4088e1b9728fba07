from __future__ import annotations

from typing import Any

import torch


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    """Normalise None / int / "hpu:1" / torch.device to an index (current device for None)."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu and device.type == "cpu":
            return -1
        if device.type != "hpu":
            raise ValueError(f"Expected a hpu device, but got: {device}")
        if device.index is None:
            from . import current_device
            return current_device()
        return device.index
    if device is None:
        from . import current_device
        return current_device()
    if isinstance(device, int):
        return device
    raise ValueError(f"Invalid device {device!r}")
