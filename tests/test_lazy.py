"""Lazy mode (PT_HPU_LAZY_MODE=1): recording, every trigger, step closures, asynchronous
launch, deferred frees, failures raised at the trigger, in-place ops through views and
optimizer steps. These run in the lazy pytest pass (`make test-py` runs one with
PT_HPU_LAZY_MODE=1); fresh-process behaviour is in test_lazy_process.py."""
from __future__ import annotations

import pytest
import torch

import habana_frameworks.torch.core as htcore
from habana_frameworks.torch import _lazy, _native
from habana_frameworks.torch.utils.internal import is_lazy

pytestmark = pytest.mark.skipif(not is_lazy(), reason="lazy pass only (PT_HPU_LAZY_MODE=1)")


@pytest.fixture(autouse=True)
def _clean():
    htcore.mark_step(sync=True)
    yield
    try:
        htcore.mark_step(sync=True)
    except RuntimeError:
        pass


def _pending_chain():
    """Record a + b (pending) and return it with its CPU reference."""
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    b = torch.full((3, 4), 0.5)
    ha, hb = a.to("hpu"), b.to("hpu")
    out = (ha * 2 + hb).relu()
    assert _lazy.pending_ops() > 0, "ops ran eagerly instead of being recorded"
    return out, (a * 2 + b).relu()


def test_is_lazy_and_ops_are_recorded():
    assert htcore.is_lazy()
    out, ref = _pending_chain()
    n = _lazy.pending_ops()
    _ = out + 1
    assert _lazy.pending_ops() == n + 1


def test_mark_step_launches_pending_graph():
    out, ref = _pending_chain()
    launched = _lazy.stats()["launched"]
    htcore.mark_step()
    assert _lazy.pending_ops() == 0
    assert _lazy.stats()["launched"] == launched + 1
    htcore.mark_step(sync=True)
    assert torch.equal(out.cpu(), ref)


@pytest.mark.parametrize("read", ["cpu", "item", "print", "tolist", "control_flow", "numpy"])
def test_host_reads_trigger(read, capsys):
    out, ref = _pending_chain()
    if read == "cpu":
        assert torch.equal(out.cpu(), ref)
    elif read == "item":
        assert out.sum().item() == ref.sum().item()
    elif read == "print":
        print(out)
        assert "hpu" in capsys.readouterr().out
    elif read == "tolist":
        assert out.tolist() == ref.tolist()
    elif read == "control_flow":
        flag = bool((out > 20).any())
        assert flag == bool((ref > 20).any())
    else:
        assert (out.cpu().numpy() == ref.numpy()).all()
    assert _lazy.pending_ops() == 0


def test_synchronize_is_a_step_marker():
    out, ref = _pending_chain()
    torch.hpu.synchronize()
    assert _lazy.pending_ops() == 0
    assert _lazy.stats()["inflight"] == 0
    assert torch.equal(out.cpu(), ref)


def test_cpu_fallback_is_a_counted_graph_break():
    out, ref = _pending_chain()
    breaks = _lazy.stats()["graph_breaks"]
    y = torch.linalg.matrix_exp((out + 2).reshape(3, 2, 2) / 20)  # CPU fallback, as on Gaudi
    assert _lazy.stats()["graph_breaks"] == breaks + 1
    assert torch.allclose(y.cpu(), torch.linalg.matrix_exp((ref + 2).reshape(3, 2, 2) / 20), atol=1e-6)


def test_step_closures_run_after_mark_step_in_order():
    out, ref = _pending_chain()
    seen = []
    htcore.add_step_closure(lambda t, tag: seen.append((tag, t.sum().item())), args=(out, "first"))
    htcore.add_step_closure(lambda: seen.append(("second", _lazy.pending_ops())))
    assert seen == []
    htcore.mark_step()
    assert seen == [("first", ref.sum().item()), ("second", 0)]
    htcore.mark_step()
    assert len(seen) == 2  # closures run once


def test_iter_mark_step():
    out, ref = _pending_chain()
    htcore.iter_mark_step()
    assert _lazy.pending_ops() == 0
    assert torch.equal(out.cpu(), ref)


def test_launch_is_asynchronous():
    a = torch.randn(768, 768).to("hpu")
    htcore.mark_step(sync=True)
    x = a
    for _ in range(24):
        x = torch.mm(x, a) * 1e-2
    htcore.mark_step()  # returns once launched, not once run
    s = _lazy.stats()
    assert s["inflight"] >= 1, "mark_step() waited for the graph"
    y = x + 1  # the host records the next graph meanwhile
    assert _lazy.pending_ops() == 1
    htcore.mark_step(sync=True)
    assert _lazy.stats()["inflight"] == 0
    assert torch.isfinite(y.cpu()).all()


def test_host_read_waits_only_for_the_value_it_reads():
    # A read of a value a launched graph produced early returns while the rest of the
    # graph still runs (the loss before the backward); the host records on meanwhile.
    a_cpu = torch.randn(768, 768)
    a = a_cpu.to("hpu")
    htcore.mark_step(sync=True)
    early = a[0, :4] * 2
    x = a
    for _ in range(24):
        x = torch.mm(x, a) * 1e-2
    htcore.mark_step()
    assert torch.equal(early.cpu(), a_cpu[0, :4] * 2)
    assert _lazy.stats()["inflight"] >= 1, "the read waited for the whole graph"
    htcore.mark_step(sync=True)
    assert torch.isfinite(x.cpu()).all()


