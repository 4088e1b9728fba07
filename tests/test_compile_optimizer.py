"""A compiled torch.optim.Adam/AdamW step runs as one hpu::adam_torch Go call per group of
equal hyper-parameters (dynamo/compile_backend/optimizer_pattern.py) and leaves the
parameters and the optimizer state BIT-EQUAL to eager torch.optim on CPU after several
steps fed the same gradients; what the pattern does not cover keeps the traced ops."""
from __future__ import annotations

import copy

import pytest
import torch

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch.dynamo.compile_backend import optimizer_pattern

SHAPES = [(33, 40), (33,), (7, 33), (7,), (3000,)]


def _params(dtype: torch.dtype, seed: int = 0, shapes=SHAPES) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g).to(dtype).requires_grad_() for s in shapes]


def _grads(step: int, dtype: torch.dtype, nan_at: int | None = None, shapes=SHAPES) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    out = [(torch.randn(s, generator=g) * 0.01).to(dtype) for s in shapes]
    if nan_at == step:
        out[0][0, 0] = float("nan")
        out[4][7] = float("inf")
    return out


ON = {"fuse_optimizer": True}


def _run(make_opt, dtype=torch.float32, steps=5, nan_at=None, options=ON, between=None, eager_first=False,
         shapes=SHAPES):
    """(cpu params, hpu params, cpu optimizer, hpu optimizer) after `steps` steps: eager on
    CPU, compiled on hpu (the first one eager too with eager_first)."""
    torch._dynamo.reset()
    ref = _params(dtype, shapes=shapes)
    hpu = [p.detach().to("hpu").requires_grad_() for p in ref]
    opt_ref, opt_hpu = make_opt(ref), make_opt(hpu)
    step = torch.compile(lambda: opt_hpu.step(), backend="hpu_backend", options=options)
    for i in range(steps):
        for p_ref, p_hpu, g in zip(ref, hpu, _grads(i, dtype, nan_at, shapes)):
            p_ref.grad, p_hpu.grad = g, g.to("hpu")
        opt_ref.step()
        if eager_first and i == 0:
            opt_hpu.step()
        else:
            step()
        if between is not None:
            between(opt_ref, opt_hpu)
    return ref, hpu, opt_ref, opt_hpu


def _assert_bit_equal(ref, hpu, opt_ref, opt_hpu):
    for p_ref, p_hpu in zip(ref, hpu):
        torch.testing.assert_close(p_hpu.detach().cpu(), p_ref.detach(), rtol=0, atol=0, equal_nan=True)
        for key, value in opt_ref.state[p_ref].items():
            torch.testing.assert_close(opt_hpu.state[p_hpu][key].cpu(), value, rtol=0, atol=0, equal_nan=True)


def _fused() -> int:
    return optimizer_pattern.counts()["parameters"]


CASES = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
    "adamw_wd_amsgrad": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, amsgrad=True),
    "adamw_no_wd_maximize": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0, maximize=True),
    "adam_l2_maximize_amsgrad": lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.01, maximize=True,
                                                            amsgrad=True),
    "adam_small_beta1": lambda ps: torch.optim.Adam(ps, lr=3e-3, betas=(0.3, 0.9), eps=1e-6),
    "adam_foreach_false": lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fused_adam_step_bit_equal_to_cpu_eager(case):
    before = _fused()
    _assert_bit_equal(*_run(CASES[case]))
    assert _fused() - before == len(SHAPES)  # one compile, every parameter fused


def test_fused_by_default():
    """hpu_backend without options fuses the step (PT_HPU_COMPILE_FUSE_OPTIMIZER=1)."""
    before = _fused()
    _assert_bit_equal(*_run(CASES["adamw"], options=None, steps=2))
    assert _fused() - before == len(SHAPES)


# Enough elements for both kernel workers' shares and, in each, more than one batch of
# square roots (kernels/optim_adam_torch.go: adamMinShare 8K, adamBatch 32K elements per
# vsSqrt call), with tensors split across shares and batches.
BIG_SHAPES = [(251, 157), (10,), (33000,), (7, 3), (64, 600), (5,)]


@pytest.mark.parametrize("case,dtype", [("adamw", torch.float32), ("adamw_wd_amsgrad", torch.float32),
                                        ("adam_l2_maximize_amsgrad", torch.float32),
                                        ("adamw_wd_amsgrad", torch.bfloat16)])
