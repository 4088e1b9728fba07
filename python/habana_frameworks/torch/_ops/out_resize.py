"""Resizing an out= tensor of the wrong shape, with the deprecation warning torch's CPU
kernels give when the out tensor had elements (an empty one is resized silently)."""
from __future__ import annotations

import warnings
from typing import Sequence

import torch


def resize_out(out: torch.Tensor, shape: Sequence[int]) -> None:
    if out.numel():
        warnings.warn(
            f"An output with one or more elements was resized since it had shape {list(out.shape)}, which does "
            f"not match the required output shape {list(shape)}. This behavior is deprecated, and in a future "
            "PyTorch release outputs will not be resized unless they have zero elements. You can explicitly "
            "reuse an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
            UserWarning, stacklevel=2)
    out.resize_(shape)
