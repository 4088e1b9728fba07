"""The ops of _ops/margin_loss_ops.py, rrelu_ops.py and range_factories.py, and the error paths
of batch_norm, amax/amin, gelu, masked_fill and roll, against CPU: forward and backward,
non-contiguous and zero-size inputs, bad input raising CPU's exception type and message, and
that each runs natively (no CPU fallback). Runs in eager and lazy mode."""
from __future__ import annotations

import contextlib
import os

import pytest
import torch
import torch.nn.functional as F

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch._ops import fallback


@contextlib.contextmanager
def _native_only():
    before = dict(fallback.counts())
    yield
    after = fallback.counts()
    new = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    assert not new, f"fell back: {new}"


def _hpu(v):
    return v.detach().to("hpu").requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v


def _same(fn, *args, grad=False, **kw):
    """fn on CPU and on hpu copies: equal results (and input gradients), no fallback."""
    cargs = [a.detach().clone().requires_grad_(grad and a.is_floating_point()) if isinstance(a, torch.Tensor)
             else a for a in args]
    hargs = [_hpu(a) for a in cargs]
    cpu = fn(*cargs, **kw)
    with _native_only():
        out = fn(*hargs, **{k: _hpu(v) for k, v in kw.items()})
        cpus = cpu if isinstance(cpu, (tuple, list)) else (cpu,)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for c, o in zip(cpus, outs):
            assert o.device.type == "hpu"
            torch.testing.assert_close(o.detach().cpu(), c.detach(), equal_nan=True)
        if grad:
            g = torch.randn(cpus[0].shape, generator=torch.Generator().manual_seed(1))
            leaves = [(c, h) for c, h in zip(cargs, hargs) if isinstance(c, torch.Tensor) and c.requires_grad]
            gc = torch.autograd.grad(cpus[0], [c for c, _ in leaves], g)
            gh = torch.autograd.grad(outs[0], [h for _, h in leaves], g.to("hpu"))
            for a, b in zip(gc, gh):
                torch.testing.assert_close(b.cpu(), a)
    return out


def _raises_like(fn, *args, **kw):
    """fn raises on CPU; the hpu copy raises the same type and message, natively."""
    with pytest.raises(Exception) as ce:
        fn(*args, **kw)
    with _native_only(), pytest.raises(type(ce.value)) as he:
        r = fn(*[_hpu(a) for a in args], **{k: _hpu(v) for k, v in kw.items()})
        if isinstance(r, torch.Tensor):
            r.cpu()  # lazy mode: a data-dependent error surfaces at the read
    assert type(he.value) is type(ce.value)
    assert str(ce.value).split("\n")[0] in str(he.value), (str(ce.value), str(he.value))


G = torch.Generator().manual_seed(0)
X = torch.randn(7, 6, generator=G)
Y = torch.randint(0, 6, (7,), generator=G)
W = torch.rand(6, generator=G) + 0.5


# ------------------------------------------------------------------------------ margin losses

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(reduction, p):
    _same(F.multi_margin_loss, X, Y, p=p, margin=0.7, reduction=reduction, grad=True)
    _same(F.multi_margin_loss, X, Y, p=p, weight=W, reduction=reduction, grad=True)
    xt = X.t().contiguous().t()  # non-contiguous input
    _same(F.multi_margin_loss, xt, Y, p=p, reduction=reduction, grad=True)
    _same(F.multi_margin_loss, X[0], Y[:1], p=p, reduction=reduction, grad=True)  # 1-D input


def test_multi_margin_loss_bad_input():
    _raises_like(F.multi_margin_loss, X, torch.tensor([0, 1, 2, 3, 4, 5, 9]))  # target out of range
    _raises_like(F.multi_margin_loss, X, Y[:3])
    _raises_like(F.multi_margin_loss, X, Y.int())
    _raises_like(F.multi_margin_loss, X, Y, p=3)
    _raises_like(F.multi_margin_loss, X, Y, weight=torch.ones(5))
    _raises_like(F.multi_margin_loss, torch.randn(3, 0), Y[:3])


