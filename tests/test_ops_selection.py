"""Selections, statistics, searches, counting, sampling and index generation on hpu
(_ops/selection_ops.py, kernels/selection.go, kernels/counting.go) against torch's CPU
kernels: values and indices bit-equal (ties, NaN, non-contiguous and zero-size inputs),
errors of the same type, and no CPU fallback. Runs in eager and lazy mode.
"""
from __future__ import annotations

import habana_frameworks.torch  # noqa: F401
import pytest
import torch

from habana_frameworks.torch._ops import fallback

HPU = "hpu"


def _native_only(fn):
    """Run fn and assert it did not use the CPU fallback."""
    before = dict(fallback.counts())
    out = fn()
    after = fallback.counts()
    grew = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    assert not grew, f"CPU fallback: {grew}"
    return out


def _same(cpu, hpu):
    if isinstance(cpu, (tuple, list)):
        assert len(cpu) == len(hpu)
        for c, h in zip(cpu, hpu):
            _same(c, h)
        return
    h = hpu.cpu()
    assert h.dtype == cpu.dtype and h.shape == cpu.shape, (h.dtype, cpu.dtype, h.shape, cpu.shape)
    torch.testing.assert_close(h, cpu, rtol=0, atol=0, equal_nan=True)


def _check(op, *args, **kwargs):
    """op on CPU tensors and on their hpu copies: equal results, natively."""
    cpu = op(*args, **kwargs)
    def to(v):
        if isinstance(v, torch.Tensor):
            return v.to(HPU)
        return [to(x) for x in v] if isinstance(v, list) else v
    hpu = _native_only(lambda: op(*[to(a) for a in args], **{k: to(v) for k, v in kwargs.items()}))
    _same(cpu, hpu)
    return cpu, hpu