def test_fused_adam_large_group_bit_equal_to_cpu_eager(case, dtype):
    before = _fused()
    _assert_bit_equal(*_run(CASES[case], dtype=dtype, steps=3, shapes=BIG_SHAPES, nan_at=1 if dtype == torch.float32 else None))
    assert _fused() - before == len(BIG_SHAPES)


@pytest.mark.parametrize("case", ["adamw", "adamw_wd_amsgrad", "adamw_no_wd_maximize"])
def test_fused_adam_step_bfloat16_bit_equal_to_cpu_eager(case):
    before = _fused()
    _assert_bit_equal(*_run(CASES[case], dtype=torch.bfloat16))
    assert _fused() - before == len(SHAPES)


def test_bfloat16_adam_with_l2_weight_decay_keeps_the_traced_ops():
    """torch's bfloat16 grad.add(param, alpha=wd) rounds differently in the tails of its
    thread chunks: not fused, equal to CPU within bfloat16 rounding."""
    before = _fused()
    ref, hpu, _, _ = _run(CASES["adam_l2_maximize_amsgrad"], dtype=torch.bfloat16)
    assert _fused() == before
    for p_ref, p_hpu in zip(ref, hpu):
        torch.testing.assert_close(p_hpu.detach().cpu(), p_ref.detach(), rtol=2e-2, atol=1e-2)


def test_non_finite_gradients_propagate_as_on_cpu():
    _assert_bit_equal(*_run(CASES["adamw_wd_amsgrad"], nan_at=2))


def test_param_groups_with_different_hyper_parameters():
    """Dynamo's move_step_if_cpu used to replace the first group's host step counts with hpu
    copies while the second group was traced: the graph kept counting the old tensors and
    state["step"] stayed 0 (dynamo/optimizer_steps.py keeps them on the host, as eager)."""
    def make(ps):
        return torch.optim.AdamW([{"params": ps[:2], "lr": 1e-2, "weight_decay": 0.5},
                                  {"params": ps[2:], "betas": (0.8, 0.99)}], lr=1e-3)

    ref, hpu, opt_ref, opt_hpu = _run(make, options={"fuse_optimizer": False})
    for p_ref, p_hpu in zip(ref, hpu):
        assert opt_hpu.state[p_hpu]["step"].device.type == "cpu"
        assert opt_hpu.state[p_hpu]["step"].item() == opt_ref.state[p_ref]["step"].item() == 5
        # The traced (unfused) ops round differently from eager's order: a few float32 ulps.
        torch.testing.assert_close(p_hpu.detach().cpu(), p_ref.detach(), rtol=1e-5, atol=1e-6)


def test_param_groups_with_host_steps_fuse_per_group():
    """Groups with different hyper-parameters become one call each (two here), every step
    count a host tensor and every group bit-equal to CPU."""
    def make(ps):
        return torch.optim.AdamW([{"params": ps[:2], "lr": 1e-2, "weight_decay": 0.5},
                                  {"params": ps[2:], "betas": (0.8, 0.99)}], lr=1e-3)

    before = dict(optimizer_pattern.counts())
    ref, hpu, opt_ref, opt_hpu = _run(make)
    host = [i for i, p in enumerate(hpu) if opt_hpu.state[p]["step"].device.type == "cpu"]
    assert optimizer_pattern.counts()["parameters"] - before["parameters"] == len(SHAPES)
    assert optimizer_pattern.counts()["calls"] - before["calls"] == 2
    assert host == [0, 1, 2, 3, 4]
    for i in host:
        torch.testing.assert_close(hpu[i].detach().cpu(), ref[i].detach(), rtol=0, atol=0)
        for key, value in opt_ref.state[ref[i]].items():
            torch.testing.assert_close(opt_hpu.state[hpu[i]][key].cpu(), value, rtol=0, atol=0)


