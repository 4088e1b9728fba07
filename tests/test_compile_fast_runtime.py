"""hpu_backend's fast runtime (dynamo/compile_backend/fast_runtime.py): regions that need
none of AOT autograd's runtime wrappers run as one autograd.Function (training) or one
graph call (inference); the others keep AOT's wrappers. Both must give the same results,
bit for bit (the same recipes run), and the same autograd behaviour. Also the host
scalar program (host_scalars.py) that folds an optimizer's step-count math on the host."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import habana_frameworks.torch.core as htcore  # noqa: F401
from habana_frameworks.torch.dynamo.compile_backend import fast_runtime
from hpusim_models import build, make_batches, make_optimizer
from hpusim_models.training import loss_fn

AOT = {"use_fast_runtime": False}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compile(fn, options=None):
    return torch.compile(fn, backend="hpu_backend", options=options)


def _counts_during(fn):
    before = fast_runtime.counts()
    out = fn()
    after = fast_runtime.counts()
    return out, {k: after[k] - before[k] for k in after}


def _train(name: str, options, steps: int = 3):
    """A whole compiled training step (forward, loss, backward, AdamW step), as the
    benchmark runs it; returns the losses, the model and how its regions ran."""
    torch.manual_seed(0)
    model = build(name, seed=0, dropout=0.0).to("hpu")
    opt = make_optimizer(model, "adamw", 1e-3)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = _compile(step, options)
    batches = make_batches(name, 8, steps, seed=1)
    model.train()
    losses, counts = _counts_during(lambda: [compiled(x.to("hpu"), y.to("hpu")).item() for x, y in batches])
    return losses, model, counts


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_training_step_fast_runtime_equals_aot_runtime(name):
    losses_fast, model_fast, counts_fast = _train(name, None)
    torch._dynamo.reset()
    losses_aot, model_aot, counts_aot = _train(name, AOT)
    # forward+backward and the optimizer step run without AOT's wrappers (the CNN's
    # BatchNorm running stats are input mutations kept in the graph: handled too)
    assert counts_fast == {"fast_regions": 2, "aot_regions": 0}
    assert counts_aot == {"fast_regions": 0, "aot_regions": 0}
    assert losses_fast == losses_aot
    state_fast, state_aot = model_fast.state_dict(), model_aot.state_dict()
    for key in state_fast:  # parameters and buffers (running stats, num_batches_tracked)
        assert torch.equal(state_fast[key].cpu(), state_aot[key].cpu()), key


def test_fast_region_is_one_autograd_function_and_matches_cpu():
    torch.manual_seed(0)
    w_cpu = torch.randn(8, 4, requires_grad=True)
    x_cpu = torch.randn(5, 8)
    w = w_cpu.detach().to("hpu").requires_grad_()
    x = x_cpu.to("hpu")

    def f(x, w):
        h = (x @ w).tanh()
        return h.sum(), h.argmax(dim=1)  # a differentiable and a non-differentiable output

    (loss, idx), counts = _counts_during(lambda: _compile(f)(x, w))
    assert counts == {"fast_regions": 1, "aot_regions": 0}
    assert type(loss.grad_fn).__name__ == "CompiledRegionBackward"
    assert not idx.requires_grad and idx.dtype == torch.int64
    loss.backward(retain_graph=True)
    loss.backward()  # a retained graph runs the backward recipe again
    loss_cpu, idx_cpu = f(x_cpu, w_cpu)
    (2 * loss_cpu).backward()
    torch.testing.assert_close(loss.cpu(), loss_cpu.detach())
    assert torch.equal(idx.cpu(), idx_cpu)
    torch.testing.assert_close(w.grad.cpu(), w_cpu.grad)


def test_non_leaf_input_without_gradient_is_detached_as_aot_does():
    a = torch.randn(4, device="hpu", requires_grad=True)
    b = torch.randn(4, device="hpu", requires_grad=True)

    def f(u, v):  # no gradient flows to u
        return (v * 3).sum() + u.detach().sum()

    compiled = _compile(f)
    out = compiled(a * 2, b)
    out.backward()
    assert a.grad is None
    torch.testing.assert_close(b.grad.cpu(), torch.full((4,), 3.0))


def test_regions_needing_aot_wrappers_keep_them():
    x = torch.randn(3, 4, device="hpu", requires_grad=True)

    def alias_out(x):  # an output that is a view of an input
        return x.t(), x * 2

    (t, y), counts = _counts_during(lambda: _compile(alias_out)(x))
    assert counts == {"fast_regions": 0, "aot_regions": 1}
    assert t._base is x or t.data_ptr() == x.data_ptr()
    (t.sum() + y.sum()).backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((3, 4), 3.0))

    buf = torch.zeros(4, device="hpu")

    def mutate(v, b):  # an input mutated under autograd: AOT applies it after the graph
        b.add_(1)
        return v.exp()

    v = torch.randn(4, device="hpu").requires_grad_()
    out = _compile(mutate)(v, buf)
    assert torch.equal(buf.cpu(), torch.ones(4))
    out.sum().backward()
    torch.testing.assert_close(v.grad.cpu(), v.detach().exp().cpu())


def test_inference_region_mutating_inputs_bumps_their_version():
    p = torch.ones(4, device="hpu")

    @torch.no_grad()
    def update(p, g):
        p.add_(g, alpha=-0.5)

    v0 = p._version
    _, counts = _counts_during(lambda: _compile(update)(p, torch.full((4,), 2.0, device="hpu")))
    assert counts == {"fast_regions": 1, "aot_regions": 0}
    assert torch.equal(p.cpu(), torch.zeros(4))
    assert p._version > v0  # autograd sees the in-place write


def test_autocast_region_runs_as_eager_autocast():
    lin = nn.Linear(16, 8).to("hpu")
    x = torch.randn(4, 16, device="hpu")

    def f(x):
        with torch.autocast("hpu", dtype=torch.bfloat16):
            return lin(x).float().sum()

    compiled = _compile(f)
    out = compiled(x)
    out.backward()
    grad = lin.weight.grad.clone()
    lin.weight.grad = None
    f(x).backward()
    torch.testing.assert_close(out, f(x).detach(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(grad.cpu(), lin.weight.grad.cpu(), rtol=2e-2, atol=2e-2)


def test_fast_runtime_off_keeps_aot_everywhere():
    from habana_frameworks.torch.dynamo.compile_backend import config

    x = torch.randn(4, device="hpu", requires_grad=True)
    with config.patch(use_fast_runtime=False):
        out, counts = _counts_during(lambda: _compile(lambda t: (t * t).sum())(x))
    assert counts == {"fast_regions": 0, "aot_regions": 0}
    out.backward()
    torch.testing.assert_close(x.grad.cpu(), 2 * x.detach().cpu())


def test_host_scalar_program_keeps_ieee_results_and_can_be_disabled(monkeypatch):
    from habana_frameworks.torch.dynamo.compile_backend import host_scalars

    def f(step, p):
        step += 1
        p.mul_((1 - 0.9 ** step) / (step - 4))  # step 4: x/0 -> inf, as torch computes it
        return p

    folded: list[int] = []
    real = host_scalars.fold_host_scalar_math
    monkeypatch.setattr("habana_frameworks.torch.dynamo.compile_backend.passes.fold_host_scalar_math",
                        lambda gm: folded.append(real(gm)) or folded[-1])
    compiled = _compile(f)
    step_h, p_h = torch.tensor(2.0), torch.linspace(0.5, 1, 4).to("hpu")
    step_c, p_c = torch.tensor(2.0), torch.linspace(0.5, 1, 4)
    for _ in range(3):  # steps 3, 4 (division by zero), 5
        compiled(step_h, p_h)
        f(step_c, p_c)
        torch.testing.assert_close(p_h.cpu(), p_c, rtol=1e-6, atol=1e-7, equal_nan=True)
    assert folded and folded[0] > 0
    assert step_h.item() == step_c.item() == 5.0

    torch._dynamo.reset()
    monkeypatch.setenv("PT_HPU_DISABLE_pass_fold_host_scalar_math", "1")
    folded.clear()
    step_h, p_h = torch.tensor(0.0), torch.ones(4).to("hpu")
    _compile(f)(step_h, p_h)
    assert folded == []  # the pass did not run: the math runs in the recipe
    torch.testing.assert_close(p_h.cpu(), torch.full((4,), (1 - 0.9) / -3))


def test_host_scalar_chains_alike_run_once_per_distinct_step():
    """An optimizer's per-parameter scalar chains are generated once and run once per
    distinct step value; parameters whose steps differ (or are -0.0 against 0.0) get their
    own results: those of the straight-line program bit for bit, and the CPU's."""
    import math
    import struct
    from habana_frameworks.torch.dynamo.compile_backend import host_scalars

    def f(s1, s2, s3, p1, p2, p3):
        for s, p in ((s1, p1), (s2, p2), (s3, p3)):
            s += 1
            p.mul_((1 - 0.9 ** s) / (1 - 0.999 ** s) ** 0.5 + 1 / (s - 3))
        return p1, p2, p3

    programs: list[host_scalars.HostScalarProgram] = []
    real = host_scalars.fold_host_scalar_math

    def fold(gm):
        n = real(gm)
        programs.extend(t.target for t in gm.graph.nodes if isinstance(t.target, host_scalars.HostScalarProgram))
        return n

    import pytest as _pytest
    mp = _pytest.MonkeyPatch()
    mp.setattr("habana_frameworks.torch.dynamo.compile_backend.passes.fold_host_scalar_math", fold)
    try:
        compiled = _compile(f)
        for steps in ((1.0, 1.0, 1.0), (1.0, 5.0, 1.0), (-1.0, -1.0, 2.0), (-0.0, 0.0, 7.0)):
            sh = [torch.tensor(v) for v in steps]
            sc = [torch.tensor(v) for v in steps]
            ph = [torch.linspace(0.5, 1, 4).to("hpu") for _ in steps]
            pc = [torch.linspace(0.5, 1, 4) for _ in steps]
            compiled(*sh, *ph)
            f(*sc, *pc)
            for a, b in zip(ph, pc):
                torch.testing.assert_close(a.cpu(), b, rtol=1e-6, atol=1e-7, equal_nan=True)
            assert [t.item() for t in sh] == [t.item() for t in sc]
    finally:
        mp.undo()
    assert programs
    scope = programs[0]._program.__globals__
    assert "_chain0" in scope and "_chain1" not in scope  # one chain, shared by the three parameters
    prog = programs[0]
    straight = host_scalars._generate(prog.num_inputs, prog.steps, prog.results, prog.targets, round_f32=True,
                                      share=False)
    assert "_chain0" not in straight.__globals__

    def outcome(program, vals):
        try:
            return [struct.pack("d", v) for v in program(*vals)]
        except (ArithmeticError, ValueError) as e:  # x/0, domain: __call__ then evaluates with IEEE semantics
            return type(e).__name__

    for vals in ((1.0, 1.0, 1.0), (2.0, 9.0, 2.0), (-0.0, 0.0, 0.0), (4.0, 4.0, 3.5), (1e6, 1e6, -3.0),
                 (3.0, 3.0, 1.0), (math.inf, 1.0, 1.0)):
        assert outcome(prog._program, vals) == outcome(straight, vals), vals