def _ties(shape, dtype, lo=-3, hi=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def _rand(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


DTYPES = [torch.float32, torch.bfloat16, torch.int64]


# ------------------------------------------------------------------ median / kthvalue / mode

@pytest.mark.parametrize("dtype", DTYPES)
def test_median_nanmedian_ties_and_nan(dtype):
    x = _ties((5, 7, 6), dtype)
    if dtype.is_floating_point:
        x[1, 2, 3] = float("nan")
        x[2, :, 0] = float("nan")
    for fn in (torch.median, torch.nanmedian):
        _check(fn, x)
        for d in (0, 1, -1):
            for keep in (False, True):
                _check(fn, x, d, keep)
        _check(fn, x.transpose(0, 2), 1)  # non-contiguous
        _check(fn, x[:, ::2], 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kthvalue_ties(dtype):
    x = _ties((4, 9, 33), dtype)
    if dtype.is_floating_point:
        x[0, 1, ::3] = float("nan")
    for k in (1, 2, 5, 9):
        _check(torch.kthvalue, x, k, 1)
    for k in (1, 7, 17, 33):
        _check(torch.kthvalue, x, k, -1, True)
    _check(torch.kthvalue, x.permute(2, 0, 1), 3, 0)
    _check(torch.kthvalue, torch.tensor(2.5).to(dtype), 1)


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_mode_ties(dtype):
    x = _ties((6, 40), dtype, -4, 4) if dtype != torch.bool else _ties((6, 40), torch.int64, 0, 2).bool()
    _check(torch.mode, x)
    _check(torch.mode, x, 0, True)
    _check(torch.mode, x.t(), 1)
    _check(torch.mode, x[0, 0])


def test_selection_errors_match_cpu():
    x = torch.empty(3, 0)
    for fn, args in ((torch.median, (1,)), (torch.kthvalue, (1, 1)), (torch.mode, (1,)), (torch.nanmedian, (1,))):
        with pytest.raises(Exception) as ce:
            fn(x, *args)
        with pytest.raises(type(ce.value)):
            fn(x.to(HPU), *args)
    with pytest.raises(RuntimeError):
        torch.kthvalue(torch.ones(3, device=HPU), 4)


def test_median_backward():
    x = _ties((4, 6), torch.float32).requires_grad_()
    xh = x.detach().to(HPU).requires_grad_()
    for f in (lambda t: t.median(1)[0].sum(), lambda t: t.median(), lambda t: t.kthvalue(2, 0)[0].sum(),
              lambda t: t.nanmedian(0)[0].sum(), lambda t: t.mode(1)[0].sum()):
        g, = torch.autograd.grad(f(x), x)
        gh, = _native_only(lambda: torch.autograd.grad(f(xh), xh))
        _same(g, gh)


# ------------------------------------------------------------------ searchsorted / bucketize

@pytest.mark.parametrize("dtype", DTYPES)
def test_searchsorted_bucketize(dtype):
    seq = _ties((3, 12), dtype, -5, 5).sort(-1).values
    vals = _ties((3, 7), dtype, -6, 6, seed=1)
    if dtype.is_floating_point:
        vals[0, 0] = float("nan")
    for kw in ({}, {"right": True}, {"side": "right"}, {"side": "left"}, {"out_int32": True}):
        _check(torch.searchsorted, seq, vals, **kw)
        _check(torch.searchsorted, seq[0], vals, **kw)
        _check(torch.bucketize, vals, seq[0], **{k: v for k, v in kw.items() if k != "side"})
    _check(torch.bucketize, vals.t(), seq[1])  # non-contiguous
    _check(torch.searchsorted, seq[0], 2)  # scalar
    unsorted = _ties((2, 9), dtype, -5, 5, seed=2)
    sorter = unsorted.argsort(dim=-1, stable=True)
    _check(torch.searchsorted, unsorted, vals[:2], sorter=sorter)
    _check(torch.searchsorted, torch.empty(0, dtype=dtype), vals)
    _check(torch.bucketize, torch.tensor(1, dtype=dtype), seq[0])


def test_searchsorted_mixed_dtypes_and_errors():
    seq = torch.tensor([0.5, 1.5, 2.5, 9.0])
    _check(torch.searchsorted, seq, torch.tensor([0, 1, 2, 3, 10]))
    with pytest.raises(RuntimeError):
        torch.searchsorted(seq.to(HPU).view(2, 2), torch.ones(3, 3, device=HPU))
    with pytest.raises(RuntimeError):
        torch.bucketize(torch.ones(2, device=HPU), torch.ones(2, 2, device=HPU))


# --------------------------------------------------------------------------- logspace

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_logspace(dtype):
    for start, end, steps, base in ((-3, 0, 10, 10.0), (-3, 1, 7, 2.0), (0, 3, 4, 3.0), (-2.5, 2.5, 50, 1.1),
                                    (1, 1, 1, 5.0), (2, -2, 9, 10.0), (0, 8, 9, 2.0), (-3, 0, 0, 10.0)):
        _check(lambda **kw: torch.logspace(start, end, steps, base, dtype=dtype, **kw))
        dev = lambda: torch.logspace(start, end, steps, base, dtype=dtype, device=HPU)  # noqa: E731
        torch.testing.assert_close(_native_only(dev).cpu(), torch.logspace(start, end, steps, base, dtype=dtype),
                                   rtol=0, atol=0)
    t = torch.tensor(-1.5)
    _check(lambda: torch.logspace(t if False else -1.5, 2, 5, dtype=dtype))
    h = _native_only(lambda: torch.logspace(t.to(HPU), torch.tensor(2.0, device=HPU), 5, dtype=dtype, device=HPU))
    _same(torch.logspace(t, torch.tensor(2.0), 5, dtype=dtype), h)


# ------------------------------------------------------------------ unique

@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_unique_and_consecutive(dtype):
    x = _ties((4, 9), torch.int64, -3, 3).to(dtype)
    if dtype.is_floating_point:
        x[1, 1] = x[2, 5] = float("nan")
    for inv in (False, True):
        for cnt in (False, True):
            _check(torch.unique, x, sorted=True, return_inverse=inv, return_counts=cnt)
            _check(torch.unique, x.t(), sorted=False, return_inverse=inv, return_counts=cnt)
            _check(torch.unique_consecutive, x, return_inverse=inv, return_counts=cnt)
            _check(torch.unique_consecutive, x[:, ::2], return_inverse=inv, return_counts=cnt)
    _check(torch.unique, torch.empty(0, 3, dtype=dtype), return_inverse=True, return_counts=True)
    _check(torch.unique_consecutive, torch.tensor(1).to(dtype), return_inverse=True, return_counts=True)


# ---------------------------------------------------------------------- histograms

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_histc(dtype):
    x = (_rand((300,), seed=3) * 4).to(dtype)
    for bins, lo, hi in ((100, 0, 0), (1, 0, 0), (7, -1, 1), (10, 0, 10), (13, -10, 0), (5, 2, 2)):
        _check(torch.histc, x, bins, lo, hi)
    _check(torch.histc, x.view(20, 15).t(), 9)
    _check(torch.histc, torch.empty(0, dtype=dtype), 4)
    _check(torch.histc, torch.full((5,), 3.0, dtype=dtype), 4)
    with pytest.raises(RuntimeError):
        torch.histc(x.to(HPU), 4, 1, 0)
    with pytest.raises(RuntimeError):
        torch.histc(torch.tensor([1.0, float("inf")], device=HPU), 4)


def test_histogram_and_histogramdd():
    x = _rand((50,), seed=4)
    w = _rand((50,), seed=5).abs()
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.1, 1.0, 3.0])
    for density in (False, True):
        for weight in (None, w):
            _check(torch.histogram, x, 8, weight=weight, density=density)
            _check(torch.histogram, x, 5, range=(-1.0, 1.0), weight=weight, density=density)
            _check(torch.histogram, x, edges, weight=weight, density=density)
    x2 = _rand((40, 3), seed=6)
    w2 = _rand((40,), seed=7).abs()
    for density in (False, True):
        for weight in (None, w2):
            _check(torch.histogramdd, x2, [2, 3, 4], weight=weight, density=density)
            _check(torch.histogramdd, x2, 3, range=[-1.0, 1.0] * 3, weight=weight, density=density)
            _check(torch.histogramdd, x2, [edges, edges[1:], edges[:-1]], weight=weight, density=density)


# --------------------------------------------------------------------- bincount / indices

def test_bincount():
    x = _ties((30,), torch.int64, 0, 9)
    w = _rand((30,), seed=8)
    _check(torch.bincount, x)
    _check(torch.bincount, x, minlength=15)
    _check(torch.bincount, x, w)
    _check(torch.bincount, x[::2], w[::2], 3)
    _check(torch.bincount, torch.empty(0, dtype=torch.int64), minlength=4)
    for bad in (torch.tensor([1, -1]), torch.ones(2, 2, dtype=torch.int64), torch.ones(3)):
        with pytest.raises(RuntimeError):
            torch.bincount(bad.to(HPU))


def test_tril_triu_indices():
    for fn in (torch.tril_indices, torch.triu_indices):
        for args in ((0, 0), (4, 4), (3, 5, 1), (5, 3, -2), (20, 21, 7), (20, 21, -7), (1, 6, 9), (6, 2, -9)):
            cpu = fn(*args)
            _same(cpu, _native_only(lambda: fn(*args, device=HPU)))
            _same(fn(*args, dtype=torch.int32), _native_only(lambda: fn(*args, dtype=torch.int32, device=HPU)))
        with pytest.raises(RuntimeError):
            fn(-1, 3, device=HPU)


def test_repeat_interleave():
    r = torch.tensor([2, 0, 3, 1])
    _check(torch.repeat_interleave, r)
    _check(torch.repeat_interleave, r.int())
    x = _rand((4, 3))
    _check(lambda a, b: a.repeat_interleave(b, dim=0), x, r)
    _check(torch.repeat_interleave, torch.empty(0, dtype=torch.int64))
    with pytest.raises(RuntimeError):
        torch.repeat_interleave(torch.tensor([1, -1], device=HPU)).cpu()


# ------------------------------------------------------------------------- multinomial

def test_multinomial_statistics_and_reproducibility():
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]])
    ph = p.to(HPU)
    torch.hpu.manual_seed(123)
    a = _native_only(lambda: torch.multinomial(ph, 20000, replacement=True))
    torch.hpu.manual_seed(123)
    b = torch.multinomial(ph, 20000, replacement=True)
    assert a.dtype == torch.int64 and a.shape == (2, 20000)
    _same(a.cpu(), b)
    freq = torch.stack([torch.bincount(r, minlength=4) for r in a.cpu()]).float() / 20000
    torch.testing.assert_close(freq, p / p.sum(1, keepdim=True), atol=0.015, rtol=0)
    # without replacement: distinct categories, never a zero-weight one while others remain
    s = _native_only(lambda: torch.multinomial(ph, 3))
    for row, probs in zip(s.cpu(), p):
        assert len(set(row.tolist())) == 3
        assert all(probs[c] > 0 for c in row.tolist())
    first = torch.stack([torch.multinomial(ph[0], 1) for _ in range(3000)]).cpu().view(-1)
    torch.testing.assert_close(torch.bincount(first, minlength=4).float() / 3000, p[0], atol=0.03, rtol=0)
    assert _native_only(lambda: torch.multinomial(ph[1].bfloat16(), 2)).shape == (2,)


