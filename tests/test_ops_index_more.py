"""Edge cases of the ops in _ops/reduction_more.py, index_more.py and scan_ops.py against CPU:
non-contiguous and zero-size inputs, ties (cummax), integer products, bad input raising
CPU's exception type, and that each runs natively (no CPU fallback)."""
from __future__ import annotations

import os

import pytest
import torch

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch._ops import fallback


def _same(fn, *args, **kw):
    """fn on CPU and on hpu copies: equal results, and no fallback on the hpu side."""
    cpu = fn(*args, **kw)
    h = [a.to("hpu") if isinstance(a, torch.Tensor) else a for a in args]
    before = dict(fallback.counts())
    out = fn(*h, **kw)
    after = fallback.counts()
    new = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    assert not new, f"fell back: {new}"
    outs = out if isinstance(out, (tuple, list)) else (out,)
    cpus = cpu if isinstance(cpu, (tuple, list)) else (cpu,)
    for c, o in zip(cpus, outs):
        if isinstance(c, torch.Tensor):
            assert o.device.type == "hpu"
            torch.testing.assert_close(o.cpu(), c, equal_nan=True)
        else:
            assert c == o
    return out


def _noncontig(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(0, 1).contiguous().transpose(0, 1)


g = torch.Generator().manual_seed(0)
X = torch.randn(6, 5, generator=g)
I = torch.randint(-4, 5, (6, 5), generator=g)


@pytest.mark.parametrize("x", [X, _noncontig(X), X[:, ::2], I, torch.zeros(0, 3)])
def test_scans(x):
    _same(torch.cumsum, x, 1)
    _same(torch.cumprod, x, 0)
    if x.numel():
        _same(torch.cummax, x, 1)
        _same(torch.cummin, x, 0)
    if x.is_floating_point():
        _same(torch.logcumsumexp, x, 1)


def test_cummax_ties_and_nan_take_the_last_index():
    x = torch.tensor([1.0, 3.0, 3.0, float("nan"), 2.0, float("nan"), 5.0])
    _same(torch.cummax, x, 0)
    _same(torch.cummin, x, 0)
    _same(torch.cummax, torch.tensor([2, 2, 1, 2]), 0)


def test_integer_products_and_bf16():
    _same(torch.prod, I)
    _same(torch.prod, I, 1, keepdim=True)
    _same(torch.prod, I > 0, 0)
    x = (X.abs() + 0.5).bfloat16()
    c, h = torch.prod(x, 1), torch.prod(x.to("hpu"), 1).cpu()
    torch.testing.assert_close(h, c, rtol=2e-2, atol=1e-2)
    _same(torch.mm, I, I.T)
    _same(torch.addmm, I[:, :5], I, I[:5], beta=2, alpha=3)


@pytest.mark.parametrize("x", [X, _noncontig(X), torch.zeros(0, 5)])
def test_reductions(x):
    _same(torch.nansum, torch.where(x > 1, float("nan"), x), 1)
    _same(torch.count_nonzero, torch.where(x > 0, x, 0), 0)
    _same(torch.norm, x, 3, 1)
    if x.numel():
        _same(torch.aminmax, x, dim=0)
        _same(torch.trace, x)
    _same(torch.equal, x, x.clone())


def test_indexing_layouts():
    x = _noncontig(X)
    idx = torch.tensor([[0, -1], [7, 3]])
    _same(torch.take, x, idx)
    _same(lambda a, i, s: a.clone().put_(i, s, accumulate=True), x, idx.flatten(), torch.ones(4))
    mask = X > 0
    _same(lambda a, m, s: a.clone().masked_scatter_(m, s), x, mask, torch.arange(30.0))
    _same(torch.nonzero_static, mask, size=40, fill_value=-7)
    _same(torch.narrow_copy, x, 1, 1, 3)
    _same(lambda a, i, s: a.index_reduce(0, i, s, "amax", include_self=False), x,
          torch.tensor([1, 1, 0]), torch.randn(3, 5, generator=g))
    _same(torch.linalg.cross, torch.randn(4, 3, generator=g), torch.randn(1, 3, generator=g))
    _same(torch.isin, I, torch.tensor([1, 2, -3]))


def test_bad_input_raises_like_cpu():
    h = X.to("hpu")
    # lazy mode finds an out-of-range index when the graph runs (here: the host read)
    lazy = os.environ.get("PT_HPU_LAZY_MODE") == "1"
    with pytest.raises(Exception if lazy else IndexError):
        torch.take(h, torch.tensor([30], device="hpu")).cpu()
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        h.clone().masked_scatter_(torch.ones(6, 5, dtype=torch.uint8, device="hpu"), h)
    with pytest.raises(RuntimeError, match="Number of elements of source"):
        h.clone().masked_scatter_(h > -10, torch.ones(3, device="hpu"))
    with pytest.raises(RuntimeError, match="trace: expected a matrix"):
        torch.trace(h[0])
    with pytest.raises(Exception if lazy else IndexError):
        h.index_reduce(0, torch.tensor([9], device="hpu"), h[:1], "prod").cpu()
    with pytest.raises(RuntimeError, match="floating point"):
        torch.norm(I.to("hpu"))