def test_single_cluster_region_calls_its_recipe_directly(monkeypatch):
    """A graph that is one cluster over its inputs (a cached launch's common case) runs its
    recipe through the C++ entry without ClusterRunner.__call__ once the recipe is settled
    (captured, thread tuning done); results stay those of CPU, and an input the recipe was
    not captured for still goes through the runner (which recaptures)."""
    from habana_frameworks.torch.dynamo.compile_backend import recipe_compiler

    calls = []
    real_call = recipe_compiler.ClusterRunner.__call__

    def counted(self, *inputs):
        calls.append(self)
        return real_call(self, *inputs)

    monkeypatch.setattr(recipe_compiler.ClusterRunner, "__call__", counted)

    def f(t):
        return t * 2 + 1

    compiled = _compile(f)
    g = torch.Generator().manual_seed(7)
    xs = [torch.randn(64, generator=g) for _ in range(40)]
    for x in xs:
        torch.testing.assert_close(compiled(x.to("hpu")).cpu(), f(x), rtol=0, atol=0)
    runner = calls[0]
    assert runner._tuner is None and len(calls) < len(xs)  # the settled recipe ran directly
    hits, n = runner.hits, len(calls)
    torch.testing.assert_close(compiled(xs[0].to("hpu")).cpu(), f(xs[0]), rtol=0, atol=0)
    assert len(calls) == n and runner.hits == hits + 1
    # A view at an offset: the recipe checks the storage offset it was captured with, the
    # direct path hands such an input to the runner (dynamo may also recompile for it).
    big = torch.randn(65, generator=g)
    torch.testing.assert_close(compiled(big.to("hpu")[1:]).cpu(), f(big[1:]), rtol=0, atol=0)
