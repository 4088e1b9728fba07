"""Grid sampling on the native kernel (kernels/grid_sample.go): torch.nn.functional.grid_sample's
grid_sampler_2d and its backward, every interpolation (bilinear, nearest, bicubic), padding
(zeros, border, reflection) and align_corners, on views with any strides. Shapes and argument
errors come from torch's own meta kernels (meta_of)."""
from __future__ import annotations

import torch

from .. import _native
from .linalg import meta_of
from .registry import NotNative, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def _meta(input, grid, interpolation_mode, padding_mode, align_corners):
    """The result's meta twin; bad arguments go to the CPU kernel for its RuntimeError (torch's
    Python meta kernel asserts on some of them instead)."""
    try:
        return meta_of(aten.grid_sampler_2d.default, input, grid, interpolation_mode, padding_mode, align_corners)
    except AssertionError:
        raise NotNative from None


@native("aten::grid_sampler_2d")
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    m = _meta(input, grid, interpolation_mode, padding_mode, align_corners)
    if input.dtype not in _FLOATS or grid.dtype != input.dtype:
        raise NotNative
    out = torch.empty(m.shape, dtype=m.dtype, device=input.device)
    if out.numel():
        _native.run("grid_sampler_2d", [out, input, grid], [interpolation_mode, padding_mode, int(align_corners)])
    return out


@native("aten::grid_sampler_2d_backward")
def grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
                             output_mask):
    _meta(input, grid, interpolation_mode, padding_mode, align_corners)
    if input.dtype not in _FLOATS or grid.dtype != input.dtype or grad_output.dtype != input.dtype:
        raise NotNative
    gi = torch.zeros(input.shape, dtype=input.dtype, device=input.device) if output_mask[0] else None
    gg = torch.zeros(grid.shape, dtype=grid.dtype, device=grid.device)
    if grad_output.numel() and input.numel():
        present = [t for t in (gi, gg) if t is not None]
        mask = (1 if gi is not None else 0) | 2
        _native.run("grid_sampler_2d_bwd", [grad_output, input, grid] + present,
                    [interpolation_mode, padding_mode, int(align_corners), mask])
    return gi, gg
