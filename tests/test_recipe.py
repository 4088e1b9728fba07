"""Recorded graphs (habana_frameworks.torch._recipe): capture once, run with one call into Go.

Runs in eager mode and (Makefile's second pass) in lazy mode; every result is checked
against the same computation on CPU."""
import gc

import pytest
import torch

from habana_frameworks.torch import _lazy, _recipe
from habana_frameworks.torch.hpu import metrics

aten = torch.ops.aten


def hpu(t):
    return t.to("hpu")


def close(a, b, bf16=False):
    assert a.device.type == "hpu"
    a = a.cpu()
    if bf16:
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)
    else:
        torch.testing.assert_close(a, b, rtol=1.3e-6, atol=1e-5)


def test_elementwise_chain_equals_cpu_and_fuses():
    def f(x, y):
        return [torch.relu(x * y + 1.5).sin() - y.exp()]

    x, y = torch.randn(33, 17), torch.randn(33, 17)
    rec, outs = _recipe.capture(f, [hpu(x), hpu(y)])
    close(outs[0], f(x, y)[0])
    assert rec.stats["nodes"] >= 5 and rec.stats["fused"] >= 5 and rec.stats["steps"] == 1
    for _ in range(3):
        x2, y2 = torch.randn(33, 17), torch.randn(33, 17)
        out = rec.run([hpu(x2), hpu(y2)])
        assert isinstance(out, list) and len(out) == 1
        close(out[0], f(x2, y2)[0])


def test_matmul_bias_relu():
    def f(x, w, b):
        return (torch.relu(torch.addmm(b, x, w.t())),)

    x, w, b = torch.randn(8, 16), torch.randn(32, 16), torch.randn(32)
    rec, outs = _recipe.capture(f, [hpu(x), hpu(w), hpu(b)])
    assert isinstance(outs, tuple)
    close(outs[0], f(x, w, b)[0])
    x2, w2, b2 = torch.randn(8, 16), torch.randn(32, 16), torch.randn(32)
    out = rec.run([hpu(x2), hpu(w2), hpu(b2)])
    assert isinstance(out, tuple)
    close(out[0], f(x2, w2, b2)[0])


def mlp_step(x, t, w1, b1, w2, b2):
    """Forward and backward of a 2-layer MLP with an MSE loss, in aten ops; returns the
    loss and the four gradients."""
    h = aten.addmm(b1, x, aten.t(w1))
    r = aten.relu(h)
    y = aten.addmm(b2, r, aten.t(w2))
    d = aten.sub(y, t)
    loss = aten.mean(aten.mul(d, d))
    gy = aten.mul(d, 2.0 / d.numel())
    gw2 = aten.mm(aten.t(gy), r)
    gb2 = aten.sum(gy, [0])
    gr = aten.mm(gy, w2)
    gh = aten.threshold_backward(gr, r, 0)
    gw1 = aten.mm(aten.t(gh), x)
    gb1 = aten.sum(gh, [0])
    return [loss, gw1, gb1, gw2, gb2]


def test_mlp_forward_backward_matches_cpu_autograd():
    def make():
        return [torch.randn(16, 10), torch.randn(16, 4), torch.randn(32, 10) * 0.3, torch.randn(32) * 0.1,
                torch.randn(4, 32) * 0.3, torch.randn(4) * 0.1]

    rec, outs = _recipe.capture(mlp_step, [hpu(a) for a in make()])
    for _ in range(2):
        args = make()
        got = rec.run([hpu(a) for a in args])
        x, t, *params = args
        params = [p.clone().requires_grad_() for p in params]
        w1, b1, w2, b2 = params
        loss = torch.nn.functional.mse_loss(torch.relu(x @ w1.t() + b1) @ w2.t() + b2, t)
        loss.backward()
        close(got[0], loss.detach())
        for g, p in zip(got[1:], params):
            close(g, p.grad)


def test_inplace_input_mutation_sgd_update():
    def sgd(p, g, buf):
        buf.mul_(0.9).add_(g)
        p.add_(buf, alpha=-0.1)
        return []

    p, g, buf = torch.randn(50), torch.randn(50), torch.randn(50)
    hp, hg, hb = hpu(p), hpu(g), hpu(buf)
    rec, outs = _recipe.capture(sgd, [hp, hg, hb])
    assert outs == []
    sgd(p, g, buf)
    close(hp, p)
    close(hb, buf)
    # A run writes the new inputs' storages and leaves the captured ones alone.
    p2, g2, b2 = torch.randn(50), torch.randn(50), torch.randn(50)
    hp2, hg2, hb2 = hpu(p2), hpu(g2), hpu(b2)
    before = hp.cpu()
    assert rec.run([hp2, hg2, hb2]) == []
    sgd(p2, g2, b2)
    close(hp2, p2)
    close(hb2, b2)
    assert torch.equal(hp.cpu(), before)


