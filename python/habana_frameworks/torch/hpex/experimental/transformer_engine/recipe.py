"""fp8 training recipes: the formats and the delayed-scaling recipe."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Optional, Union

import torch


class Format(enum.Enum):
    """Which fp8 format each pass uses: E4M3 everywhere, E5M2 everywhere, or HYBRID (E4M3 for
    activations and weights in the forward pass, E5M2 for gradients in the backward pass)."""
    E4M3 = (torch.float8_e4m3fn, torch.float8_e4m3fn)
    E5M2 = (torch.float8_e5m2, torch.float8_e5m2)
    HYBRID = (torch.float8_e4m3fn, torch.float8_e5m2)

    @property
    def fwd_dtype(self) -> torch.dtype:
        return self.value[0]

    @property
    def bwd_dtype(self) -> torch.dtype:
        return self.value[1]


@dataclass
class DelayedScaling:
    """Scale each fp8 tensor from the amax values of earlier iterations.

    Each TE module keeps, per tensor it casts, the last `amax_history_len` values of max|x|.
    Every `interval` iterations it derives the next scale from that history: the largest
    value ("max") or the latest ("most_recent"), or a callable taking the history tensor;
    scale = fp8_max / amax / 2**margin (the previous scale is kept while amax is 0 or not
    finite). `reduce_amax` reduces the amax over the fp8 group in distributed runs."""
    margin: int = 0
    interval: int = 1
    fp8_format: Format = Format.HYBRID
    amax_history_len: int = 1024
    amax_compute_algo: Union[str, Callable[[torch.Tensor], torch.Tensor]] = "max"
    scaling_factor_compute_algo: Optional[Callable] = None
    reduce_amax: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.fp8_format, Format):
            raise TypeError(f"fp8_format must be a recipe.Format, got {self.fp8_format!r}")
        if self.interval < 1:
            raise ValueError(f"interval must be at least 1, got {self.interval}")
        if self.amax_history_len < 1:
            raise ValueError(f"amax_history_len must be at least 1, got {self.amax_history_len}")
        if isinstance(self.amax_compute_algo, str) and self.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError(f"amax_compute_algo must be 'max', 'most_recent' or a callable, "
                             f"got {self.amax_compute_algo!r}")
