"""EmbeddingBag on hpu: aten::_embedding_bag (and _forward_only), its backward and the
per-sample-weights backward on the Go kernel (kernels/embedding_bag.go), and the bridge's
host-side and device helpers behind hpex `EmbeddingBag` / `EmbeddingBagPreproc`
(`habana_frameworks.torch._hpex_C.embedding_bag_sum_fwd/_bwd`, `embedding_bag_preproc`).

The auxiliary outputs follow torch's CPU kernel, so a backward can consume them whichever
side produced the forward: offset2bag is empty for sum without padding_idx, bag_size
counts a bag's non-padding indices for mean and max (0 for sum), max_indices is [B, D] in
max mode and a copy of bag_size otherwise. The backwards find each position's bag from
the offsets themselves.
"""
from __future__ import annotations

import torch

from .. import _native
from .registry import NotNative, native

_ROWS = (torch.float32, torch.bfloat16)
_INDEX = (torch.int32, torch.int64)
_SUM, _MEAN, _MAX = 0, 1, 2


def _hpu(*ts) -> bool:
    return all(t is None or t.device.type == "hpu" for t in ts)


def _torch_error(e: _native.NativeError) -> RuntimeError:
    """The Go kernel's message without its op prefix (the text torch's CPU kernel uses)."""
    msg = str(e)
    for head in ("embedding_bag: Expected", "offsets[", "embedding_bag"):
        i = msg.find(head)
        if i >= 0:
            return RuntimeError(msg[i:])
    return RuntimeError(msg)


def _run(name, tensors, ints):
    try:
        _native.run(name, tensors, ints)
    except _native.NativeError as e:
        raise _torch_error(e) from None


def _check_forward(weight, indices, offsets, mode, per_sample_weights):
    """Hand anything the kernel does not take (or torch rejects with its own message) to
    the CPU path."""
    if not _hpu(weight, indices, offsets, per_sample_weights):
        raise NotNative
    if weight.dim() != 2 or weight.dtype not in _ROWS or indices.dim() != 1 or offsets.dim() != 1:
        raise NotNative
    if indices.dtype not in _INDEX or offsets.dtype not in _INDEX or mode not in (_SUM, _MEAN, _MAX):
        raise NotNative
    if per_sample_weights is not None and (mode != _SUM or per_sample_weights.dtype != weight.dtype
                                           or per_sample_weights.shape != indices.shape):
        raise NotNative


def embedding_bag_forward(weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx):
    """-> (output, offset2bag, bag_size, max_indices) in torch's CPU layouts."""
    B = offsets.shape[0] - (1 if include_last_offset else 0)
    if B < 0:
        raise NotNative
    D, n, dev = weight.shape[1], indices.shape[0], weight.device
    out = torch.empty((B, D), dtype=weight.dtype, device=dev)
    bag_size = torch.empty((B,), dtype=torch.int64, device=dev)
    max_indices = torch.empty((B, D) if mode == _MAX else (B,), dtype=torch.int64, device=dev)
    with_o2b = not (mode == _SUM and padding_idx < 0)
    offset2bag = torch.empty((n if with_o2b else 0,), dtype=torch.int64, device=dev)
    if B == 0:
        return out, offset2bag, bag_size, max_indices
    ts = [out, bag_size, max_indices]
    if with_o2b:
        ts.append(offset2bag)
    ts += [weight, indices, offsets]
    if per_sample_weights is not None:
        ts.append(per_sample_weights)
    _run("embedding_bag_fwd", ts, (mode, int(padding_idx), int(bool(include_last_offset)), 1, int(with_o2b),
                                   int(per_sample_weights is not None)))
    return out, offset2bag, bag_size, max_indices


@native("aten::_embedding_bag", "aten::_embedding_bag_forward_only")
def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    _check_forward(weight, indices, offsets, mode, per_sample_weights)
    return embedding_bag_forward(weight, indices, offsets, mode, per_sample_weights, include_last_offset,
                                 padding_idx)


def embedding_bag_backward(grad, indices, offsets, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode,
                           per_sample_weights, padding_idx):
    """The dense gradient of the weight, [num_weights, D] in grad's dtype."""
    D = grad.shape[-1]
    gw = torch.empty((num_weights, D), dtype=grad.dtype, device=grad.device)
    if gw.numel() == 0:
        return gw
    if grad.shape[0] == 0 or indices.numel() == 0:
        return gw.zero_()
    ts = [gw, grad, indices, offsets, bag_size.to(torch.int64).contiguous()]
    if mode == _MAX:
        ts.append(maximum_indices.to(torch.int64).contiguous())
    if per_sample_weights is not None:
        ts.append(per_sample_weights)
    _run("embedding_bag_bwd", ts, (mode, int(padding_idx), int(bool(scale_grad_by_freq)),
                                   int(per_sample_weights is not None)))
    return gw