def _ml_target():
    t = torch.full((7, 6), -1, dtype=torch.int64)
    for n in range(7):
        k = n % 4
        t[n, :k] = torch.randperm(6, generator=G)[:k]
    t[2, :3] = torch.tensor([4, 4, 1])  # a repeated target
    t[3, 3] = 2  # after the first -1: ignored
    return t


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(reduction):
    t = _ml_target()
    _same(F.multilabel_margin_loss, X, t, reduction=reduction, grad=True)
    _same(F.multilabel_margin_loss, X.t().contiguous().t(), t, reduction=reduction, grad=True)
    _same(F.multilabel_margin_loss, X[1], t[1], reduction=reduction, grad=True)
    _same(torch.ops.aten.multilabel_margin_loss_forward, X, t, {"none": 0, "mean": 1, "sum": 2}[reduction])


def test_multilabel_margin_loss_bad_input():
    _raises_like(F.multilabel_margin_loss, X, torch.full((7, 6), 6))
    _raises_like(F.multilabel_margin_loss, X, torch.full((7, 6), -2))
    _raises_like(F.multilabel_margin_loss, X, torch.zeros(7, 5, dtype=torch.int64))
    _raises_like(F.multilabel_margin_loss, X, torch.zeros(7, 6, dtype=torch.int32))


# ------------------------------------------------------------------------------------- rrelu

def test_rrelu_training_draws_slopes_from_the_hpu_generator():
    x = torch.randn(64, 9, generator=G).to("hpu").requires_grad_()
    with _native_only():
        torch.hpu.manual_seed(5)
        a = F.rrelu(x, 0.1, 0.3, training=True)
        torch.hpu.manual_seed(5)
        b = F.rrelu(x, 0.1, 0.3, training=True)
        (ga,) = torch.autograd.grad(a, x, torch.ones_like(a))
    xc, ac, gc = x.detach().cpu(), a.detach().cpu(), ga.cpu()
    torch.testing.assert_close(b.detach().cpu(), ac, rtol=0, atol=0)
    pos = xc > 0
    torch.testing.assert_close(ac[pos], xc[pos], rtol=0, atol=0)
    slope = ac[~pos] / xc[~pos]
    assert (slope >= 0.1 - 1e-6).all() and (slope <= 0.3 + 1e-6).all()
    assert slope.std() > 0.02  # drawn per element, not one slope
    # the backward is grad * noise: 1 above zero, the drawn slope below
    torch.testing.assert_close(gc[pos], torch.ones_like(gc[pos]))
    torch.testing.assert_close(gc[~pos], slope)


def test_rrelu_eval_and_inplace():
    _same(lambda x: F.rrelu(x, 0.1, 0.3, training=False), X, grad=True)
    _same(lambda x: F.rrelu(x.clone(), 0.2, 0.4, training=False, inplace=True), X)
    x = X.to("hpu")
    with _native_only():
        r = F.rrelu_(x, 0.1, 0.3, training=True)
    assert r is x
    xc = X[X <= 0]
    got = x.cpu()[X <= 0] / xc
    assert ((got >= 0.1 - 1e-6) & (got <= 0.3 + 1e-6)).all()
    _raises_like(torch.ops.aten.rrelu_with_noise, X, torch.zeros(3), 0.1, 0.3, True)


# ------------------------------------------------------------------ dropout backward, batch_norm

