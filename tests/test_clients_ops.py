"""Ops the clients' models need on the device itself, not as CPU fallbacks: index_copy_
(optimum-habana's static KV caches write each new token with it, also inside HPU-graph
captures, where a fallback is an error) and index_fill (index_copy's backward)."""
import pytest
import torch

import habana_frameworks.torch.core as htcore
from habana_frameworks.torch.hpu import metrics


def _fallbacks() -> dict:
    return dict(metrics.metric_global("cpu_fallback").stats())["FallbackOps"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_copy_and_fill_match_cpu(dtype, dim):
    g = torch.Generator().manual_seed(dim + 5)
    x = (torch.randn(3, 4, 5, generator=g) * 10).to(dtype)
    idx = torch.randperm(x.shape[dim], generator=g)[:2]
    shape = list(x.shape)
    shape[dim] = 2
    src = (torch.randn(shape, generator=g) * 10).to(dtype)
    before = _fallbacks()
    h = x.to("hpu")
    h.index_copy_(dim, idx.to("hpu"), src.to("hpu"))
    filled = torch.index_fill(x.to("hpu"), dim, idx.to("hpu"), 3)
    filled_t = x.to("hpu").index_fill_(dim, idx.to("hpu"), torch.tensor(2, dtype=dtype).to("hpu"))
    htcore.mark_step()
    assert torch.equal(h.cpu(), x.clone().index_copy_(dim, idx, src))
    assert torch.equal(torch.index_copy(x.to("hpu"), dim, idx.to("hpu"), src.to("hpu")).cpu(),
                       torch.index_copy(x, dim, idx, src))
    assert torch.equal(filled.cpu(), torch.index_fill(x, dim, idx, 3))
    assert torch.equal(filled_t.cpu(), x.clone().index_fill_(dim, idx, torch.tensor(2, dtype=dtype)))
    assert _fallbacks() == before


def test_index_copy_into_a_strided_cache_and_backward():
    # The KV-cache shape: [batch, heads, seq, dim] seen through a transpose.
    cache = torch.randn(2, 6, 3, 4).transpose(1, 2)
    tok, new = torch.tensor([4]), torch.randn(2, 3, 1, 4)
    h = cache.to("hpu")
    h.index_copy_(2, tok.to("hpu"), new.to("hpu"))
    htcore.mark_step()
    assert torch.equal(h.cpu(), cache.clone().index_copy_(2, tok, new))

    grads = {}
    for dev in ("cpu", "hpu"):
        a = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).to(dev).requires_grad_()
        s = torch.randn(2, 4, generator=torch.Generator().manual_seed(2)).to(dev).requires_grad_()
        w = torch.arange(12.0).view(3, 4).to(dev)
        (a.index_copy(0, torch.tensor([2, 0]).to(dev), s) * w).sum().backward()
        htcore.mark_step()
        grads[dev] = (a.grad.cpu(), s.grad.cpu())
    assert torch.equal(grads["hpu"][0], grads["cpu"][0]) and torch.equal(grads["hpu"][1], grads["cpu"][1])


def test_index_copy_errors_match_cpu():
    for dev in ("cpu", "hpu"):
        with pytest.raises(RuntimeError, match="self and source expected to have the same dtype"):
            torch.zeros(3, 4, device=dev).index_copy_(0, torch.tensor([1], device=dev),
                                                      torch.ones(1, 4, device=dev, dtype=torch.float64))
        if dev == "hpu" and htcore.is_lazy():
            continue  # lazy mode reports out-of-range indices when the graph runs, as for every index op
        with pytest.raises(IndexError, match=r"^index_copy_\(\): index 5 is out of bounds for dimension 0 with size 3$"):
            torch.zeros(3, 4, device=dev).index_copy_(0, torch.tensor([5], device=dev), torch.ones(1, 4, device=dev))
        with pytest.raises(IndexError, match=r"^index 7 is out of bounds for dimension 0 with size 3$"):
            torch.zeros(3, 4, device=dev).index_fill_(0, torch.tensor([7], device=dev), 1.0)
