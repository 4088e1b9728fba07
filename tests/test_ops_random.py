"""Native random ops on hpu (Philox4x32-10 in Go): statistics, edge cases, reproducibility
under torch.hpu.manual_seed / torch.manual_seed and get/set_rng_state, fresh values on
consecutive calls, independence from the work split, and zero CPU fallbacks. Values
cannot equal CPU's (a different generator, as on Gaudi)."""
import pytest
import torch
import torch.nn.functional as F

FLOATS = [torch.float32, torch.bfloat16, torch.float64]
N = 200_000  # > 32K elements: generated on several goroutines


@pytest.fixture
def no_fallback(fallback_counter):
    yield
    assert fallback_counter() == {}


def stats(t):
    t = t.detach().cpu().double()
    return t.mean().item(), t.var().item()


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_rand(dtype, no_fallback):
    torch.hpu.manual_seed(1)
    x = torch.rand(N, dtype=dtype, device="hpu")
    assert x.dtype == dtype and x.device.type == "hpu"
    c = x.cpu().double()
    assert c.min() >= 0 and c.max() < 1
    m, v = stats(x)
    assert abs(m - 0.5) < 0.01 and abs(v - 1 / 12) < 0.005
    y = torch.empty(N, dtype=dtype, device="hpu").uniform_(-3, 5)
    c = y.cpu().double()
    assert c.min() >= -3 and c.max() <= 5
    m, v = stats(y)
    assert abs(m - 1) < 0.05 and abs(v - 64 / 12) < 0.1


@pytest.mark.parametrize("dtype", FLOATS)
def test_normal_randn(dtype, no_fallback):
    torch.hpu.manual_seed(2)
    x = torch.randn(N, dtype=dtype, device="hpu")
    m, v = stats(x)
    assert abs(m) < 0.01 and abs(v - 1) < 0.02
    c = x.cpu().double()
    assert ((c.abs() < 1).double().mean() - 0.6827).abs() < 0.01  # shape, not just moments
    y = torch.empty(N, dtype=dtype, device="hpu").normal_(3, 0.5)
    m, v = stats(y)
    assert abs(m - 3) < 0.01 and abs(v - 0.25) < 0.01
    z = torch.normal(torch.full((1000,), 10.0, device="hpu", dtype=dtype), 2.0)
    assert abs(z.cpu().double().mean() - 10) < 0.3
    with pytest.raises(RuntimeError, match="std"):
        torch.empty(3, device="hpu").normal_(0, -1)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_bernoulli(dtype, p, no_fallback):
    torch.hpu.manual_seed(3)
    x = torch.empty(N, dtype=dtype, device="hpu").bernoulli_(p)
    c = x.cpu().double()
    assert set(c.unique().tolist()) <= {0.0, 1.0}
    assert abs(c.mean().item() - p) < 0.01
    if p in (0.0, 1.0):
        assert c.mean().item() == p
    if dtype.is_floating_point:
        probs = torch.rand(N, device="hpu", dtype=dtype)
        b = torch.bernoulli(probs)
        # E[b | p] = p: correlate the draw with its probability
        pc, bc = probs.cpu().double(), b.cpu().double()
        assert abs(bc.mean() - pc.mean()) < 0.01
        assert abs((bc * pc).mean() - (pc * pc).mean()) < 0.01
        t = torch.empty(1000, device="hpu", dtype=dtype).bernoulli_(torch.tensor([0.0, 1.0], device="hpu", dtype=dtype).repeat(500))
        assert torch.equal(t.cpu().double(), torch.tensor([0.0, 1.0]).repeat(500).double())
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        torch.empty(3, device="hpu").bernoulli_(1.5)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.float32, torch.bfloat16, torch.bool])
def test_random_randint(dtype, no_fallback):
    torch.hpu.manual_seed(4)
    x = torch.randint(3, 10, (N,), dtype=dtype, device="hpu") if dtype != torch.bool else \
        torch.randint(0, 2, (N,), dtype=dtype, device="hpu")
    c = x.cpu().double()
    lo, hi = (3, 9) if dtype != torch.bool else (0, 1)
    assert c.min() == lo and c.max() == hi
    counts = torch.bincount((c - lo).long())
    assert (counts.double() / N - 1 / (hi - lo + 1)).abs().max() < 0.01
    y = torch.empty(N, dtype=dtype, device="hpu").random_()
    c = y.cpu().double()
    top = {torch.int64: 2.0**63, torch.int32: 2.0**31, torch.uint8: 256, torch.float32: 2.0**24 + 1,
           torch.bfloat16: 2.0**8 + 1, torch.bool: 2}[dtype]
    assert c.min() >= 0 and c.max() < top and c.max() >= top / 2
    z = torch.empty(1000, dtype=torch.int64, device="hpu").random_(-(2**63), None)
    assert (z.cpu() < 0).any() and (z.cpu() > 0).any()


