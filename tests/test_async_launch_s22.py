"""Compiled graphs launched on the eager-mode device stream (bridge/stream.go).

Backward graphs, and graphs whose ops cannot fail on the data, return from their call at
once; the next op, copy or host read over their memory waits for them. Everything a user
can observe must be as if they had run at the call: values, in-place updates, memory
statistics, frees, errors of later ops."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import habana_frameworks.torch as ht  # noqa: F401
from habana_frameworks.torch import _recipe

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(autouse=True)
def _launch_every_graph():
    """Recipes launch whatever their run time (the default keeps graphs under 30 us at the
    call: a launch costs the host more than such a graph takes), so these small graphs
    exercise the stream. Recipes are decided at their first runs: each test compiles anew."""
    torch._dynamo.reset()
    prev = _recipe.set_async_min_us(0)
    yield
    _recipe.set_async_min_us(prev)


def _runs() -> int:
    return _recipe.stream_runs()


def _mlp(seed: int = 0) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.ReLU(), torch.nn.Linear(96, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 10))
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return m


def _train(device: str, steps: int, backend: str | None) -> tuple[list[float], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    model = _mlp().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = torch.compile(step, backend=backend) if backend else step
    losses = []
    for _ in range(steps):
        x = torch.randn(32, 48, generator=g)
        y = torch.randint(0, 10, (32,), generator=g)
        losses.append(fn(x.to(device), y.to(device)).item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_compiled_training_step_launches_and_matches_cpu():
    before = _runs()
    losses, params = _train("hpu", 6, "hpu_backend")
    assert _runs() > before, "the backward and optimizer recipes should have run on the stream"
    ref_losses, ref_params = _train("cpu", 6, None)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-4, atol=1e-5)
    for p, r in zip(params, ref_params):
        torch.testing.assert_close(p, r, rtol=1e-4, atol=1e-5)


def _run_script(code: str, **env: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**os.environ, **env},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


_BITS = """
    import sys, torch
    sys.path.insert(0, {here!r})
    import habana_frameworks.torch as ht
    from habana_frameworks.torch import _recipe
    from test_async_launch_s22 import _train
    losses, params = _train("hpu", 5, "hpu_backend")
    print(_recipe.stream_runs())
    print(repr(losses))
    print(repr([p.double().sum().item() for p in params]))