def test_lr_scheduler_changes_lr_between_steps():
    """A scheduler writes a new float lr into the param group between steps: the compiled
    step follows it. The first graph (lr a constant) is fused; at the first change dynamo
    recompiles once with lr as a host tensor input, which the pattern does not cover (the
    traced ops run, equal within float32 rounding), and later values reuse that graph."""
    scheds = {}

    def between(opt_ref, opt_hpu):
        for opt in (opt_ref, opt_hpu):
            if opt not in scheds:
                scheds[opt] = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            scheds[opt].step()

    before = _fused()
    ref, hpu, opt_ref, opt_hpu = _run(CASES["adamw"], steps=5, between=between)
    assert _fused() - before == len(SHAPES)
    assert opt_hpu.param_groups[0]["lr"] == opt_ref.param_groups[0]["lr"] == 1e-3 * 0.5 ** 5
    for p_ref, p_hpu in zip(ref, hpu):
        torch.testing.assert_close(p_hpu.detach().cpu(), p_ref.detach(), rtol=1e-5, atol=1e-7)
        for key, value in opt_ref.state[p_ref].items():
            torch.testing.assert_close(opt_hpu.state[p_hpu][key].cpu(), value, rtol=1e-5, atol=1e-9)


def test_unmatched_forms_keep_the_traced_ops():
    """capturable=True (step counts on the device) and the pass turned off run the traced
    ops: not fused, still equal to CPU within float32 rounding."""
    before = _fused()
    for make, options in ((lambda ps: torch.optim.AdamW(ps, lr=1e-2, capturable=ps[0].device.type == "hpu"), None),
                          (CASES["adamw"], {"fuse_optimizer": False})):
        ref, hpu, opt_ref, opt_hpu = _run(make, options=options)
        for p_ref, p_hpu in zip(ref, hpu):
            torch.testing.assert_close(p_hpu.detach().cpu(), p_ref.detach(), rtol=1e-5, atol=1e-6)
    assert _fused() == before


def test_whole_compiled_training_step_uses_the_fused_op():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ref = copy.deepcopy(model)
    model = model.to("hpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-2)

    def train_step(m, o, x, y):
        o.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        o.step()
        return loss

    step = torch.compile(train_step, backend="hpu_backend", options=ON)
    before = _fused()
    for i in range(4):
        x, y = torch.randn(5, 8), torch.randint(0, 4, (5,))
        loss = step(model, opt, x.to("hpu"), y.to("hpu"))
        loss_ref = train_step(ref, opt_ref, x, y)
        assert loss.item() == pytest.approx(loss_ref.item(), rel=1e-5, abs=1e-6)
    assert _fused() - before == 4
    for p_ref, p in zip(ref.parameters(), model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), p_ref.detach(), rtol=1e-4, atol=1e-6)


def test_adam_torch_op_rejects_bad_lists_and_updates_non_contiguous_in_place():
    p = torch.zeros(3, device="hpu")
    with pytest.raises(RuntimeError, match="differ in length"):
        torch.ops.hpu.adam_torch_([p], [p], [p], [], [], [torch.tensor(1.0)], 1e-3, 0.9, 0.999, 1e-8, 0.1, 0.001,
                                  1.0, 0.0, 0)
    with pytest.raises(RuntimeError, match="dtype and shape"):
        torch.ops.hpu.adam_torch_([p], [torch.zeros(4, device="hpu")], [p], [p], [], [torch.tensor(1.0)], 1e-3,
                                  0.9, 0.999, 1e-8, 0.1, 0.001, 1.0, 0.0, 0)
    # Eager use with transposed (non-contiguous) state: the same update as torch's.
    g = torch.Generator().manual_seed(5)
    w, grad, m, v = (torch.randn(4, 6, generator=g) for _ in range(4))
    v = v.abs()
    ref = [t.clone().requires_grad_() for t in (w,)]
    opt = torch.optim.Adam(ref, lr=1e-2)
    ref[0].grad = grad.clone()
    opt.state[ref[0]] = {"step": torch.tensor(2.0), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    opt.step()
    wh, mh, vh = (t.t().contiguous().t().to("hpu") for t in (w, m, v))
    mh, vh = mh.t().contiguous().t(), vh.t().contiguous().t()
    assert not mh.is_contiguous()
    torch.ops.hpu.adam_torch_([wh], [grad.to("hpu")], [mh], [vh], [], [torch.tensor(3.0)], 1e-2, 0.9, 0.999,
                              1e-8, 1 - 0.9, 1 - 0.999, 1.0, 0.0, 0)
    torch.testing.assert_close(wh.cpu(), ref[0].detach(), rtol=0, atol=0)
    torch.testing.assert_close(mh.cpu(), opt.state[ref[0]]["exp_avg"], rtol=0, atol=0)
    torch.testing.assert_close(vh.cpu(), opt.state[ref[0]]["exp_avg_sq"], rtol=0, atol=0)