def test_view_outputs_alias_new_storages():
    def f(x):
        z = x * 2.0
        x.add_(1.0)
        return [z, z[1:].t(), x[0], z.view(-1)]

    rec, outs = _recipe.capture(f, [hpu(torch.randn(4, 3))])
    x = torch.randn(4, 3)
    hx = hpu(x)
    z, zt, x0, zf = rec.run([hx])
    close(z, x * 2.0)
    close(zt, (x * 2.0)[1:].t())
    close(x0, x[0] + 1.0)
    assert zt.untyped_storage().data_ptr() == z.untyped_storage().data_ptr() == zf.untyped_storage().data_ptr()
    assert x0.untyped_storage().data_ptr() == hx.untyped_storage().data_ptr()
    z.zero_()
    assert float(zf.abs().sum().cpu()) == 0.0
    # Fresh outputs per run: the previous run's results stay as they were.
    z2 = rec.run([hx])[0]
    assert z2.data_ptr() != z.data_ptr()


def test_broadcasting_and_constants_bound_outside():
    c = hpu(torch.randn(5))

    def f(x, b):
        return x + b + c

    x, b = torch.randn(3, 4, 5), torch.randn(4, 1)
    rec, out = _recipe.capture(f, [hpu(x), hpu(b)])
    assert isinstance(out, torch.Tensor)
    ref_c = c.cpu()
    close(out, x + b + ref_c)
    # The constant stays bound to its storage: written in place, the next run sees it;
    # dropped by the program, the recipe keeps it alive.
    c.fill_(2.0)
    x2, b2 = torch.randn(3, 4, 5), torch.randn(4, 1)
    close(rec.run([hpu(x2), hpu(b2)]), x2 + b2 + 2.0)
    del c
    gc.collect()
    torch.empty(5, device="hpu").fill_(7.0)  # may take the memory if it were freed
    close(rec.run([hpu(x2), hpu(b2)]), x2 + b2 + 2.0)


def test_bfloat16():
    def f(x, w):
        return [torch.nn.functional.gelu(x @ w) * 0.5 + x.sum(-1, keepdim=True)]

    x, w = torch.randn(6, 8).bfloat16(), torch.randn(8, 8).bfloat16()
    rec, outs = _recipe.capture(f, [hpu(x), hpu(w)])
    close(outs[0], f(x, w)[0], bf16=True)
    x2, w2 = torch.randn(6, 8).bfloat16(), torch.randn(8, 8).bfloat16()
    out = rec.run([hpu(x2), hpu(w2)])[0]
    assert out.dtype == torch.bfloat16
    close(out, f(x2, w2)[0], bf16=True)


def test_dropout_draws_fresh_numbers_with_manual_seed_semantics():
    def f(x):
        return [torch.nn.functional.dropout(x, 0.5, training=True) + torch.rand_like(x)]

    x = hpu(torch.ones(64, 64))
    rec, _ = _recipe.capture(f, [x])
    assert rec.stats["random_ops"] == 2
    a = rec.run([x])[0].cpu()
    b = rec.run([x])[0].cpu()
    assert not torch.equal(a, b)
    assert 0.3 < float((a < 1.0).float().mean()) < 0.7  # about half dropped
    # The run draws exactly what running f eagerly draws.
    torch.hpu.manual_seed(1234)
    c = rec.run([x])[0].cpu()
    torch.hpu.manual_seed(1234)
    d = f(x)[0].cpu()
    torch.hpu.manual_seed(1234)
    e = rec.run([x])[0].cpu()
    assert torch.equal(c, d) and torch.equal(c, e)


def test_wrong_inputs_raise_value_error_naming_the_input():
    rec, _ = _recipe.capture(lambda x, y: [x + y], [hpu(torch.randn(4, 4)), hpu(torch.randn(4, 4))])
    with pytest.raises(ValueError, match="recipe input 1"):
        rec.run([hpu(torch.randn(4, 4)), hpu(torch.randn(4, 5))])
    with pytest.raises(ValueError, match="recipe input 0"):
        rec.run([hpu(torch.randn(4, 4)).double(), hpu(torch.randn(4, 4))])
    with pytest.raises(ValueError, match="recipe input 0"):
        rec.run([hpu(torch.randn(4, 4)).t(), hpu(torch.randn(4, 4))])
    with pytest.raises(ValueError, match="recipe input 1"):
        rec.run([hpu(torch.randn(4, 4)), torch.randn(4, 4)])
    with pytest.raises(ValueError, match="expects 2 inputs"):
        rec.run([hpu(torch.randn(4, 4))])