@native("aten::_embedding_bag_backward")
def _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
                            scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx=-1):
    if sparse:
        # A sparse COO gradient would need a SparseHPU tensor, which hpu tensors here are not.
        raise NotImplementedError("embedding_bag: sparse=True builds a sparse gradient, and sparse tensors are "
                                  "not supported on hpu; use sparse=False")
    if not _hpu(grad, indices, offsets, bag_size, maximum_indices, per_sample_weights):
        raise NotNative
    if grad.dim() != 2 or grad.dtype not in _ROWS or indices.dim() != 1 or offsets.dim() != 1:
        raise NotNative
    if indices.dtype not in _INDEX or offsets.dtype not in _INDEX or mode not in (_SUM, _MEAN, _MAX):
        raise NotNative
    if per_sample_weights is not None and per_sample_weights.dtype != grad.dtype:
        raise NotNative
    return embedding_bag_backward(grad.contiguous() if grad.stride(-1) != 1 else grad, indices, offsets, bag_size,
                                  maximum_indices, int(num_weights), scale_grad_by_freq, mode, per_sample_weights,
                                  padding_idx)


@native("aten::_embedding_bag_per_sample_weights_backward")
def _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
    if mode != _SUM:
        raise NotNative  # torch's message: per_sample_weights only for mode='sum'
    if not _hpu(grad, weight, indices, offsets) or grad.dim() != 2 or weight.dim() != 2:
        raise NotNative
    if grad.dtype not in _ROWS or weight.dtype != grad.dtype or indices.dtype not in _INDEX \
            or offsets.dtype not in _INDEX or indices.dim() != 1 or offsets.dim() != 1:
        raise NotNative
    out = torch.empty((indices.shape[0],), dtype=grad.dtype, device=grad.device)
    if out.numel() == 0:
        return out
    if grad.shape[0] == 0:
        return out.zero_()
    _run("embedding_bag_psw_bwd", [out, grad, weight, indices, offsets], (int(padding_idx),))
    return out


# ------------------------------------------------------ the bridge's DLRM helpers (_hpex_C)

def embedding_bag_sum_fwd(input, indices, offsets, valid_count, kernel_mode):
    """Bags of `input` rows summed: out[b] = sum of input[indices[j]] for j in
    [offsets[b], offsets[b+1]); offsets has one entry more than there are bags. kernel_mode
    0: valid_count[0] is the number of valid indices; 1 and 2: valid_count[0] is the number
    of valid offsets (bags past them are zero). Float32 or bfloat16 rows."""
    if input.dim() != 2 or input.dtype not in _ROWS:
        raise RuntimeError(f"embedding_bag_sum_fwd: input must be a 2-D float32 or bfloat16 tensor, got "
                           f"{input.dtype} {tuple(input.shape)}")
    for name, t in (("indices", indices), ("offsets", offsets), ("valid_count", valid_count)):
        if t.dim() != 1 or t.dtype not in _INDEX:
            raise RuntimeError(f"embedding_bag_sum_fwd: {name} must be a 1-D int32 or int64 tensor")
    if offsets.shape[0] < 1:
        raise RuntimeError("embedding_bag_sum_fwd: offsets must hold at least one entry")
    dev = input.device
    out = torch.empty((offsets.shape[0] - 1, input.shape[1]), dtype=input.dtype, device=dev)
    if out.numel():
        _run("embedding_bag_sum", [out, input, indices.to(dev), offsets.to(dev), valid_count.to(dev)],
             (int(kernel_mode),))
    return out


