"""torch.Generator(device="hpu") and `generator=` on hpu random ops, as on Gaudi.

The bridge's HPU hooks return CPU generators (at::CPUGeneratorImpl, device "cpu") from
getNewGenerator/getDefaultGenerator, seeded with the CPU default generator's current seed; an
hpu random op draws its kernel's seed from the generator it is given. hpusim does the same
(csrc/hpu_random.cpp): for one seed, an hpu generator, the hpu default generator
(torch.hpu.manual_seed) and a plain CPU generator give the same hpu numbers, which differ from
CPU's numbers for that seed (Philox kernels against CPU's Mersenne Twister), as on Gaudi. Being
CPU generators, hpu generators also drive DataLoader/RandomSampler."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import habana_frameworks.torch  # noqa: F401

HPU = "hpu"


def _gen(seed):
    g = torch.Generator(device=HPU)
    g.manual_seed(seed)
    return g


# Every random op that takes a generator, run on hpu with it.
def _ops(g):
    p = torch.full((64,), 0.3, device=HPU)
    w = torch.tensor([0.1, 0.2, 0.3, 0.4], device=HPU)
    mean = torch.zeros(16, device=HPU)
    return {
        "rand": torch.rand(64, device=HPU, generator=g),
        "randn": torch.randn(64, device=HPU, generator=g),
        "randint": torch.randint(0, 10, (64,), device=HPU, generator=g),
        "randperm": torch.randperm(20, device=HPU, generator=g),
        "normal_": torch.empty(64, device=HPU).normal_(2.0, 3.0, generator=g),
        "uniform_": torch.empty(64, device=HPU).uniform_(-1.0, 1.0, generator=g),
        "normal_tt": torch.normal(mean, torch.ones(16, device=HPU), generator=g),
        "bernoulli": torch.bernoulli(p, generator=g),
        "bernoulli_p": torch.empty(64, device=HPU).bernoulli_(0.5, generator=g),
        "multinomial": torch.multinomial(w, 3, replacement=False, generator=g),
        "exponential_": torch.empty(64, device=HPU).exponential_(2.0, generator=g),
        "random_": torch.empty(64, device=HPU).random_(0, 100, generator=g),
        "rand_like": torch.rand(8, 8, device=HPU, generator=g),
    }


def _cpu(d):
    return {k: v.cpu() for k, v in d.items()}


def test_hpu_generator_is_a_seeded_cpu_generator_as_in_the_bridge():
    torch.manual_seed(1234)
    g = torch.Generator(device=HPU)
    # the bridge's createHPUGenerator: a CPUGeneratorImpl seeded with the CPU default's seed
    assert g.device == torch.device("cpu")
    assert g.initial_seed() == torch.initial_seed() == 1234
    assert g.manual_seed(7) is g and g.initial_seed() == 7
    assert torch.Generator(device="hpu:0").initial_seed() == 1234
    d = torch.hpu.default_generators[0]
    assert d is torch.hpu.default_generators[0] and d.device == torch.device("cpu")
    assert d is not g


def test_same_seed_same_numbers_and_valid_values():
    a, b = _cpu(_ops(_gen(5))), _cpu(_ops(_gen(5)))
    c = _cpu(_ops(_gen(6)))
    for k in a:
        assert torch.equal(a[k], b[k]), k
        assert a[k].device.type == "cpu"
    for k in ("rand", "randn", "normal_", "uniform_", "exponential_", "random_", "randperm"):
        assert not torch.equal(a[k], c[k]), k
    assert ((a["rand"] >= 0) & (a["rand"] < 1)).all()
    assert ((a["uniform_"] >= -1) & (a["uniform_"] < 1)).all()
    assert ((a["randint"] >= 0) & (a["randint"] < 10)).all() and a["randint"].dtype == torch.int64
    assert torch.equal(a["randperm"].sort().values, torch.arange(20))
    assert len(set(a["multinomial"].tolist())) == 3
    assert set(a["bernoulli"].unique().tolist()) <= {0.0, 1.0}
    assert (a["exponential_"] > 0).all()
    assert ((a["random_"] >= 0) & (a["random_"] < 100)).all()


def test_statistics_match_cpu_distributions():
    # hpu numbers are not CPU's (another algorithm, as on Gaudi): compare moments on many samples
    g = _gen(11)
    n = 200_000
    u = torch.rand(n, device=HPU, generator=g).double().cpu()
    z = torch.empty(n, device=HPU).normal_(2.0, 3.0, generator=g).double().cpu()
    b = torch.empty(n, device=HPU).bernoulli_(0.25, generator=g).double().cpu()
    e = torch.empty(n, device=HPU).exponential_(2.0, generator=g).double().cpu()
    tol = 5 / n ** 0.5  # five standard errors of a unit-variance mean
    assert abs(u.mean() - 0.5) < tol * (1 / 12) ** 0.5 and abs(u.var() - 1 / 12) < 0.003
    assert abs(z.mean() - 2.0) < 3 * tol and abs(z.std() - 3.0) < 0.03
    assert abs(b.mean() - 0.25) < tol
    assert abs(e.mean() - 0.5) < 0.5 * tol


def test_hpu_numbers_for_a_seed_are_the_default_generators_and_not_cpus():
    ours = torch.randn(32, device=HPU, generator=_gen(3)).cpu()
    torch.hpu.manual_seed(3)
    default = torch.randn(32, device=HPU).cpu()
    plain = torch.randn(32, device=HPU, generator=torch.Generator().manual_seed(3)).cpu()
    cpu = torch.randn(32, generator=torch.Generator().manual_seed(3))
    assert torch.equal(ours, default) and torch.equal(ours, plain)
    assert not torch.allclose(ours, cpu)


def test_generator_stream_is_independent_of_the_default_generator():
    ref = _cpu(_ops(_gen(9)))
    g = _gen(9)
    torch.hpu.manual_seed(100)
    first = torch.rand(16, device=HPU).cpu()
    out = {}
    for k, v in _ops(g).items():  # interleave draws from the default generator
        out[k] = v.cpu()
        torch.rand(4, device=HPU)
    for k in ref:
        assert torch.equal(ref[k], out[k]), k
    # and drawing from g did not move the default generator
    torch.hpu.manual_seed(100)
    _ops(_gen(1))
    assert torch.equal(torch.rand(16, device=HPU).cpu(), first)


def test_get_state_set_state_replays():
    g = _gen(21)
    torch.rand(5, device=HPU, generator=g)
    state = g.get_state()
    a = _cpu(_ops(g))
    g.set_state(state)
    b = _cpu(_ops(g))
    for k in a:
        assert torch.equal(a[k], b[k]), k
    h = torch.Generator(device=HPU)
    h.set_state(state)
    c = _cpu(_ops(h))
    for k in a:
        assert torch.equal(a[k], c[k]), k
    assert g.initial_seed() == 21


def test_dropout_style_mask_with_generator():
    x = torch.ones(1000, device=HPU)
    m1 = torch.empty_like(x).bernoulli_(0.9, generator=_gen(4))
    m2 = torch.empty_like(x).bernoulli_(0.9, generator=_gen(4))
    y = x * m1 / 0.9
    assert torch.equal(m1.cpu(), m2.cpu())
    kept = m1.cpu().bool()
    assert torch.allclose(y.cpu()[kept], torch.full((int(kept.sum()),), 1 / 0.9))
    assert (y.cpu()[~kept] == 0).all() and 0.85 < kept.float().mean() < 0.95


def test_dataloader_and_random_sampler_take_an_hpu_generator():
    from torch.utils.data import DataLoader, RandomSampler, TensorDataset

    ds = TensorDataset(torch.arange(50))

    def order(gen):
        return torch.cat([b[0] for b in DataLoader(ds, batch_size=8, shuffle=True, generator=gen)])

    a, b = order(_gen(2)), order(_gen(2))
    assert torch.equal(a, b) and torch.equal(a.sort().values, torch.arange(50))
    assert torch.equal(a, order(torch.Generator().manual_seed(2)))  # a CPU generator, as on Gaudi
    assert not torch.equal(a, order(_gen(3)))
    s1 = list(RandomSampler(range(30), generator=_gen(8)))
    assert s1 == list(RandomSampler(range(30), generator=_gen(8))) and sorted(s1) == list(range(30))
    s2 = list(RandomSampler(range(30), replacement=True, num_samples=40, generator=_gen(8)))
    assert len(s2) == 40 and s2 == list(RandomSampler(range(30), replacement=True, num_samples=40,
                                                      generator=_gen(8)))


def test_compiled_random_ops_take_the_generator():
    def fn(x, g):
        return x + torch.rand(x.shape, device=HPU, generator=g), torch.randn(4, device=HPU, generator=g)

    x = torch.zeros(3, 4, device=HPU)
    cf = torch.compile(fn, backend="hpu_backend")
    eager = [t.cpu() for t in fn(x, _gen(17))]
    got = [t.cpu() for t in cf(x, _gen(17))]
    again = [t.cpu() for t in cf(x, _gen(17))]
    for e, a, b in zip(eager, got, again):
        assert torch.equal(a, b)
        assert torch.equal(e, a)


_LAZY_RUN = textwrap.dedent("""
    import torch, habana_frameworks.torch.core as htcore
    def run():
        g = torch.Generator(device="hpu"); g.manual_seed(13)
        x = torch.ones(256, device="hpu")
        a = torch.randn(8, device="hpu", generator=g) * 2
        m = torch.empty_like(x).bernoulli_(0.7, generator=g)
        y = (x * m).sum()
        torch.hpu.manual_seed(1)
        d = torch.rand(4, device="hpu")
        p = torch.randperm(10, device="hpu", generator=g)
        htcore.mark_step()
        return [a.cpu().tolist(), m.cpu().tolist(), float(y.cpu()), d.cpu().tolist(), p.cpu().tolist()]
""")
# (fresh process: the hpu default generator was seeded, as the bridge's, with the CPU default's seed)
_LAZY_MAIN = ("assert torch.hpu.initial_seed() == torch.initial_seed()\n"
              "r1 = run(); r2 = run(); assert r1 == r2; print('OUT', repr(r1))\n")


def test_lazy_mode_records_the_generators_draws():
    env = dict(os.environ, PT_HPU_LAZY_MODE="1")
    out = subprocess.run([sys.executable, "-c", _LAZY_RUN + _LAZY_MAIN], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lazy = eval(out.stdout.split("OUT ", 1)[1])
    ns: dict = {}
    exec(_LAZY_RUN, ns)
    assert ns["run"]() == lazy  # eager mode, in this process, draws the same numbers
