"""torchvision's detection ops on hpu (kernels/roi_ops.go), which Gaudi runs on the device:
torchvision::nms (and so batched_nms and every detector's post-processing), roi_align with
its backward (MultiScaleRoIAlign in Faster/Mask/Keypoint R-CNN). The others
(roi_pool, ps_roi_align, ps_roi_pool, deform_conv2d) keep the counted CPU fallback.

The kernels are registered for the HPU key of the torchvision namespace without importing
torchvision (the dispatcher takes a kernel before the op's schema exists), so the bridge's
import stays light and the ops are native from whenever the user imports torchvision.
Argument errors (wrong ranks, mixed dtypes) go to torchvision's CPU kernel, which raises
its own RuntimeError; its fake kernels serve torch.compile."""
from __future__ import annotations

import torch

from .. import _native
from .registry import NotNative, hpu_kernel

_FLOATS = (torch.float32, torch.float64, torch.bfloat16)
_lib: torch.library.Library | None = None


def _nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    if (dets.dim() != 2 or dets.shape[1] != 4 or scores.dim() != 1 or scores.shape[0] != dets.shape[0]
            or dets.dtype not in _FLOATS or scores.dtype != dets.dtype):
        raise NotNative
    if dets.shape[0] == 0:
        return torch.empty(0, dtype=torch.long, device=dets.device)
    # torchvision's CPU kernel visits boxes by a stable descending sort of the scores
    order = scores.sort(stable=True, descending=True).indices
    keep = torch.empty(order.shape[0], dtype=torch.bool, device=dets.device)
    _native.run("nms_keep", [keep, dets.index_select(0, order)], (), [float(iou_threshold)])
    return order[keep]


def _roi_attrs(pooled_height, pooled_width, sampling_ratio, aligned):
    return [int(pooled_height), int(pooled_width), int(sampling_ratio), int(bool(aligned))]


def _roi_align(input: torch.Tensor, rois: torch.Tensor, spatial_scale: float, pooled_height: int,
               pooled_width: int, sampling_ratio: int, aligned: bool) -> torch.Tensor:
    if (input.dim() != 4 or rois.dim() != 2 or rois.shape[1] != 5 or input.dtype not in _FLOATS
            or rois.dtype != input.dtype or pooled_height <= 0 or pooled_width <= 0):
        raise NotNative
    out = torch.empty((rois.shape[0], input.shape[1], int(pooled_height), int(pooled_width)),
                      dtype=input.dtype, device=input.device)
    if out.numel():
        _native.run("roi_align", [out, input, rois], _roi_attrs(pooled_height, pooled_width, sampling_ratio, aligned),
                    [float(spatial_scale)])
    return out


def _roi_align_backward(grad: torch.Tensor, rois: torch.Tensor, spatial_scale: float, pooled_height: int,
                        pooled_width: int, batch_size: int, channels: int, height: int, width: int,
                        sampling_ratio: int, aligned: bool) -> torch.Tensor:
    if (grad.dim() != 4 or rois.dim() != 2 or rois.shape[1] != 5 or grad.dtype not in _FLOATS
            or rois.dtype != grad.dtype or tuple(grad.shape) != (rois.shape[0], channels, pooled_height, pooled_width)):
        raise NotNative
    gin = torch.zeros((int(batch_size), int(channels), int(height), int(width)), dtype=grad.dtype, device=grad.device)
    if gin.numel() and grad.numel():
        _native.run("roi_align_backward", [gin, grad, rois],
                    _roi_attrs(pooled_height, pooled_width, sampling_ratio, aligned), [float(spatial_scale)])
    return gin


def _kernel(name: str, lowering):
    """The HPU kernel of torchvision::<name>: the lowering, or the counted CPU fallback when
    it raises NotNative, through the bridge's boxed kernel (device checks included)."""
    from . import registry

    op_cache: list = []

    def kernel(*args, **kwargs):
        if not op_cache:
            op = getattr(torch.ops.torchvision, name).default
            registry._NATIVE[op] = lowering
            op_cache.append(op)
        return hpu_kernel(op_cache[0], *args, **kwargs)
    return kernel


def install() -> None:
    global _lib
    if _lib is None:
        _lib = torch.library.Library("torchvision", "IMPL")
        for name, fn in (("nms", _nms), ("roi_align", _roi_align), ("_roi_align_backward", _roi_align_backward)):
            _lib.impl(name, _kernel(name, fn), "HPU")


install()