def test_multinomial_errors():
    for args, kw in (((torch.ones(2, 2, 2), 1), {}), ((torch.ones(3), 4), {}), ((torch.ones(3), 0), {}),
                     ((torch.ones(3, dtype=torch.int64), 1), {})):
        with pytest.raises(RuntimeError):
            torch.multinomial(*args, **kw)
        with pytest.raises(RuntimeError):
            torch.multinomial(args[0].to(HPU), *args[1:], **kw)
    for bad in ([1.0, -1.0], [0.0, 0.0], [1.0, float("inf")]):
        with pytest.raises(RuntimeError):
            torch.multinomial(torch.tensor(bad, device=HPU), 1, True).cpu()


def test_bincount_integer_weights_count_in_float64():
    x = _ties((12,), torch.int64, 0, 5)
    _check(torch.bincount, x, x + 1)


def test_roll_errors_and_bernoulli_out_native():
    x = _rand((5, 5))
    for args in (((),), ((2, 1), 0), (0, 2)):
        with pytest.raises(Exception) as ce:
            torch.roll(x[0] if args == (0, 2) else x, *args)
        with pytest.raises(type(ce.value)):
            _native_only(lambda: torch.roll((x[0] if args == (0, 2) else x).to(HPU), *args))
    with pytest.raises(IndexError):
        _native_only(lambda: torch.roll(torch.tensor(1.0, device=HPU), 0, 0))
    _check(torch.roll, x, (1, -2), (0, 1))
    p = torch.full((4, 3), 0.5, device=HPU)
    out = torch.empty(4, 3, device=HPU)
    _native_only(lambda: torch.bernoulli(p, out=out))
    assert set(out.cpu().unique().tolist()) <= {0.0, 1.0}
    with pytest.raises(RuntimeError, match="unsupported operation"):
        _native_only(lambda: torch.bernoulli(p[0], out=torch.empty(1, device=HPU).expand(3)))