"""


def test_async_and_synchronous_runs_give_the_same_bits():
    code = _BITS.format(here=HERE)
    a = _run_script(code).splitlines()[-3:]
    b = _run_script(code, HPUSIM_ASYNC_LAUNCH="0").splitlines()[-3:]
    c = _run_script(code, HPUSIM_ASYNC_MIN_US="0").splitlines()[-3:]
    assert int(c[0]) > 0 and c[1:] == b[1:]
    assert int(b[0]) == 0
    assert a[1:] == b[1:]


def _pure(x, w):
    return torch.relu(x @ w) * 2 + 1


def test_host_reads_and_ops_right_after_a_launch_see_the_results():
    torch.manual_seed(0)
    f = torch.compile(_pure, backend="hpu_backend")
    x, w = torch.randn(256, 256), torch.randn(256, 256)
    ref = _pure(x, w)
    xh, wh = x.to("hpu"), w.to("hpu")
    for _ in range(4):  # compiles and captures the recipe, whose first runs are timed at the call
        f(xh, wh)
    before = _runs()
    for _ in range(3):
        y = f(xh, wh)
        torch.testing.assert_close(y.cpu(), ref, rtol=1e-4, atol=1e-4)  # a copy right after the launch
        assert (y.sum() - ref.sum()).abs().item() < 1e-4 * ref.abs().sum()  # an op, then item
        torch.testing.assert_close((y * 3).cpu(), ref * 3, rtol=1e-4, atol=1e-4)
    assert _runs() > before


def test_inplace_update_then_eager_op_keeps_the_order():
    def upd(p, g):
        p.add_(g, alpha=0.5)
        return None

    f = torch.compile(upd, backend="hpu_backend")
    torch.manual_seed(0)
    p, g = torch.randn(512, 300), torch.randn(512, 300)
    ph, gh = p.clone().to("hpu"), g.to("hpu")
    ref = p.clone()
    for _ in range(4):
        f(ph, gh)
        ref.add_(g, alpha=0.5)
        ph.mul_(0.75)  # must run after the launched update
        ref.mul_(0.75)
    torch.testing.assert_close(ph.cpu(), ref)


def test_dropped_outputs_and_inputs_are_freed_after_the_stream():
    f = torch.compile(_pure, backend="hpu_backend")
    w = torch.randn(128, 128, device="hpu")
    f(torch.randn(128, 128, device="hpu"), w)
    torch.hpu.synchronize()
    base = torch.hpu.memory_allocated()
    for _ in range(20):
        x = torch.randn(128, 128).to("hpu")
        f(x, w)  # output dropped at once, input right after
        del x
    assert torch.hpu.memory_allocated() == base  # statistics wait for the stream
    # freed memory is reused correctly afterwards
    x = torch.randn(128, 128)
    torch.testing.assert_close(f(x.to("hpu"), w).cpu(), _pure(x, w.cpu()), rtol=1e-4, atol=1e-4)


def test_noncontiguous_and_channels_last_inputs():
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    bn = torch.nn.BatchNorm2d(8)
    model = torch.nn.Sequential(conv, bn, torch.nn.ReLU())
    ref_model = _copy_module(model)
    hm = model.to("hpu").to(memory_format=torch.channels_last)
    f = torch.compile(hm, backend="hpu_backend")
    torch.manual_seed(0)
    for _ in range(3):
        x = torch.randn(4, 3, 10, 12).to(memory_format=torch.channels_last)
        xt = torch.randn(4, 3, 12, 10).transpose(2, 3)
        for inp in (x, xt):
            out = f(inp.to("hpu"))
            out.sum().backward()
            ref = ref_model(inp)
            ref.sum().backward()
            torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-4)
    for p, r in zip(hm.parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.grad.cpu(), r.grad, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(bn.running_mean.cpu(), ref_model[1].running_mean, rtol=1e-4, atol=1e-5)


def _copy_module(m: torch.nn.Module) -> torch.nn.Module:
    import copy

    return copy.deepcopy(m)


def test_graphs_with_data_checks_run_at_the_call():
    """An index out of range raises at the call that ran the graph (not launched)."""

    def gather(x, idx):
        return torch.index_select(x, 0, idx) * 2

    f = torch.compile(gather, backend="hpu_backend")
    x = torch.randn(8, 4, device="hpu")
    f(x, torch.tensor([0, 1], device="hpu"))
    with pytest.raises((IndexError, RuntimeError)):
        f(x, torch.tensor([0, 9], device="hpu"))
    torch.testing.assert_close(f(x, torch.tensor([3, 1], device="hpu")).cpu(), x.cpu()[[3, 1]] * 2)


def test_tiny_graphs_run_at_the_call_by_default():
    """A cached launch of a tiny graph costs the host less at the call than queued."""
    out = _run_script(f"""
        import sys, torch
        import habana_frameworks.torch as ht
        from habana_frameworks.torch import _recipe
        f = torch.compile(lambda t: t * 2 + 1, backend="hpu_backend")
        x = torch.randn(16, device="hpu")
        for _ in range(10):
            y = f(x)
        torch.testing.assert_close(y.cpu(), x.cpu() * 2 + 1)
        print(_recipe.stream_runs())
    """)
    assert out.splitlines()[-1] == "0"


def test_switch_off_runs_at_once():
    out = _run_script(f"""
        import sys, torch
        sys.path.insert(0, {HERE!r})
        import habana_frameworks.torch as ht
        from habana_frameworks.torch import _recipe
        from test_async_launch_s22 import _pure
        f = torch.compile(_pure, backend="hpu_backend")
        x = torch.randn(64, 64, device="hpu")
        for _ in range(3):
            f(x, x)
        print(_recipe.stream_runs())
    """, HPUSIM_ASYNC_LAUNCH="0", HPUSIM_ASYNC_MIN_US="0")
    assert out.splitlines()[-1] == "0"


def test_threads_share_the_stream_safely():
    import threading

    f = torch.compile(_pure, backend="hpu_backend")
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            g = torch.Generator().manual_seed(seed)
            for _ in range(5):
                x, w = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
                torch.testing.assert_close(f(x.to("hpu"), w.to("hpu")).cpu(), _pure(x, w), rtol=1e-4, atol=1e-4)
        except BaseException as e:  # reported below
            errors.append(e)

    f(torch.randn(64, 64, device="hpu"), torch.randn(64, 64, device="hpu"))
    ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_class_targets_are_checked_at_the_launch():
    """A forward with cross_entropy launches after a host scan of its class targets: a bad
    target raises IndexError at the call (as on CPU), inputs untouched; good ones run."""
    torch.manual_seed(0)
    model = _mlp().to("hpu")

    def fwd(x, y):
        return torch.nn.functional.cross_entropy(model(x), y, ignore_index=7)

    f = torch.compile(fwd, backend="hpu_backend")
    x = torch.randn(16, 48)
    y = torch.randint(0, 10, (16,))
    with torch.no_grad():
        ref = torch.nn.functional.cross_entropy(_mlp()(x), y, ignore_index=7)
        for _ in range(4):  # the recipe's first runs are timed at the call
            torch.testing.assert_close(f(x.to("hpu"), y.to("hpu")).cpu(), ref, rtol=1e-5, atol=1e-6)
        before = _runs()
        for bad in (10, -1, 123):
            yb = y.clone()
            yb[5] = bad
            yh = yb.to("hpu")
            with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
                f(x.to("hpu"), yh)
            torch.testing.assert_close(yh.cpu(), yb)
        yi = y.clone()
        yi[3] = 7  # the ignored class is no error
        ref_i = torch.nn.functional.cross_entropy(_mlp()(x), yi, ignore_index=7)
        torch.testing.assert_close(f(x.to("hpu"), yi.to("hpu")).cpu(), ref_i, rtol=1e-5, atol=1e-6)
        assert _runs() > before, "the checked forward should launch"
        # a non-contiguous target: not scanned on the host, the kernel checks it at the call
        y2 = torch.stack([y, y], 1).to("hpu")[:, 0]
        torch.testing.assert_close(f(x.to("hpu"), y2).cpu(), ref, rtol=1e-5, atol=1e-6)