def test_reproducible_and_fresh(no_fallback):
    def draw():
        return [torch.rand(1000, device="hpu").cpu(), torch.randn(1000, device="hpu").cpu(),
                torch.randint(0, 100, (1000,), device="hpu").cpu(),
                F.dropout(torch.ones(1000, device="hpu"), 0.5).cpu(),
                torch.empty(1000, device="hpu").bernoulli_(0.5).cpu()]
    torch.hpu.manual_seed(123)
    a = draw()
    torch.hpu.manual_seed(123)
    b = draw()
    torch.manual_seed(123)
    c = draw()
    for x, y, z in zip(a, b, c):
        assert torch.equal(x, y) and torch.equal(x, z)
    # consecutive calls give different values
    assert not torch.equal(a[0], torch.rand(1000, device="hpu").cpu())
    assert not torch.equal(a[0][:500], a[0][500:])
    # get/set_rng_state replays
    state = torch.hpu.get_rng_state()
    d = draw()
    torch.hpu.set_rng_state(state)
    e = draw()
    for x, y in zip(d, e):
        assert torch.equal(x, y)
    # a different seed gives different values
    torch.hpu.manual_seed(124)
    assert not torch.equal(draw()[0], a[0])
    # an explicit generator drives the op instead of the default one
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    u = torch.empty(100, device="hpu").uniform_(generator=g1)
    v = torch.empty(100, device="hpu").uniform_(generator=g2)
    assert torch.equal(u.cpu(), v.cpu())


def test_independent_of_split_and_layout(no_fallback):
    # element i depends only on (seed, offset, i): a small tensor equals the head of a large
    # one generated on several goroutines, and a strided target gets the same values.
    for fn in (torch.rand, torch.randn):
        torch.hpu.manual_seed(5)
        small = fn(1000, device="hpu").cpu()
        torch.hpu.manual_seed(5)
        big = fn(N, device="hpu").cpu()
        assert torch.equal(small, big[:1000])
    torch.hpu.manual_seed(6)
    a = torch.empty(300, 400, device="hpu").uniform_().cpu()
    torch.hpu.manual_seed(6)
    t = torch.empty(400, 300, device="hpu").t()
    t.uniform_()
    assert torch.equal(t.cpu(), a)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 1.0])
def test_dropout(dtype, p, no_fallback):
    torch.hpu.manual_seed(7)
    x = (torch.rand(N, dtype=torch.float32) + 0.5).to(dtype)
    h = x.to("hpu").requires_grad_()
    y = F.dropout(h, p, training=True)
    yc = y.detach().cpu()
    kept = yc != 0
    assert abs(kept.double().mean().item() - (1 - p)) < 0.01
    if p < 1:
        expect = (x.float() * (1 / (1 - p))).to(dtype)
        torch.testing.assert_close(yc[kept], expect[kept], rtol=1e-2 if dtype == torch.bfloat16 else 1e-6, atol=0)
    g = (torch.rand(N) + 0.5).to(dtype)
    y.backward(g.to("hpu"))
    gi = h.grad.cpu()
    assert torch.equal(gi == 0, ~kept) if p < 1 else (gi == 0).all()
    # eval mode is the identity
    assert torch.equal(F.dropout(x.to("hpu"), p, training=False).cpu(), x)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_native_dropout_and_backward(dtype, p, no_fallback):
    torch.hpu.manual_seed(8)
    x = torch.randn(N, dtype=dtype)
    out, mask = torch.native_dropout(x.to("hpu"), p, True)
    assert mask.dtype == torch.bool and out.dtype == dtype
    m, o = mask.cpu(), out.cpu()
    assert abs(m.double().mean().item() - (1 - p)) < 0.01
    scale = 1 / (1 - p) if p < 1 else 0.0
    # exactly what CPU's native_dropout computes for the same mask
    assert torch.equal(o, x.mul(m).mul_(scale))
    g = torch.randn(N, dtype=dtype)
    gi = torch.ops.aten.native_dropout_backward(g.to("hpu"), mask, scale).cpu()
    assert torch.equal(gi, torch.ops.aten.native_dropout_backward(g, m, scale))
    o2, m2 = torch.native_dropout(x.to("hpu"), p, False)
    assert torch.equal(o2.cpu(), x) and m2.cpu().all()


def test_dropout_module_training_loop(no_fallback):
    torch.hpu.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.25),
                              torch.nn.Linear(32, 4)).to("hpu")
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(64, 16, device="hpu")
    for _ in range(3):
        opt.zero_grad()
        net(x).square().mean().backward()
        opt.step()
    assert all(torch.isfinite(p.detach().cpu()).all() for p in net.parameters())
