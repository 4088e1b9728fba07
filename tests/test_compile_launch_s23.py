"""The launch path of a cached compiled graph (fast_runtime._cluster_plan / _direct_cluster):
a graph that is one cluster over some of its inputs, returning the cluster's outputs in any
order, inputs and None (an MLP's training forward and backward), calls the cluster's
recipe through its C++ entry without GraphModule.forward or ClusterRunner.__call__; an
inference call takes that entry before any grad-mode toggling. Results, aliasing (an
input returned is the input object itself), None slots and errors stay those of the
graph's own forward."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import habana_frameworks.torch.core as htcore  # noqa: F401
from habana_frameworks.torch.dynamo.compile_backend import fast_runtime, recipe_compiler


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def runner_calls(monkeypatch):
    calls = []
    real_call = recipe_compiler.ClusterRunner.__call__

    def counted(self, *inputs):
        calls.append(self)
        return real_call(self, *inputs)

    monkeypatch.setattr(recipe_compiler.ClusterRunner, "__call__", counted)
    return calls


@pytest.fixture
def compiled_graphs(monkeypatch):
    """(kind, boxed compiled graph) of every graph hpu_backend compiles from now on."""
    seen = []
    real = fast_runtime.note_compiled

    def note(kind, compiled):
        seen.append((kind, compiled))
        return real(kind, compiled)

    monkeypatch.setattr(fast_runtime, "note_compiled", note)
    return seen


class _MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(12, 16), nn.Linear(16, 5)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def _grads(model, x, y, fn):
    for p in model.parameters():
        p.grad = None
    loss = fn(x, y)
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


def test_mlp_training_graphs_run_their_recipes_directly(runner_calls):
    """The forward graph returns its cluster's outputs reordered plus an input saved for
    backward, the backward None for the input's gradient: both run through the direct
    path once settled, and every step's loss and gradients equal CPU's."""
    g = torch.Generator().manual_seed(3)
    cpu = _MLP()
    with torch.no_grad():
        for p in cpu.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    hpu = _MLP().to("hpu")
    hpu.load_state_dict(cpu.state_dict())

    def step_of(model):
        return lambda x, y: nn.functional.mse_loss(model(x), y)

    compiled = torch.compile(step_of(hpu), backend="hpu_backend")
    steps = 40
    for i in range(steps):
        x, y = torch.randn(8, 12, generator=g), torch.randn(8, 5, generator=g)
        loss, grads = _grads(hpu, x.to("hpu"), y.to("hpu"), compiled)
        ref_loss, ref_grads = _grads(cpu, x, y, step_of(cpu))
        torch.testing.assert_close(loss.cpu(), ref_loss, rtol=1e-5, atol=1e-6)
        for a, b in zip(grads, ref_grads):
            torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-6)
    fw_bw = {r for r in runner_calls}
    assert len(fw_bw) >= 2
    # Each runner goes through __call__ for its capture and thread tuning only.
    per_runner = {r: runner_calls.count(r) for r in fw_bw}
    assert all(n < steps // 2 for n in per_runner.values()), per_runner
    assert all(r._tuner is None and r.hits >= steps - 1 for r in fw_bw)


def test_direct_outputs_are_the_graph_forwards(compiled_graphs):
    """The direct call of each compiled graph gives what the graph's forward gives: the
    same input objects where it returns inputs, None where it returns None, the same
    values (bit for bit) elsewhere."""
    torch.manual_seed(0)
    model = _MLP().to("hpu")

    def step(x, y):
        return nn.functional.mse_loss(model(x), y)

    compiled = torch.compile(step, backend="hpu_backend")
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(8, 12, generator=g).to("hpu"), torch.randn(8, 5, generator=g).to("hpu")
    for _ in range(30):  # settle: capture and thread tuning of each recipe
        compiled(x, y).backward()
    planned = []
    for kind, fn in compiled_graphs:
        direct = fast_runtime._unboxed(fn)
        plan = getattr(direct, "plan", None)
        if plan is None:
            continue
        planned.append(kind)
        ph = [n.meta["val"] for n in plan.runner.submodule.graph.find_nodes(op="placeholder")]
        gm = plan.forward.__self__
        vals = [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")]
        assert len(ph) <= len(vals)
        # Laid out as traced (a saved transpose stays transposed), so the recipe takes them.
        args = tuple(torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="hpu")
                     .copy_(torch.randn(v.shape, generator=g)) for v in vals)
        hits = plan.runner.hits
        got, want = direct(*args), plan.forward(*args)
        assert plan.runner.hits == hits + 2 or plan.runner._tuner is not None
        assert len(got) == len(want)
        for a, b in zip(got, want):
            if b is None:
                assert a is None
            elif any(b is x for x in args):
                assert a is b
            else:
                assert not any(a is x for x in args)
                assert torch.equal(a.cpu(), b.cpu())
    assert {"fw", "bw"} <= set(planned)
    assert any(p.outmap is not None for _, fn in compiled_graphs
               if (p := getattr(fast_runtime._unboxed(fn), "plan", None)) is not None)


def test_inference_launch_does_not_toggle_grad_mode(monkeypatch):
    """An inference region called with autograd on takes the recipe's C++ entry before any
    grad-mode toggling; its outputs are plain (no autograd history) as under no_grad."""
    sets = []
    real = torch._C._set_grad_enabled

    def counted(on):
        sets.append(on)
        return real(on)

    monkeypatch.setattr(torch._C, "_set_grad_enabled", counted)

    def f(t):
        return t * 2 + 1

    compiled = torch.compile(f, backend="hpu_backend")
    g = torch.Generator().manual_seed(11)
    xs = [torch.randn(16, generator=g) for _ in range(40)]
    for x in xs[:30]:
        compiled(x.to("hpu"))
    sets.clear()
    for x in xs[30:]:
        out = compiled(x.to("hpu"))
        assert out.grad_fn is None and not out.requires_grad and torch.is_grad_enabled()
        torch.testing.assert_close(out.cpu(), f(x), rtol=0, atol=0)
    assert sets == []


def test_error_in_a_planned_graph_names_the_op_and_leaves_inputs():
    """An out-of-range embedding index inside a training forward that runs directly raises
    at the call, naming the op, as CPU's IndexError; the weights are untouched and the next
    good call works."""
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4).to("hpu")
    lin = nn.Linear(4, 3).to("hpu")

    def f(idx):
        return lin(emb(idx)).sum()

    compiled = torch.compile(f, backend="hpu_backend")
    good = torch.tensor([1, 2, 3, 9]).to("hpu")
    for _ in range(30):
        compiled(good).backward()
    before = emb.weight.detach().cpu().clone()
    with pytest.raises(IndexError, match="embedding|index"):
        compiled(torch.tensor([1, 2, 3, 10]).to("hpu"))
    assert torch.equal(emb.weight.detach().cpu(), before)
    out = compiled(good)
    w, b, e = lin.weight.detach().cpu(), lin.bias.detach().cpu(), emb.weight.detach().cpu()
    torch.testing.assert_close(out.detach().cpu(), (e[good.cpu()] @ w.T + b).sum(), rtol=1e-5, atol=1e-5)


def test_picker_keeps_tuples_for_any_length():
    seq = ("a", "b", None, "c")
    assert fast_runtime._picker((3, 0, 2))(seq) == ("c", "a", None)
    assert fast_runtime._picker((1,))(seq) == ("b",)
    assert fast_runtime._picker(())(seq) == ()


def test_direct_path_calls_the_fastcall_entry(runner_calls):
    """The direct path calls RecipeCall.run through _recipe_C.run_fast (METH_FASTCALL,
    no pybind11 dispatcher), bound to the recipe's RecipeCall; a bad input still falls
    back (run_fast returns None before running) and results stay CPU's."""
    import functools

    from habana_frameworks.torch import _recipe

    def f(t):
        return t * 3 - 1

    compiled = torch.compile(f, backend="hpu_backend")
    g = torch.Generator().manual_seed(13)
    x = torch.randn(32, generator=g)
    for _ in range(30):
        torch.testing.assert_close(compiled(x.to("hpu")).cpu(), f(x), rtol=0, atol=0)
    runner = runner_calls[0]
    go = fast_runtime._fast_run_of(runner._entry, runner, (None,))
    assert isinstance(go, functools.partial) and go.func is _recipe._recipe_c().run_fast
    assert go.args == (runner._entry[0]._fast,)
    assert go((x.to("hpu")[:16],), 0) is None  # not the captured shape: nothing ran
    with pytest.raises(TypeError):
        _recipe._recipe_c().run_fast(runner._entry[0]._fast, (x.to("hpu"),))
    with pytest.raises(TypeError):  # not a RecipeCall: pybind11's TypeError, not a RuntimeError
        _recipe._recipe_c().run_fast(object(), (x.to("hpu"),), 0)
