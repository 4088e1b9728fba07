"""hpu_backend's cluster order for the recipe's elementwise fusion (fusion_order.py): an
optimizer step becomes one fused loop per parameter, results bitwise those of the
unordered clusters, and the order keeps input writes after their readers and random ops
in program order."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import habana_frameworks.torch.core as htcore  # noqa: F401
from habana_frameworks.torch.dynamo.compile_backend import recipe_compiler
from habana_frameworks.torch.dynamo.compile_backend.fusion_order import order_for_fusion, reinplace_input_writes
from hpusim_models import build, make_batches

DISABLE = "PT_HPU_DISABLE_pass_order_clusters_for_fusion"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _runners() -> set:
    return set(recipe_compiler._runners)


def _train_compiled(make_opt, steps: int, options: dict | None = None):
    """Params and optimizer state after `steps` compiled MLP training steps, and the
    recipe runners those steps created."""
    torch.manual_seed(0)
    model = build("mlp", seed=3).to("hpu")
    opt = make_opt(model.parameters())

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    before = _runners()
    compiled = torch.compile(step, backend="hpu_backend", options=options)
    losses = [compiled(x.to("hpu"), y.to("hpu")).item() for x, y in make_batches("mlp", 16, steps, seed=5)]
    state = [{k: v.cpu().clone() for k, v in opt.state[p].items()} for p in model.parameters()]
    return losses, [p.detach().cpu().clone() for p in model.parameters()], state, _runners() - before


_OPTS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2),
    "adamw_amsgrad_maximize": lambda ps: torch.optim.AdamW(ps, lr=1e-2, amsgrad=True, maximize=True),
    "adam_l2": lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.1),
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
}


@pytest.mark.parametrize("optim", list(_OPTS))
def test_optimizer_step_results_bitwise_those_of_the_unordered_clusters(optim, monkeypatch):
    monkeypatch.setenv(DISABLE, "1")
    ref = _train_compiled(_OPTS[optim], 3)
    monkeypatch.delenv(DISABLE)
    torch._dynamo.reset()
    got = _train_compiled(_OPTS[optim], 3)
    assert got[0] == ref[0]
    for a, b in zip(got[1], ref[1]):
        assert torch.equal(a, b)
    for sa, sb in zip(got[2], ref[2]):
        assert sa.keys() == sb.keys()
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k


def test_adamw_step_is_one_fused_loop_per_parameter():
    """The 6-parameter MLP's AdamW recipe: each parameter's decay, moments, denominator
    and update, written into the parameter and its moments, is one fused loop (it was
    60 steps before the cluster was ordered). The traced ops: with the optimizer pass
    (the default) the step is one hpu::adam_torch_ call instead."""
    _, params, _, runners = _train_compiled(_OPTS["adamw"], 2, {"fuse_optimizer": False})
    optimizer = max(runners, key=lambda r: r.num_ops)
    stats = optimizer._entry[0].stats
    assert stats["steps"] == len(params), stats
    assert stats["fused"] == stats["nodes"], stats


def _graph(fn, *args) -> torch.fx.GraphModule:
    return make_fx(fn)(*args)


def _targets(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_order_groups_same_shape_chains_and_keeps_results():
    def f(a, b, c, d):
        x = a * 2
        y = c * 3
        x = x + 1
        y = y - 1
        return x.sqrt(), y.exp()

    args = (torch.rand(8), torch.rand(8), torch.rand(4, 3), torch.rand(4, 3))
    gm = _graph(f, *args)
    ref = gm(*args)
    assert order_for_fusion(gm)
    shapes = [tuple(n.meta["val"].shape) for n in gm.graph.nodes if n.op == "call_function"]
    assert shapes == [(8,)] * 3 + [(4, 3)] * 3
    for r, g in zip(ref, gm(*args)):
        assert torch.equal(r, g)


def test_random_ops_keep_their_program_order():
    def f(a, c):
        p = torch.bernoulli(torch.full_like(a, 0.5))
        q = torch.bernoulli(torch.full_like(c, 0.5))
        r = torch.rand_like(a)
        return a * p + r, c * q

    gm = _graph(f, torch.rand(8), torch.rand(4, 3))
    before = [t for t in _targets(gm) if "bernoulli" in t or "rand" in t]
    order_for_fusion(gm)
    assert [t for t in _targets(gm) if "bernoulli" in t or "rand" in t] == before


def test_input_write_stays_after_every_reader_of_the_old_value():
    def f(x, w):
        y = x * 2 + 1
        z = (x[1:] * w).sum()  # reads the old x, through a view, after y in program order
        x.copy_(y)
        return z

    x, w = torch.rand(6), torch.rand(5)
    torch._dynamo.reset()
    hx = x.to("hpu")
    z = torch.compile(f, backend="hpu_backend")(hx, w.to("hpu"))
    xc = x.clone()
    zc = f(xc, w)
    torch.testing.assert_close(z.cpu(), zc)
    torch.testing.assert_close(hx.cpu(), xc)


def test_input_write_folds_into_its_chain_only_when_no_later_reader():
    def later_reader(x):
        y = (x * 2).add(1)
        z = x + 3
        x.copy_(y)
        return z

    def earlier_reader(x):
        z = x.sum()
        y = (x * z).add(1)
        x.copy_(y)
        return z

    for fn, folds in ((later_reader, 0), (earlier_reader, 1)):
        x = torch.rand(6)
        gm = make_fx(fn)(x.clone())  # copy_ stays a write into the input, as in AOT's epilogue
        assert "aten.copy_.default" in _targets(gm)
        order_for_fusion(gm)
        ref_x, gm_x = x.clone(), x.clone()
        ref = fn(ref_x)
        if folds:
            # the write folds only once the reader runs first (what ordering guarantees)
            assert reinplace_input_writes(gm) == folds
            assert "aten.copy_.default" not in _targets(gm)
        else:
            assert reinplace_input_writes(gm) == 0
        torch.testing.assert_close(gm(gm_x), ref)
        torch.testing.assert_close(gm_x, ref_x)


def test_compiled_transformer_with_dropout_equal_with_and_without_the_order(monkeypatch):
    """Random ops keep their seeds: a compiled transformer step with dropout gives the
    same loss and gradients with the order pass as without it."""
    def grads(disable: bool):
        if disable:
            monkeypatch.setenv(DISABLE, "1")
        else:
            monkeypatch.delenv(DISABLE, raising=False)
        torch._dynamo.reset()
        model = build("transformer", seed=1, dropout=0.1).to("hpu")
        model.train()
        x, y = make_batches("transformer", 4, 1, seed=2)[0]
        torch.hpu.manual_seed(7)
        logits = torch.compile(model, backend="hpu_backend")(x.to("hpu"))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.to("hpu").reshape(-1))
        loss.backward()
        return loss.item(), [p.grad.cpu() for p in model.parameters()]

    ref_loss, ref = grads(True)
    loss, got = grads(False)
    assert loss == ref_loss
    for a, b in zip(got, ref):
        assert torch.equal(a, b)


def test_dropout_backward_decomposed_for_fusion_bitwise_that_of_the_kernel():
    """float32 dropout backward in a compiled graph is (grad * mask) * scale, pointwise ops
    the recipe fuses with the chain around them; gradients bitwise those of eager mode,
    which runs the dropout-backward kernel (same masks: same seed)."""
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Dropout(0.3), nn.Linear(32, 8), nn.Dropout(0.2)).to("hpu")
    x = torch.randn(12, 16).to("hpu")
    grads = []
    before = _runners()
    for fn in (model, torch.compile(model, backend="hpu_backend")):
        model.zero_grad(set_to_none=True)
        torch.hpu.manual_seed(11)
        fn(x).square().sum().backward()
        grads.append([p.grad.cpu() for p in model.parameters()])
    for a, b in zip(*grads):
        assert torch.equal(a, b)
    ops = " ".join(r.ops_summary() for r in _runners() - before)
    assert "native_dropout_backward" not in ops and "aten.mul.Tensor" in ops
