"""`torch.ops.hpu.block_softmax` and `torch.ops.hpu.block_softmax_adjustment`: the two fused
halves of vLLM's flat paged attention (vllm-hpu-extension's `pipelined_pa`).

Decode attention is computed per KV-cache block: scores [blocks, ..., block_size] hold one block
of one sequence each, `block_groups[b]` names the sequence (batch row) block b belongs to
(negative ids count from the end of batch_size + 1 rows, where padding blocks go).

block_softmax(scores, bias, groups) -> (exp(scores + bias - block_max), block_max, block_sums):
    each block's softmax numerator against its own maximum, with that maximum and the row sums
    (keepdim on the last axis), all in the scores' dtype.
block_softmax_adjustment(block_max, block_sums, groups, batch_size, out_shape) -> rescale:
    for every block, exp(block_max - group_max) / group_sum, where group_max is the largest
    block maximum of the block's sequence and group_sum the sum over the sequence's blocks of
    block_sums * exp(block_max - group_max) (never below the block's own term). Multiplying a
    block's (numerator @ V) by it and summing the blocks of a sequence gives exact softmax
    attention. The result has `out_shape` and block_max's dtype.

Both are computed in float32 and rounded once.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

_lib = torch.library.Library("hpu", "FRAGMENT")
_lib.define("block_softmax(Tensor data, Tensor? bias, Tensor block_groups) -> (Tensor, Tensor, Tensor)")
_lib.define("block_softmax_adjustment(Tensor block_max, Tensor block_sums, Tensor block_groups, int batch_size, "
            "int[]? out_shape=None) -> Tensor")


def block_softmax(data: torch.Tensor, bias: Optional[torch.Tensor], block_groups: torch.Tensor):
    if data.dim() < 2:
        raise RuntimeError(f"block_softmax: scores must be at least 2-D [blocks, ..., block_size], got {data.dim()}-D")
    if block_groups.dim() != 1 or block_groups.shape[0] != data.shape[0]:
        raise RuntimeError(f"block_softmax: block_groups must be 1-D with one entry per block ({data.shape[0]}), "
                           f"got {tuple(block_groups.shape)}")
    x = data.float()
    if bias is not None:
        x = x + bias.float()
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e.to(data.dtype), m.to(data.dtype), e.sum(dim=-1, keepdim=True).to(data.dtype)


def block_softmax_adjustment(block_max: torch.Tensor, block_sums: torch.Tensor, block_groups: torch.Tensor,
                             batch_size: int, out_shape: Optional[Sequence[int]] = None) -> torch.Tensor:
    if block_max.shape != block_sums.shape:
        raise RuntimeError(f"block_softmax_adjustment: block_max {tuple(block_max.shape)} and block_sums "
                           f"{tuple(block_sums.shape)} must have the same shape")
    blocks = block_max.shape[0]
    if block_groups.dim() != 1 or block_groups.shape[0] != blocks:
        raise RuntimeError(f"block_softmax_adjustment: block_groups must be 1-D with one entry per block ({blocks}), "
                           f"got {tuple(block_groups.shape)}")
    rows = batch_size + 1  # the last row gathers padding blocks
    groups = block_groups.long()
    groups = torch.where(groups < 0, groups + rows, groups)
    bm = block_max.float().reshape(blocks, -1)
    bs = block_sums.float().reshape(blocks, -1)
    group_max = torch.full((rows, bm.shape[1]), float("-inf"), dtype=torch.float32, device=bm.device)
    group_max = group_max.scatter_reduce(0, groups[:, None].expand_as(bm), bm, "amax")
    adj = torch.exp(bm - group_max.index_select(0, groups))
    term = bs * adj
    group_sum = torch.zeros((rows, bm.shape[1]), dtype=torch.float32, device=bm.device).index_add(0, groups, term)
    rescale = adj / torch.maximum(group_sum.index_select(0, groups), term)
    shape = tuple(out_shape) if out_shape is not None else tuple(block_max.shape)
    return rescale.reshape(shape).to(block_max.dtype)


for _key in ("HPU", "CPU"):
    _lib.impl("block_softmax", block_softmax, _key)
    _lib.impl("block_softmax_adjustment", block_softmax_adjustment, _key)


@torch.library.register_fake("hpu::block_softmax")
def _block_softmax_fake(data, bias, block_groups):
    stat = (*data.shape[:-1], 1)
    return data.new_empty(data.shape), data.new_empty(stat), data.new_empty(stat)


@torch.library.register_fake("hpu::block_softmax_adjustment")
def _block_softmax_adjustment_fake(block_max, block_sums, block_groups, batch_size, out_shape=None):
    shape = tuple(out_shape) if out_shape is not None else tuple(block_max.shape)
    return block_max.new_empty(shape)