@pytest.mark.parametrize("dt", [torch.int64, torch.bool, torch.float32])
def test_native_dropout_backward_int_and_bool(dt):
    g = torch.randint(-3, 4, (4, 5), generator=G).to(dt)
    m = torch.randint(0, 2, (4, 5), generator=G).bool()
    _same(torch.ops.aten.native_dropout_backward, g, m, 2.0)
    _same(torch.ops.aten.native_dropout_backward, g, m.to(dt), 0.5)


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 3, 0), (2, 0, 3)])
def test_batch_norm_zero_size(shape):
    x = torch.randn(shape)
    c = shape[1]
    _raises_like(torch.ops.aten.native_batch_norm, x, None, None, torch.zeros(c), torch.ones(c), True, 0.1, 1e-5)
    _same(torch.ops.aten.native_batch_norm, x, None, None, torch.zeros(c), torch.ones(c), False, 0.1, 1e-5)
    _same(torch.ops.aten.native_batch_norm, x, None, None, None, None, False, 0.1, 1e-5)


def test_batch_norm_out():
    x, w, b = torch.randn(4, 3, 5), torch.rand(3), torch.randn(3)
    for train in (True, False):
        rm, rv = torch.zeros(3), torch.ones(3)
        outs = [torch.empty(0) for _ in range(3)]
        exp = torch.ops.aten.native_batch_norm(x, w, b, rm.clone(), rv.clone(), train, 0.1, 1e-5)
        hout = [o.to("hpu") for o in outs]
        with _native_only():
            torch.ops.aten.native_batch_norm.out(x.to("hpu"), w.to("hpu"), b.to("hpu"), rm.to("hpu"), rv.to("hpu"),
                                                 train, 0.1, 1e-5, out=hout[0], save_mean=hout[1], save_invstd=hout[2])
        for e, h in zip(exp, hout):
            torch.testing.assert_close(h.cpu(), e)


# ---------------------------------------------------------------------------------- error paths

def test_error_paths_raise_like_cpu():
    x = torch.randn(5, 5)
    _raises_like(torch.amax, x, 0, out=torch.empty(5, dtype=torch.int32))
    _raises_like(torch.amin, x, 0, out=torch.empty(5, dtype=torch.float64))
    _raises_like(F.gelu, x, approximate="asdf")
    _raises_like(lambda t, m: t.masked_fill_(m, 1j), x, x > 0)
    _raises_like(torch.roll, x, [])
    _raises_like(torch.roll, x, [2, 1], 0)
    _raises_like(torch.roll, x, 1, 2)
    _raises_like(torch.roll, torch.tensor(1.0), 0, 0)
    _same(lambda t, m: t.clone().masked_fill_(m, complex(2, 0)), x, x > 0)


def test_sum_of_integers_into_float():
    i = torch.randint(-9, 9, (5, 4, 3), generator=G)
    _same(torch.sum, i, (0, 2), keepdim=True, dtype=torch.float32)
    _same(torch.sum, i, dtype=torch.bfloat16)
    _same(torch.masked.std, i)
    _same(torch.masked.var, i, 1, mask=i > 0)


# ----------------------------------------------------------------------------------- factories

# factories take their device as an argument: _same_factory calls fn once per device
_DEV = ["cpu"]


def _same_factory(fn):
    _DEV[0] = "cpu"
    cpu = fn()
    _DEV[0] = "hpu"
    with _native_only():
        out = fn()
        assert out.device.type == "hpu"
        torch.testing.assert_close(out.cpu(), cpu, rtol=0, atol=0)
    _DEV[0] = "cpu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32])
def test_logspace_bit_exact(dtype):
    for start, end, steps, base in [(-3, 0, 5, 10.0), (-3.3, 1.7, 7, 2.0), (2, -2, 10, 1.1), (0.5, 0.5, 1, 3.0),
                                    (1, 4, 0, 10.0), (-2.5, 3, 33, 0.5), (0, 7, 8, 2.0)]:
        _same_factory(lambda: torch.logspace(start, end, steps, base, dtype=dtype, device=_DEV[0]))
    with _native_only(), pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        torch.logspace(0, 1, -1, device="hpu")


