"""PT_ENABLE_INT64_SUPPORT: with it off, the bridge keeps int64 tensors as int32 on the
device, so a host int64 value outside the int32 range cannot go there. hpusim stores int64
either way; with the flag off it refuses those values with the bridge's error, and values in
range behave the same as stored int32. The flag is read at each copy, as clients set it at
run time."""
from __future__ import annotations

import os

import torch

_INT32 = torch.iinfo(torch.int32)


def enabled() -> bool:
    return os.environ.get("PT_ENABLE_INT64_SUPPORT", "1").strip().lower() not in ("0", "false", "f", "off", "no")


def check_host_to_device(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Raise if a host int64 tensor copied into an hpu int64 tensor has values int32 cannot
    hold while int64 support is off."""
    if dst.dtype != torch.int64 or src.dtype != torch.int64 or src.device.type != "cpu":
        return
    if src.numel() == 0 or enabled():
        return
    lo, hi = int(src.min()), int(src.max())
    if lo < _INT32.min or hi > _INT32.max:
        raise RuntimeError(
            f"Error when trying to cast Long to Int, Input values range [{lo}, {hi}] exceeds "
            f"Int range [{_INT32.min}, {_INT32.max}]")