def embedding_bag_sum_bwd(out, input, indices_bwd, offsets_bwd, valid_count_bwd, kernel_mode):
    """The coalesced weight gradient: out[u] = sum of input[indices_bwd[j]] (input = the
    output gradient, indices_bwd = embedding_bag_preproc's output_rows) for j in
    [offsets_bwd[u], offsets_bwd[u+1]) over the valid_count_bwd[0] - 1 unique indices;
    the rest of `out` is zeroed (kernel_mode and valid_count_bwd as for the forward; the
    bridge's DLRM passes mode 1 with [unique count + 1, len(indices_bwd)]). Written into
    `out`, which is returned."""
    if out.dim() != 2 or input.dim() != 2 or out.shape[1] != input.shape[1]:
        raise RuntimeError(f"embedding_bag_sum_bwd: out {tuple(out.shape)} and input {tuple(input.shape)} must be "
                           f"2-D with the same row width")
    rows = offsets_bwd.shape[0] - 1
    if rows < 0:
        raise RuntimeError("embedding_bag_sum_bwd: offsets must hold at least one entry")
    dev = out.device
    target = out.narrow(0, 0, min(rows, out.shape[0]))
    if target.numel():
        _run("embedding_bag_sum", [target, input.to(out.dtype) if input.dtype != out.dtype else input,
                                   indices_bwd.to(dev), offsets_bwd.narrow(0, 0, target.shape[0] + 1).to(dev),
                                   valid_count_bwd.to(dev)], (int(kernel_mode),))
    if out.shape[0] > rows:
        out.narrow(0, max(rows, 0), out.shape[0] - max(rows, 0)).zero_()
    return out


def embedding_bag_preproc(indices, offsets, embeddingTableLen: int):
    """Host-side coalescing for the backward (int32, CPU, as the bridge's C++ helper):
    -> (count_unique [1], unique_indexes [n], output_rows [n], output_row_offsets [n+1]).
    unique_indexes[:count] are the distinct indices, ascending; output_rows lists, index by
    index, the bag (output row) of every position holding it, in position order, and
    output_row_offsets[u]:output_row_offsets[u+1] is unique index u's stretch of it. Entries
    past the counts are 0. offsets holds one entry per bag plus the end; embeddingTableLen
    is accepted as the bridge does (its DLRM passes a placeholder) and not used."""
    idx = indices.to("cpu", torch.int64).reshape(-1)
    off = offsets.to("cpu", torch.int64).reshape(-1)
    n = idx.numel()
    if off.numel() and (int(off[0]) != 0 or int(off[-1]) > n or bool((off[1:] < off[:-1]).any())):
        raise RuntimeError(f"embedding_bag_preproc: offsets must start at 0, not decrease and end at most at {n}")
    if off.numel():
        idx = idx[:int(off[-1])]  # positions past the last bag's end belong to no bag
    pos = torch.arange(idx.numel(), dtype=torch.int64)
    bag = torch.searchsorted(off, pos, right=True) - 1
    order = torch.sort(idx, stable=True).indices
    uniq, counts = torch.unique_consecutive(idx[order], return_counts=True)
    count = uniq.numel()
    unique_indexes = torch.zeros(n, dtype=torch.int32)
    output_rows = torch.zeros(n, dtype=torch.int32)
    output_row_offsets = torch.zeros(n + 1, dtype=torch.int32)
    unique_indexes[:count] = uniq.to(torch.int32)
    output_rows[:idx.numel()] = bag[order].to(torch.int32)
    output_row_offsets[1:count + 1] = torch.cumsum(counts, 0).to(torch.int32)
    return torch.tensor([count], dtype=torch.int32), unique_indexes, output_rows, output_row_offsets


# ------------------------------------------------- torch.ops.hpu ops behind the helpers

_lib = torch.library.Library("hpu", "FRAGMENT")
_lib.define("embedding_bag_sum(Tensor input, Tensor indices, Tensor offsets, Tensor valid_count, int kernel_mode) "
            "-> Tensor")
_lib.define("embedding_bag_sum_bwd_out(Tensor(a!) out, Tensor input, Tensor indices_bwd, Tensor offsets_bwd, "
            "Tensor valid_count_bwd, int kernel_mode) -> Tensor(a!)")
_lib.impl("embedding_bag_sum", embedding_bag_sum_fwd, "HPU")
_lib.impl("embedding_bag_sum_bwd_out", embedding_bag_sum_bwd, "HPU")


@torch.library.register_fake("hpu::embedding_bag_sum")
def _sum_fake(input, indices, offsets, valid_count, kernel_mode):
    return input.new_empty((offsets.shape[0] - 1, input.shape[1]))


@torch.library.register_fake("hpu::embedding_bag_sum_bwd_out")
def _sum_bwd_fake(out, input, indices_bwd, offsets_bwd, valid_count_bwd, kernel_mode):
    return out
