"""torchvision's detection ops on hpu (kernels/roi_ops.go), which Gaudi runs on the device:
torchvision::nms (and so batched_nms and every detector's post-processing), roi_align with
its backward (MultiScaleRoIAlign in Faster/Mask/Keypoint R-CNN), roi_pool, ps_roi_pool and
ps_roi_align with their backwards (kernels/roi_pool_ops.go), deform_conv2d and its backward
(the deformable sampling in kernels/deform_conv.go, the GEMMs as hpu matmuls).

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


def _pool_ok(input: torch.Tensor, rois: torch.Tensor, pooled_height: int, pooled_width: int) -> bool:
    return (input.dim() == 4 and rois.dim() == 2 and rois.shape[1] == 5 and input.dtype in _FLOATS
            and rois.dtype == input.dtype and pooled_height > 0 and pooled_width > 0)


def _pool_forward(kernel: str, input: torch.Tensor, rois: torch.Tensor, channels_out: int, attrs: list[int],
                  spatial_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    shape = (rois.shape[0], channels_out, attrs[0], attrs[1])
    out = torch.zeros(shape, dtype=input.dtype, device=input.device)
    index = torch.zeros(shape, dtype=torch.int32, device=input.device)
    if out.numel():
        _native.run(kernel, [out, index, input, rois], attrs, [float(spatial_scale)])
    return out, index


def _pool_backward(kernel: str, grad: torch.Tensor, rois: torch.Tensor, index: torch.Tensor, attrs: list[int],
                   spatial_scale: float, shape: tuple[int, int, int, int], channels_out: int) -> torch.Tensor:
    if (grad.dim() != 4 or rois.dim() != 2 or rois.shape[1] != 5 or grad.dtype not in _FLOATS
            or rois.dtype != grad.dtype or index.dtype != torch.int32
            or tuple(grad.shape) != (rois.shape[0], channels_out, attrs[0], attrs[1])
            or tuple(index.shape) != tuple(grad.shape)):
        raise NotNative
    gin = torch.zeros(tuple(int(v) for v in shape), dtype=grad.dtype, device=grad.device)
    if gin.numel() and grad.numel():
        _native.run(kernel, [gin, grad, index, rois], attrs, [float(spatial_scale)])
    return gin


def _ps_channels(channels: int, pooled_height: int, pooled_width: int) -> int:
    if pooled_height <= 0 or pooled_width <= 0 or channels % (pooled_height * pooled_width):
        raise NotNative  # the CPU kernel raises its own message
    return channels // (pooled_height * pooled_width)


def _roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
    if not _pool_ok(input, rois, pooled_height, pooled_width):
        raise NotNative
    return _pool_forward("roi_pool", input, rois, input.shape[1], [int(pooled_height), int(pooled_width)],
                         spatial_scale)


def _roi_pool_backward(grad, rois, argmax, spatial_scale, pooled_height, pooled_width, batch_size, channels,
                       height, width):
    return _pool_backward("roi_pool_backward", grad, rois, argmax, [int(pooled_height), int(pooled_width)],
                          spatial_scale, (batch_size, channels, height, width), int(channels))


def _ps_roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
    if not _pool_ok(input, rois, pooled_height, pooled_width):
        raise NotNative
    cout = _ps_channels(input.shape[1], pooled_height, pooled_width)
    return _pool_forward("ps_roi_pool", input, rois, cout, [int(pooled_height), int(pooled_width)], spatial_scale)


def _ps_roi_pool_backward(grad, rois, channel_mapping, spatial_scale, pooled_height, pooled_width, batch_size,
                          channels, height, width):
    cout = _ps_channels(int(channels), pooled_height, pooled_width)
    return _pool_backward("ps_roi_pool_backward", grad, rois, channel_mapping,
                          [int(pooled_height), int(pooled_width)], spatial_scale,
                          (batch_size, channels, height, width), cout)


def _ps_roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio):
    if not _pool_ok(input, rois, pooled_height, pooled_width):
        raise NotNative
    cout = _ps_channels(input.shape[1], pooled_height, pooled_width)
    return _pool_forward("ps_roi_align", input, rois, cout,
                         [int(pooled_height), int(pooled_width), int(sampling_ratio)], spatial_scale)


def _ps_roi_align_backward(grad, rois, channel_mapping, spatial_scale, pooled_height, pooled_width,
                           sampling_ratio, batch_size, channels, height, width):
    cout = _ps_channels(int(channels), pooled_height, pooled_width)
    return _pool_backward("ps_roi_align_backward", grad, rois, channel_mapping,
                          [int(pooled_height), int(pooled_width), int(sampling_ratio)], spatial_scale,
                          (batch_size, channels, height, width), cout)


def _deform_attrs(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups,
                  offset_groups, use_mask) -> tuple[list[int], int, int]:
    """The kernels' attributes and the output size, or NotNative for anything the CPU kernel
    would reject (it raises its own message) or a dtype the kernels do not serve."""
    ints = [int(v) for v in (stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, offset_groups)]
    stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, offset_groups = ints
    ts = [input, weight, offset, bias] + ([mask] if use_mask else [])
    if (input.dim() != 4 or weight.dim() != 4 or offset.dim() != 4 or (use_mask and mask.dim() != 4)
            or input.dtype not in _FLOATS or any(t.dtype != input.dtype for t in ts)
            or min(stride_h, stride_w, dil_h, dil_w, groups, offset_groups) <= 0 or min(pad_h, pad_w) < 0):
        raise NotNative
    b, c, h, w = input.shape
    cout, cpg, kh, kw = weight.shape
    oh = (h + 2 * pad_h - (dil_h * (kh - 1) + 1)) // stride_h + 1
    ow = (w + 2 * pad_w - (dil_w * (kw - 1) + 1)) // stride_w + 1
    k = kh * kw
    if (kh <= 0 or kw <= 0 or cpg * groups != c or cout % groups or c % offset_groups or oh <= 0 or ow <= 0
            or tuple(offset.shape) != (b, 2 * k * offset_groups, oh, ow) or bias.shape != (cout,)
            or (use_mask and tuple(mask.shape) != (b, k * offset_groups, oh, ow))
            or (not use_mask and mask.shape[:1] != (b,))):
        raise NotNative
    attrs = [kh, kw, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, offset_groups, int(bool(use_mask))]
    return attrs, oh, ow


def _deform_columns(input, offset, mask, attrs, oh, ow) -> torch.Tensor:
    b, c = input.shape[:2]
    cols = torch.empty((c * attrs[0] * attrs[1], b * oh * ow), dtype=input.dtype, device=input.device)
    _native.run("deform_im2col", [cols, input, offset, mask], attrs)
    return cols


def _deform_conv2d(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w,
                   groups, offset_groups, use_mask):
    attrs, oh, ow = _deform_attrs(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dilation_h,
                                  dilation_w, groups, offset_groups, use_mask)
    b, cout, g = input.shape[0], weight.shape[0], int(groups)
    out = torch.empty((b, cout, oh, ow), dtype=input.dtype, device=input.device)
    if b == 0:
        return out.zero_()
    cols = _deform_columns(input, offset, mask, attrs, oh, ow)
    # per weight group: [Cout/g, C/g*KH*KW] @ [C/g*KH*KW, B*OH*OW]
    prod = torch.bmm(weight.reshape(g, cout // g, -1), cols.view(g, cols.shape[0] // g, cols.shape[1]))
    torch.add(prod.view(cout, b, oh, ow).permute(1, 0, 2, 3), bias.view(1, cout, 1, 1), out=out)
    return out


def _deform_conv2d_backward(grad, input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w,
                            dilation_h, dilation_w, groups, offset_groups, use_mask):
    attrs, oh, ow = _deform_attrs(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dilation_h,
                                  dilation_w, groups, offset_groups, use_mask)
    b, cout, g = input.shape[0], weight.shape[0], int(groups)
    if tuple(grad.shape) != (b, cout, oh, ow) or grad.dtype != input.dtype:
        raise NotNative
    zeros = lambda t: torch.zeros(t.shape, dtype=t.dtype, device=t.device)  # noqa: E731
    grad_input, grad_offset, grad_mask = zeros(input), zeros(offset), zeros(mask)
    if b == 0:
        return grad_input, zeros(weight), grad_offset, grad_mask, grad.sum((0, 2, 3))
    # [g, Cout/g, B*OH*OW]
    g_out = grad.permute(1, 0, 2, 3).reshape(g, cout // g, b * oh * ow)
    w_g = weight.reshape(g, cout // g, -1)
    grad_cols = torch.bmm(w_g.transpose(1, 2), g_out).reshape(-1, b * oh * ow)
    _native.run("deform_col2im_coord", [grad_offset, grad_mask, grad_cols, input, offset, mask], attrs)
    _native.run("deform_col2im", [grad_input, grad_cols, offset, mask], attrs)
    cols = _deform_columns(input, offset, mask, attrs, oh, ow)
    grad_weight = torch.bmm(g_out, cols.view(g, cols.shape[0] // g, cols.shape[1]).transpose(1, 2))
    return grad_input, grad_weight.reshape(weight.shape), grad_offset, grad_mask, grad.sum((0, 2, 3))


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
        for name, fn in (("nms", _nms), ("roi_align", _roi_align), ("_roi_align_backward", _roi_align_backward),
                         ("roi_pool", _roi_pool), ("_roi_pool_backward", _roi_pool_backward),
                         ("ps_roi_pool", _ps_roi_pool), ("_ps_roi_pool_backward", _ps_roi_pool_backward),
                         ("ps_roi_align", _ps_roi_align), ("_ps_roi_align_backward", _ps_roi_align_backward),
                         ("deform_conv2d", _deform_conv2d),
                         ("_deform_conv2d_backward", _deform_conv2d_backward)):
            _lib.impl(name, _kernel(name, fn), "HPU")


install()