def test_host_read_is_not_capturable_and_fn_ran_once():
    x = hpu(torch.arange(6.0))

    def f(a):
        a.add_(1.0)
        s = a.sum().item()
        return [a * s]

    with pytest.raises(_recipe.NotCapturable, match="host read") as ei:
        _recipe.capture(f, [x])
    assert torch.equal(x.cpu(), torch.arange(6.0) + 1.0)  # fn ran once, to the end
    close(ei.value.outputs[0], (torch.arange(6.0) + 1.0) * 21.0)
    with pytest.raises(_recipe.NotCapturable, match="host read"):
        _recipe.capture(lambda a: [a.cpu()], [x])
    # The runtime still works afterwards.
    rec, _ = _recipe.capture(lambda a: [a * 3.0], [x])
    close(rec.run([x])[0], (torch.arange(6.0) + 1.0) * 3.0)


def test_cpu_fallback_is_not_capturable(fallback_counter):
    x = hpu(torch.randn(5, 5))
    with pytest.raises(_recipe.NotCapturable, match="CPU fallback of aten::") as ei:
        _recipe.capture(lambda a: [torch.linalg.matrix_exp(a) + 1.0], [x])
    assert fallback_counter()  # it ran on the host
    close(ei.value.outputs[0], torch.linalg.matrix_exp(x.cpu()) + 1.0)


def test_failure_inside_run_names_the_op_and_process_goes_on():
    table = hpu(torch.randn(10, 3))
    rec, _ = _recipe.capture(lambda i: [torch.index_select(table, 0, i) * 2.0],
                             [hpu(torch.tensor([1, 2, 3]))])
    with pytest.raises(RuntimeError, match="index"):
        rec.run([hpu(torch.tensor([1, 2, 99]))])
    close(rec.run([hpu(torch.tensor([0, 9, 4]))])[0], table.cpu()[[0, 9, 4]] * 2.0)


def test_recipe_cache_counts_compilations():
    def f(x):
        return [torch.tanh(x) * 3.25 + 0.5]

    before = _lazy.stats()
    with metrics.metric_localcontext("graph_compilation") as m:
        _recipe.capture(f, [hpu(torch.randn(7, 3))])
        _recipe.capture(f, [hpu(torch.randn(7, 3))])  # same structure: a cache hit
    after = _lazy.stats()
    assert dict(m.stats())["TotalNumber"] >= 1
    assert after["total_hit"] - before["total_hit"] >= 1


def test_runs_keep_memory_flat_and_release_scratch():
    def f(x):
        y = x.exp() @ x
        z = torch.relu(y) + 1.0
        return [z.sum(0)]

    x = hpu(torch.randn(64, 64))
    rec, _ = _recipe.capture(f, [x])
    for _ in range(3):
        rec.run([x])
    torch.hpu.synchronize()
    used = torch.hpu.memory_allocated()
    for _ in range(20):
        rec.run([x])
    torch.hpu.synchronize()
    assert torch.hpu.memory_allocated() == used
    del rec
    gc.collect()
    assert torch.hpu.memory_allocated() <= used


def test_single_and_none_outputs_keep_their_structure():
    rec, out = _recipe.capture(lambda x: (x + 1.0, None, 3), [hpu(torch.zeros(2))])
    assert isinstance(out, tuple) and out[1] is None and out[2] == 3
    r = rec.run([hpu(torch.ones(2))])
    assert isinstance(r, tuple) and r[1] is None and r[2] == 3
    close(r[0], torch.full((2,), 2.0))


def test_pow_scalar_base_runs_native_and_captures(fallback_counter):
    # A capturable optimizer's bias correction: beta ** step with the step a tensor.
    steps = torch.tensor([1.0, 2.0, 7.0, 100.0, 0.0])

    def f(s):
        return [1 - torch.pow(0.9, s)]

    rec, outs = _recipe.capture(f, [hpu(steps)])
    assert not fallback_counter()
    close(outs[0], f(steps)[0])
    close(rec.run([hpu(steps + 1)])[0], f(steps + 1)[0])
    out = hpu(torch.empty(5))
    torch.pow(0.5, hpu(steps), out=out)
    close(out, torch.pow(0.5, steps))
    # An integer result is not native (CPU fallback), with CPU's result and dtype.
    got = torch.pow(2, hpu(steps.to(torch.int64)))
    assert got.dtype == torch.int64
    torch.testing.assert_close(got.cpu(), torch.pow(2, steps.to(torch.int64)))


def test_namedtuple_results_come_back_as_the_namedtuple():
    import collections

    from habana_frameworks.torch import _recipe

    NT = collections.namedtuple("NT", ["a", "b"])
    x = torch.randn(8, device="hpu")
    rec, out = _recipe.capture(lambda t: NT(t + 1, t * 2), [x])
    assert isinstance(out, NT)
    y = torch.randn(8, device="hpu")
    got = rec.run([y])
    assert isinstance(got, NT)
    torch.testing.assert_close(got.a.cpu(), y.cpu() + 1)
    torch.testing.assert_close(got.b.cpu(), y.cpu() * 2)
    del rec