@pytest.mark.parametrize("fn", [torch.triu_indices, torch.tril_indices])
def test_tri_indices(fn):
    for r, c, o in [(0, 0, 0), (3, 4, 1), (5, 3, -2), (4, 4, 0), (1, 7, 10), (6, 2, -10), (20, 21, 7)]:
        for dt in (torch.int64, torch.int32):
            _same_factory(lambda: fn(r, c, o, dtype=dt, device=_DEV[0]))
    with _native_only(), pytest.raises(RuntimeError, match="row must be non-negative"):
        fn(-1, 3, device="hpu")
    with _native_only(), pytest.raises(RuntimeError, match="not implemented for 'Float'"):
        fn(3, 3, dtype=torch.float32, device="hpu")


@pytest.mark.parametrize("rep", [[1, 2, 0, 3], [0, 0, 2], [2, 0, 0], [0, 0], [], [5]])
def test_repeat_interleave_index(rep):
    for dt in (torch.int64, torch.int32):
        _same(torch.repeat_interleave, torch.tensor(rep, dtype=dt))
    x = torch.randn(2, len(rep), 3)
    _same(torch.repeat_interleave, x, torch.tensor(rep, dtype=torch.int64), dim=1, grad=sum(rep) > 0)


def test_repeat_interleave_bad_input():
    _raises_like(torch.repeat_interleave, torch.tensor([1, -1]))
    _raises_like(torch.repeat_interleave, torch.tensor([[1]]))
    _raises_like(torch.repeat_interleave, torch.tensor([1.0]))
    _raises_like(lambda r: torch.repeat_interleave(r, output_size=2), torch.tensor([1, 2]))


# ------------------------------------------------------- out-of-range indices (eager and lazy)

def _oob_cases():
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    i = torch.tensor([[0], [5], [1]])
    return [
        ("gather", lambda d: torch.gather(x.to(d), 1, i.to(d))),
        ("index_select", lambda d: torch.index_select(x.to(d), 0, torch.tensor([7]).to(d))),
        ("index", lambda d: x.to(d)[torch.tensor([9]).to(d)]),
        ("embedding", lambda d: F.embedding(torch.tensor([9]).to(d), x.to(d))),
        ("nll_loss", lambda d: F.nll_loss(x.to(d), torch.tensor([0, 9, 1]).to(d))),
        ("scatter", lambda d: torch.zeros(3, 4).to(d).scatter_(1, i.to(d), 1.0)),
        ("index_add", lambda d: torch.zeros(3, 4).to(d).index_add_(0, torch.tensor([7]).to(d), torch.ones(1, 4).to(d))),
        ("index_put", lambda d: x.to(d).index_put_((torch.tensor([9]).to(d),), torch.tensor(1.0).to(d))),
    ]


@pytest.mark.parametrize("name", [n for n, _ in _oob_cases()])
def test_out_of_range_index_raises_like_cpu(name):
    """An out-of-range index raises CPU's exception type: in eager mode at the op, in lazy
    mode when the graph holding the op runs (at the read), naming the aten op; the failure
    is raised once, and tensors computed before the op keep their values."""
    import habana_frameworks.torch.core as htcore

    fn = dict(_oob_cases())[name]
    with pytest.raises(Exception) as ce:
        fn("cpu")
    before = torch.arange(6.0).to("hpu") * 2  # recorded into the same lazy graph, before the op
    with pytest.raises(type(ce.value)) as he:
        r = fn("hpu")
        htcore.mark_step()
        r.cpu()
    assert type(he.value) is type(ce.value), (he.value, ce.value)
    msg = str(he.value)
    assert "out of" in msg and "NativeError" not in type(he.value).__name__
    if os.environ.get("PT_HPU_LAZY_MODE") == "1":
        assert "lazy graph" in msg, msg
    # nothing stale: the next ops and reads work, the earlier result is intact
    torch.testing.assert_close(before.cpu(), torch.arange(6.0) * 2)
    y = torch.ones(3).to("hpu") + 1
    htcore.mark_step()
    torch.testing.assert_close(y.cpu(), torch.full((3,), 2.0))