def test_values_written_before_a_failure_stay_valid():
    a = torch.ones(8).to("hpu")
    out = torch.empty(8, device="hpu")
    htcore.mark_step(sync=True)
    early = a[:4] + 1  # another shape: not fused with the failing op
    _native.run("ew.add", (out, a, a), (99,))  # fails when run, after `early` is written
    with pytest.raises(RuntimeError, match="ew.add"):
        htcore.mark_step(sync=True)
    assert torch.equal(early.cpu(), torch.full((4,), 2.0))
    with pytest.raises(RuntimeError, match="no valid data"):
        out.cpu()


def test_read_that_launches_a_failing_graph_raises():
    # The read is this graph's trigger: it waits for all of it and raises its failure.
    a = torch.ones(8).to("hpu")
    out = torch.empty(8, device="hpu")
    htcore.mark_step(sync=True)
    early = a[:4] + 1
    _native.run("ew.add", (out, a, a), (99,))
    with pytest.raises(RuntimeError, match="ew.add"):
        early.cpu()


def test_frees_are_deferred_until_the_graph_ran():
    a = torch.ones(1 << 18).to("hpu")  # 1 MiB
    htcore.mark_step(sync=True)
    before = torch.hpu.memory_allocated()
    t = a * 3
    u = t + 1
    del t  # still needed by the pending graph
    assert torch.hpu.memory_allocated() == before + 2 * (1 << 20)
    htcore.mark_step(sync=True)
    assert torch.hpu.memory_allocated() == before + (1 << 20)
    assert u[0].item() == 4.0


def test_failed_graph_raises_at_trigger_naming_op_and_poisons_outputs():
    a = torch.ones(8).to("hpu")
    out = torch.empty(8, device="hpu")
    htcore.mark_step(sync=True)
    _native.run("ew.add", (out, a, a), (99,))  # an invalid compute dtype fails only when run
    dep = out * 2  # recorded before the failure is known
    with pytest.raises(RuntimeError, match="ew.add"):
        htcore.mark_step(sync=True)
    with pytest.raises(RuntimeError, match="no valid data"):
        out.cpu()
    with pytest.raises(RuntimeError, match="no valid data"):
        out + 1
    with pytest.raises(RuntimeError, match="no valid data"):
        dep.sum().item()
    ok = (a + 1).cpu()  # the device keeps working
    assert torch.equal(ok, torch.full((8,), 2.0))


def test_kernel_panic_in_graph_raises_at_host_read():
    a = torch.ones(4).to("hpu")
    htcore.mark_step(sync=True)
    _native.run("debug_panic", ())
    with pytest.raises(RuntimeError, match="debug_panic"):
        a.sum().item()


def test_inplace_through_views_matches_cpu():
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    h = base.to("hpu")
    for t in (base, h):
        v = t[1:4, 2:6]
        v.add_(1.5)
        t.t()[::2].mul_(-2)
        t[:, 1].copy_(t[:, 0] * 3)
        w = t.view(-1)[5:20]
        w.sub_(w.flip(0).clone())
        t.diagonal().zero_()
    assert _lazy.pending_ops() > 0
    assert torch.equal(h.cpu(), base)


def test_in_place_chain_on_overlapping_views():
    x = torch.arange(100, dtype=torch.float32)
    h = x.to("hpu")
    for t in (x, h):
        t[1:].add_(t[:-1].clone())
        t.mul_(0.5).add_(1)
        t[::3].neg_()
    assert torch.equal(h.cpu(), x)


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_optimizer_steps_match_cpu(opt_name):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    ref = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    ref.load_state_dict(model.state_dict())
    model.to("hpu")
    make = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
            "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2)}[opt_name]
    opt, ropt = make(model.parameters()), make(ref.parameters())
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        x, y = torch.randn(16, 10, generator=g), torch.randint(0, 3, (16,), generator=g)
        for m, o, dev in ((model, opt, "hpu"), (ref, ropt, "cpu")):
            o.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x.to(dev)), y.to(dev))
            loss.backward()
            if dev == "hpu":
                htcore.mark_step()
            o.step()
            if dev == "hpu":
                htcore.mark_step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.cpu(), q, rtol=1e-5, atol=1e-6)


def test_resize_of_pending_tensor_keeps_contents():
    a = torch.arange(6, dtype=torch.float32).to("hpu")
    b = a * 2  # pending
    b.resize_(12)  # grows: the old bytes are copied on the host
    assert torch.equal(b[:6].cpu(), torch.arange(6, dtype=torch.float32) * 2)


def test_h2d_source_is_captured_at_record_time():
    src = torch.arange(5, dtype=torch.float32)
    dst = torch.empty(5, device="hpu")
    pending = dst + 0  # keeps a graph pending
    dst.copy_(src)
    src.fill_(-1)  # the host buffer changes before the graph runs
    assert torch.equal(dst.cpu(), torch.arange(5, dtype=torch.float32))
    del pending
