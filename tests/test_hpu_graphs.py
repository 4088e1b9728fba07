"""HPU graphs (habana_frameworks.torch.hpu.graphs, re-exported by torch.hpu).

The Lightning HPU guide's HPU-graph examples (lightning-habana examples/pytorch/hpu_graphs.py)
as plain PyTorch loops, checked against the same loops on CPU, in lazy mode (Makefile's
second pass); the eager-mode errors in the first pass."""
import copy
import random

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import habana_frameworks.torch.core as htcore
import habana_frameworks.torch.hpu as hthpu
from habana_frameworks.torch.hpu import graphs
from habana_frameworks.torch.utils.internal import is_lazy

lazy_only = pytest.mark.skipif(not is_lazy(), reason="HPU graphs run in lazy mode (PT_HPU_LAZY_MODE=1)")
eager_only = pytest.mark.skipif(is_lazy(), reason="eager-mode behaviour")


class Net(nn.Module):
    """The guide's model (smaller): flatten, fc1, relu, dropout, fc2, mm by identity, log_softmax."""

    def __init__(self, p: float = 0.0, hidden: int = 64):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(hidden, 10)
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = self.dropout(F.relu(self.fc1(x)))
        x = self.fc2(x)
        x = torch.mm(x, torch.eye(x.shape[1], device=x.device, dtype=x.dtype))
        return F.log_softmax(x, dim=1)


def batches(n, bs=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(bs, 1, 28, 28, generator=g), torch.randint(0, 10, (bs,), generator=g)) for _ in range(n)]


def pair(seed=0, **kw):
    torch.manual_seed(seed)
    cpu = Net(**kw)
    return copy.deepcopy(cpu).to("hpu"), cpu


def assert_params_close(hmodel, cmodel, tol=2e-5):
    for (name, p), q in zip(hmodel.named_parameters(), cmodel.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=tol, atol=tol, msg=name)


def cpu_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def hpu_step(model, opt, x, y):
    """An eager lazy-mode step on hpu (the model may replay graphs inside)."""
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x.to("hpu")), y.to("hpu"))
    loss.backward()
    opt.step()
    htcore.mark_step()
    return loss.detach()


# ----------------------------------------------------------------------------------------
# Eager mode: the bridge's errors


@eager_only
def test_eager_mode_raises_the_bridges_errors():
    assert torch.hpu.HPUGraph is graphs.HPUGraph and hthpu.wrap_in_hpu_graph is graphs.wrap_in_hpu_graph
    with pytest.raises(RuntimeError, match=r"^HPUGraph class is available in lazy mode only\.$"):
        torch.hpu.HPUGraph()
    with pytest.raises(RuntimeError, match=r"^Context-manager for HPUGraph is available in lazy mode only\.$"):
        torch.hpu.graph(None)
    model = hthpu.wrap_in_hpu_graph(nn.Linear(4, 4).to("hpu"))
    with pytest.raises(RuntimeError, match="HPUGraph class is available in lazy mode only"):
        model(torch.randn(2, 4, device="hpu"))
    # ModuleCacher caches only in lazy mode: eager runs the original forward.
    m = hthpu.ModuleCacher(max_graphs=2)(model=nn.Linear(4, 4).to("hpu"), inplace=True)
    x = torch.randn(2, 4)
    out = m(x.to("hpu"))
    out.sum().backward()
    assert not hthpu.is_current_stream_capturing()


# ----------------------------------------------------------------------------------------
# Training


@lazy_only
def test_training_capture_and_replay_with_optimizer_inside():
    hmodel, cmodel = pair(1)
    hopt = torch.optim.Adadelta(hmodel.parameters(), lr=0.5)
    copt = torch.optim.Adadelta(cmodel.parameters(), lr=0.5)
    data = batches(6)
    static_x = torch.zeros(32, 1, 28, 28, device="hpu")
    static_y = torch.zeros(32, dtype=torch.int64, device="hpu")
    g = torch.hpu.HPUGraph()
    for i, (x, y) in enumerate(data):
        closs = cpu_step(cmodel, copt, x, y)
        if i == 0:  # warm-up: the optimizer makes its state
            static_x.copy_(x)
            static_y.copy_(y)
            hopt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(hmodel(static_x), static_y)
            loss.backward()
            hopt.step()
            htcore.mark_step()
        elif i == 1:  # capture (the ops also run)
            static_x.copy_(x)
            static_y.copy_(y)
            hopt.zero_grad(set_to_none=True)
            with torch.hpu.graph(g):
                assert hthpu.is_current_stream_capturing()
                static_loss = F.cross_entropy(hmodel(static_x), static_y)
                static_loss.backward()
                hopt.step()
            loss = static_loss
        else:  # replay over data copied into the static inputs
            static_x.copy_(x)
            static_y.copy_(y)
            g.replay()
            loss = static_loss
        torch.testing.assert_close(loss.cpu(), closs, rtol=1e-5, atol=1e-5)
    assert_params_close(hmodel, cmodel)
    assert g._recipe.stats["nodes"] > 20


def _lightning_flow(model, opt, data, graphs_on: bool, dev: str) -> tuple[list[float], list[float]]:
    """lightning-habana's TRAIN_CAPTURE_AND_REPLAY test model (test_hpu_graphs.py) as a plain
    loop: a warm-up step and the capture both run on the zero-filled static tensors (the
    test copies data in only before replays), then replays over real batches; validation
    under inference_mode computes an accuracy on whatever the static tensors hold at batch
    0, replays its not-yet-captured graph, captures at batch 1 and replays at batch 2.
    Without graphs, a capture and a replay are the same code run directly.
    Returns the losses and the accuracies the test logs."""
    bs = data[0][0].shape[0]
    si = torch.zeros(bs, 1, 28, 28, device=dev)
    st = torch.zeros(bs, dtype=torch.int64, device=dev)
    gt, gv = (torch.hpu.HPUGraph(), torch.hpu.HPUGraph()) if graphs_on else (None, None)

    def train():
        return F.cross_entropy(model(si), st)

    losses, accs = [], []
    model.train()
    opt.zero_grad(set_to_none=True)  # batch 0: warm-up
    loss = train()
    loss.backward()
    opt.step()
    losses.append(float(loss))
    opt.zero_grad(set_to_none=True)  # batch 1: capture
    if graphs_on:
        with torch.hpu.graph(gt):
            static_loss = train()
            static_loss.backward()
            opt.step()
    else:
        static_loss = train()
        static_loss.backward()
        opt.step()
    losses.append(float(static_loss))
    for x, y in data[:3]:  # replays
        si.copy_(x.to(dev))
        st.copy_(y.to(dev))
        if graphs_on:
            gt.replay()
        else:
            opt.zero_grad(set_to_none=True)
            static_loss = train()
            static_loss.backward()
            opt.step()
        losses.append(float(static_loss))

    def accuracy():
        return torch.sum(torch.eq(torch.argmax(model(si), -1), st).to(torch.float32)) / len(st)

    model.eval()
    with torch.inference_mode():
        for bi, (x, y) in enumerate(data[3:6]):
            if bi == 0:
                acc = accuracy()
            if bi == 1:
                if graphs_on:
                    with torch.hpu.graph(gv):
                        acc = accuracy()
                else:
                    acc = accuracy()
            else:
                si.copy_(x.to(dev))
                st.copy_(y.to(dev))
                if graphs_on:
                    gv.replay()  # at batch 0 nothing is captured yet: a step marker only
                elif bi == 2:
                    acc = accuracy()
                accs.append(float(acc))
    return losses, accs


@lazy_only
def test_lightning_capture_and_replay_flow_matches_cpu_and_hpu_without_graphs():
    # lightning-habana's test_hpu_graph_accuracy_train[baseline_vs_capture_and_replay]
    # compares this model's val_acc with a baseline trained on real batches throughout;
    # this one trains twice on the zero static tensors, so its accuracy is its own. What
    # hpusim owes: replays compute what the same code computes run directly, on CPU and
    # (dropout included, same random draws) on hpu.
    data = [(x, y % 10) for x, y in batches(6, bs=48, seed=4)]
    for x, y in data:
        x.mul_(0.5).add_(y.view(-1, 1, 1, 1).float() / 5)  # learnable: the class shifts the pixels
    torch.manual_seed(3)
    cpu = Net(p=0.0)
    hg = copy.deepcopy(cpu).to("hpu")
    c_losses, c_accs = _lightning_flow(cpu, torch.optim.Adadelta(cpu.parameters(), lr=0.5), data, False, "cpu")
    g_losses, g_accs = _lightning_flow(hg, torch.optim.Adadelta(hg.parameters(), lr=0.5), data, True, "hpu")
    torch.testing.assert_close(g_losses, c_losses, rtol=1e-4, atol=1e-4)
    assert g_accs == pytest.approx(c_accs, abs=1e-6)
    assert_params_close(hg, cpu, tol=1e-4)
    # Dropout inside the training graph: replays draw as the direct code does.
    torch.manual_seed(5)
    base = Net(p=0.5)
    hg, hn = copy.deepcopy(base).to("hpu"), copy.deepcopy(base).to("hpu")
    torch.hpu.manual_seed(11)
    n_losses, n_accs = _lightning_flow(hn, torch.optim.Adadelta(hn.parameters(), lr=0.5), data, False, "hpu")
    torch.hpu.manual_seed(11)
    g_losses, g_accs = _lightning_flow(hg, torch.optim.Adadelta(hg.parameters(), lr=0.5), data, True, "hpu")
    torch.testing.assert_close(g_losses, n_losses, rtol=1e-5, atol=1e-5)
    assert g_accs == pytest.approx(n_accs, abs=1e-6)
    assert_params_close(hg, hn.cpu(), tol=1e-5)


@lazy_only
def test_mark_step_inside_a_capture_ends_a_segment_and_replay_runs_them_in_order():
    # As on the bridge: each mark_step segment of the capture is a recipe of its own.
    hmodel, cmodel = pair(6)
    hopt = torch.optim.AdamW(hmodel.parameters(), lr=1e-2, capturable=True)  # beta ** step on hpu
    copt = torch.optim.AdamW(cmodel.parameters(), lr=1e-2)
    data = batches(5, seed=8)
    torch.testing.assert_close(hpu_step(hmodel, hopt, *data[0]).cpu(), cpu_step(cmodel, copt, *data[0]),
                               rtol=1e-5, atol=1e-5)  # warm-up: the optimizer makes its state
    static_x, static_y = data[1][0].to("hpu"), data[1][1].to("hpu")
    closs = cpu_step(cmodel, copt, *data[1])
    g = torch.hpu.HPUGraph()
    hopt.zero_grad(set_to_none=True)
    with torch.hpu.graph(g):
        static_loss = F.cross_entropy(hmodel(static_x), static_y)
        htcore.mark_step()
        static_loss.backward()
        htcore.mark_step()
        hopt.step()
    assert g._recipe.stats["segments"] == 3
    torch.testing.assert_close(static_loss.cpu(), closs, rtol=1e-5, atol=1e-5)
    for x, y in data[2:]:
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        torch.testing.assert_close(static_loss.cpu(), cpu_step(cmodel, copt, x, y), rtol=1e-5, atol=1e-5)
    assert_params_close(hmodel, cmodel)


@lazy_only
def test_capture_turns_refined_dynamic_shapes_off():
    hthpu.enable_dynamic_shape()
    x = torch.ones(4, device="hpu")
    g = torch.hpu.HPUGraph()
    with torch.hpu.graph(g):
        y = x * 2.0
    assert not hthpu.get_dynamic_shape_status()  # and it stays off, as on the bridge
    g.replay()
    assert torch.equal(y.cpu(), torch.full((4,), 2.0))


@lazy_only
def test_training_make_graphed_callables():
    hmodel, cmodel = pair(2)
    sample = torch.randn(32, 1, 28, 28, device="hpu")
    hmodel = torch.hpu.make_graphed_callables(hmodel, (sample,))
    hopt = torch.optim.SGD(hmodel.parameters(), lr=0.1, momentum=0.9)
    copt = torch.optim.SGD(cmodel.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches(5, seed=3):
        torch.testing.assert_close(hpu_step(hmodel, hopt, x, y).cpu(), cpu_step(cmodel, copt, x, y),
                                   rtol=1e-5, atol=1e-5)
    assert_params_close(hmodel, cmodel)
    # Out of the captured training state the original forward runs.
    hmodel.eval()
    x = torch.randn(4, 1, 28, 28)
    torch.testing.assert_close(hmodel(x.to("hpu")).cpu(), cmodel.eval()(x), rtol=1e-5, atol=1e-5)


@lazy_only
def test_training_module_cacher_with_changing_input_shapes():
    hmodel, cmodel = pair(3)
    cacher = hthpu.ModuleCacher(max_graphs=10)
    hmodel = cacher(model=hmodel, inplace=True)
    hopt = torch.optim.SGD(hmodel.parameters(), lr=0.05)
    copt = torch.optim.SGD(cmodel.parameters(), lr=0.05)
    data = batches(3, bs=16, seed=4) + batches(3, bs=24, seed=5)
    order = [0, 3, 1, 4, 2, 5]  # the two batch sizes alternate
    for k in order:
        x, y = data[k]
        torch.testing.assert_close(hpu_step(hmodel, hopt, x, y).cpu(), cpu_step(cmodel, copt, x, y),
                                   rtol=1e-5, atol=1e-5)
    assert_params_close(hmodel, cmodel)
    assert len(cacher.model_dict) == 2
    assert sum(cacher.cached_hits_dict.values()) == 6 and cacher.uncached_train_hits == 0


@lazy_only
def test_module_cacher_max_graphs_and_eval_run_uncached():
    hmodel, cmodel = pair(4)
    cacher = hthpu.ModuleCacher(max_graphs=1)
    hmodel = cacher(model=hmodel, inplace=True)
    for bs in (8, 12, 8):
        x = torch.randn(bs, 1, 28, 28)
        out = hmodel(x.to("hpu"))
        out.sum().backward()
        torch.testing.assert_close(out.detach().cpu(), cmodel(x), rtol=1e-5, atol=1e-5)
    assert len(cacher.model_dict) == 1 and cacher.uncached_train_hits == 1
    with torch.no_grad():
        hmodel(torch.randn(8, 1, 28, 28, device="hpu"))
    assert cacher.uncached_train_hits == 2


@lazy_only
def test_dynamic_control_flow_between_cached_modules():
    """The guide's dynamic_control_flow step: a graphed module, then one of two graphed
    modules chosen on the host per step, then loss and optimizer outside any graph."""
    hmodel, cmodel = pair(5)
    h2, h3 = nn.Identity(), nn.ReLU()
    hthpu.ModuleCacher(max_graphs=10)(model=hmodel, inplace=True)
    hthpu.ModuleCacher(max_graphs=10)(model=h2, inplace=True)
    hthpu.ModuleCacher(max_graphs=10)(model=h3, inplace=True)
    hopt = torch.optim.SGD(hmodel.parameters(), lr=0.05)
    copt = torch.optim.SGD(cmodel.parameters(), lr=0.05)
    rng = random.Random(7)
    for x, y in batches(6, bs=16, seed=6):
        branch = rng.random() > 0.5
        hopt.zero_grad(set_to_none=True)
        t = hmodel(torch.flatten(x.to("hpu"), 1))
        t = h2(t) if branch else h3(t)
        loss = F.cross_entropy(t, y.to("hpu"))
        loss.backward()
        hopt.step()
        htcore.mark_step()
        copt.zero_grad(set_to_none=True)
        c = cmodel(torch.flatten(x, 1))
        c = c if branch else F.relu(c)
        closs = F.cross_entropy(c, y)
        closs.backward()
        copt.step()
        torch.testing.assert_close(loss.detach().cpu(), closs.detach(), rtol=1e-5, atol=1e-5)
    assert_params_close(hmodel, cmodel)


@lazy_only
def test_dynamic_ops_between_cached_modules():
    """The guide's dynamic_ops step: a data-dependent op between two graphed modules."""
    hmodel, cmodel = pair(6)
    hthpu.ModuleCacher(max_graphs=10)(model=hmodel, inplace=True)
    for x, _ in batches(3, bs=8, seed=8):
        t = hmodel(torch.flatten(x.to("hpu"), 1))
        htcore.mark_step()
        neg = t[torch.where(t < 0)]
        htcore.mark_step()
        c = cmodel(torch.flatten(x, 1))
        torch.testing.assert_close(neg.detach().cpu(), c[torch.where(c < 0)].detach(), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------------------
# Inference


@lazy_only
def test_inference_capture_begin_end_and_replay():
    hmodel, cmodel = pair(7)
    hmodel.eval()
    cmodel.eval()
    static_x = torch.randn(32, 1, 28, 28, device="hpu")
    g = torch.hpu.HPUGraph()
    with torch.no_grad():
        g.capture_begin()
        static_pred = hmodel(static_x)
        g.capture_end()
        for x, _ in batches(3, seed=9):
            htcore.mark_step()
            static_x.copy_(x)
            g.replay()
            torch.testing.assert_close(static_pred.cpu(), cmodel(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="GRAPH:: graph Capture already in progress"):
        g2, g3 = torch.hpu.HPUGraph(), torch.hpu.HPUGraph()
        g2.capture_begin()
        try:
            g3.capture_begin()
        finally:
            g2.capture_end()


@lazy_only
@pytest.mark.parametrize("disable_tensor_cache", [False, True])
def test_inference_wrap_in_hpu_graph(disable_tensor_cache):
    hmodel, cmodel = pair(8)
    hmodel.eval()
    cmodel.eval()
    hmodel = torch.hpu.wrap_in_hpu_graph(hmodel, asynchronous=False, disable_tensor_cache=disable_tensor_cache)
    with torch.no_grad():
        outs = []
        for x, _ in batches(3, bs=16, seed=10) + batches(2, bs=8, seed=11):
            out = hmodel(x.to("hpu"))
            torch.testing.assert_close(out.cpu(), cmodel(x), rtol=1e-5, atol=1e-5)
            outs.append(out)
    # One graph per input shape; a hit returns the graph's static output (overwritten).
    assert outs[1] is outs[0] and outs[2] is outs[0] and outs[4] is outs[3] and outs[3] is not outs[0]
    hmodel.clear_inputs()
    x = torch.randn(16, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(hmodel(x.to("hpu")).cpu(), cmodel(x), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(hmodel(x.to("hpu"), bypass_hpu_graphs=True).cpu(), cmodel(x),
                                   rtol=1e-5, atol=1e-5)
    hmodel.clear_cache()


@lazy_only
def test_wrap_in_hpu_graph_hits_copy_and_replay_in_one_call_or_fall_back_to_copy_():
    """A hit copies the new inputs into the static ones and launches in one call; an input
    of another dtype or layout (same key) goes through copy_ as on the bridge."""
    w = torch.randn(6, 5)
    hw = w.to("hpu")
    f = hthpu.wrap_in_hpu_graph_func(lambda a, b: torch.relu(a @ hw) * b)
    a0, b0 = torch.randn(4, 6), torch.randn(4, 5)
    ha, hb = a0.to("hpu"), b0.to("hpu")
    out = f(ha, hb)
    ref = lambda a, b: torch.relu(a @ w) * b  # noqa: E731
    torch.testing.assert_close(out.cpu(), ref(a0, b0), rtol=1e-5, atol=1e-5)
    for i in range(3):
        a, b = torch.randn(4, 6), torch.randn(4, 5)
        assert f(a.to("hpu"), b.to("hpu")) is out
        torch.testing.assert_close(out.cpu(), ref(a, b), rtol=1e-5, atol=1e-5)
    # The static inputs now hold the last inputs; passing them again reads them in place.
    torch.testing.assert_close(ha.cpu(), a)
    torch.testing.assert_close(f(ha, hb).cpu(), ref(a, b), rtol=1e-5, atol=1e-5)
    # Another dtype (not in the key) and a transposed layout: copy_ converts, then replay.
    a, b = torch.randn(4, 6, dtype=torch.float64), torch.randn(5, 4).t()
    torch.testing.assert_close(f(a.to("hpu"), b.to("hpu")).cpu(), ref(a.float(), b), rtol=1e-5, atol=1e-5)
    a, b = torch.randn(4, 6), torch.randn(4, 5)
    torch.testing.assert_close(f(a.to("hpu"), b.to("hpu")).cpu(), ref(a, b), rtol=1e-5, atol=1e-5)


@lazy_only
def test_wrap_in_hpu_graph_hit_path_runs_in_cpp_and_python_decides_the_rest(monkeypatch):
    """A hit with positional hpu tensors replays in C++ (ReplayCache), its copies into the
    static inputs queued with the graph; sources sharing a storage, views and keyword
    arguments take the bridge's Python path; clear_cache empties both."""
    w = torch.randn(6, 6)
    hw = w.to("hpu")
    f = hthpu.wrap_in_hpu_graph_func(lambda a, b: torch.relu(a @ hw) + b)
    ref = lambda a, b: torch.relu(a @ w) + b  # noqa: E731
    slow = []
    orig = graphs.wrapped_hpugraph_forward
    monkeypatch.setattr(graphs, "wrapped_hpugraph_forward", lambda *a, **k: slow.append(1) or orig(*a, **k))
    a0, b0 = torch.randn(4, 6), torch.randn(4, 6)
    ha0 = a0.to("hpu")
    out = f(ha0, b0.to("hpu"))
    torch.testing.assert_close(out.cpu(), ref(a0, b0), rtol=1e-5, atol=1e-5)
    for _ in range(3):
        a, b = torch.randn(4, 6), torch.randn(4, 6)
        assert f(a.to("hpu"), b.to("hpu")) is out
        torch.testing.assert_close(out.cpu(), ref(a, b), rtol=1e-5, atol=1e-5)
    assert len(slow) == 1  # the capture; the hits never ran Python
    torch.testing.assert_close(ha0.cpu(), a)  # the static inputs hold the last inputs
    a = torch.randn(4, 6)
    ha = a.to("hpu")
    assert f(ha, ha) is out  # one storage for both sources: copied one by one
    torch.testing.assert_close(out.cpu(), ref(a, a), rtol=1e-5, atol=1e-5)
    assert f(ha0, ha) is out  # a static input itself
    torch.testing.assert_close(out.cpu(), ref(a, a), rtol=1e-5, atol=1e-5)
    for _ in range(2):  # the graph's own output as the next input (memory it writes)
        prev = out.cpu()
        assert f(out, ha) is out
        torch.testing.assert_close(out.cpu(), ref(prev, a), rtol=1e-5, atol=1e-5)
    assert len(slow) == 1
    # A view is keyed by its layout too (a graph of its own); its calls take Python's path.
    views = []
    for _ in range(2):
        big, b = torch.randn(8, 6), torch.randn(4, 6)
        views.append(f(big.to("hpu")[2:6], b.to("hpu")))
        torch.testing.assert_close(views[-1].cpu(), ref(big[2:6], b), rtol=1e-5, atol=1e-5)
    assert views[0] is not out and views[1] is views[0] and len(slow) == 3
    for _ in range(2):
        a, b = torch.randn(4, 6), torch.randn(4, 6)
        torch.testing.assert_close(f(a.to("hpu"), b=b.to("hpu")).cpu(), ref(a, b), rtol=1e-5, atol=1e-5)
    assert len(slow) == 5
    f.clear_cache()
    out2 = f(a.to("hpu"), b.to("hpu"))  # captured again
    assert out2 is not out and len(slow) == 6
    torch.testing.assert_close(out2.cpu(), ref(a, b), rtol=1e-5, atol=1e-5)
    assert f(b.to("hpu"), a.to("hpu")) is out2 and len(slow) == 6
    with torch.autocast("hpu", dtype=torch.bfloat16):  # the autocast state is part of the key
        f(a.to("hpu"), b.to("hpu"))
    assert len(slow) == 7


@lazy_only
def test_wrap_in_hpu_graph_max_graphs_runs_the_rest_eagerly():
    hmodel, cmodel = pair(9)
    calls = []
    orig = hmodel.forward

    def counting(x):
        calls.append(x.shape[0])
        return orig(x)
    hmodel.forward = counting
    hmodel = hthpu.wrap_in_hpu_graph(hmodel, max_graphs=1)
    with torch.no_grad():
        for bs in (4, 6, 4, 6):
            x = torch.randn(bs, 1, 28, 28)
            torch.testing.assert_close(hmodel(x.to("hpu")).cpu(), cmodel(x), rtol=1e-5, atol=1e-5)
    assert calls == [4, 6, 6]  # captured once at 4 (replayed after), 6 never cached


@lazy_only
def test_wrap_in_hpu_graph_func_and_dry_run():
    w = torch.randn(8, 8)
    hw = w.to("hpu")
    f = hthpu.wrap_in_hpu_graph_func(lambda a, b: torch.tanh(a @ hw) + b, dry_run=True)
    for _ in range(3):
        a, b = torch.randn(4, 8), torch.randn(4, 8)
        torch.testing.assert_close(f(a.to("hpu"), b.to("hpu")).cpu(), torch.tanh(a @ w) + b, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------------------
# What a graph cannot hold, randomness, replay checks


@lazy_only
def test_cpu_fallback_during_capture_raises_the_bridges_error():
    x = torch.randn(4, 4, device="hpu")
    g = torch.hpu.HPUGraph()
    with pytest.raises(RuntimeError, match="cpu fallback is not supported during hpu graph capturing"):
        with torch.hpu.graph(g):
            torch.linalg.matrix_exp(x)
    assert not hthpu.is_current_stream_capturing()
    with torch.hpu.graph(g):  # the next capture works
        y = x * 2.0
    x.fill_(1.0)
    g.replay()
    assert torch.equal(y.cpu(), torch.full((4, 4), 2.0))


@lazy_only
def test_hccl_collective_during_capture_raises_the_bridges_error(monkeypatch):
    import socket

    import torch.distributed as dist

    import habana_frameworks.torch.distributed.hccl  # noqa: F401

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("PT_HPU_ENABLE_LAZY_COLLECTIVES", raising=False)
    dist.init_process_group("hccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        t = torch.ones(4, device="hpu")
        g = hthpu.HPUGraph()
        with pytest.raises(RuntimeError, match="^collective nonSFG is not supported during hpu graph capturing"):
            with hthpu.graph(g):
                u = t * 2
                dist.all_reduce(u)
        # hpusim cannot record them with lazy collectives either: a clear error, not a
        # graph that would silently skip the collective at replay.
        monkeypatch.setenv("PT_HPU_ENABLE_LAZY_COLLECTIVES", "true")
        with pytest.raises(RuntimeError, match="cannot record collectives into an HPU graph"):
            with hthpu.graph(g):
                dist.all_reduce(t * 2)
        dist.all_reduce(t)  # outside a capture the group works on
        assert torch.equal(t.cpu(), torch.ones(4))
    finally:
        dist.destroy_process_group()


@lazy_only
def test_host_read_during_capture_runs_and_replay_goes_on():
    x = torch.arange(4.0, device="hpu")
    g = torch.hpu.HPUGraph()
    with torch.hpu.graph(g):
        y = x + 1.0
        assert y.sum().item() == 10.0  # read at capture time, not part of the graph
        z = y * 2.0
    x.copy_(torch.ones(4))
    g.replay()
    assert torch.equal(z.cpu(), torch.full((4,), 4.0))


@lazy_only
def test_replay_errors():
    g = torch.hpu.HPUGraph()
    g.replay()  # nothing captured yet: a step marker only, as in the bridge (no error)
    a = torch.randn(3, 3, device="hpu")
    g.capture_begin()
    g.mark_user_inputs([a])
    out = a * 3.0
    with pytest.raises(RuntimeError, match="GRAPH:: Capture in progress"):
        g.replay()
    g.capture_end()
    assert g.get_user_input_match_indices() == [0]
    b = torch.randn(3, 3)
    g.replayV3([b.to("hpu")])
    torch.testing.assert_close(out.cpu(), b * 3.0)
    with pytest.raises(ValueError, match="recipe input 0"):
        g.replayV3([torch.randn(3, 4, device="hpu")])


@lazy_only
def test_dropout_in_a_graph_draws_fresh_numbers():
    x = torch.ones(64, 64, device="hpu")
    g = torch.hpu.HPUGraph()
    with torch.hpu.graph(g):
        y = F.dropout(x, 0.5, training=True)
    first = y.cpu()
    g.replay()
    second = y.cpu()
    assert not torch.equal(first, second)
    assert 0.3 < float((second == 0).float().mean()) < 0.7


def test_input_hash_keys():
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert graphs.input_hash((a,)) == graphs.input_hash((b,))
    assert graphs.input_hash((a,)) == graphs.input_hash((b.double(),))  # dtype is not in the key
    assert graphs.input_hash((a,)) != graphs.input_hash((torch.randn(3, 2),))
    assert graphs.input_hash((a, 1)) != graphs.input_hash((a, 2))
    assert graphs.input_hash({"x": a}) == graphs.input_hash({"x": b})
    with torch.autocast("hpu", dtype=torch.bfloat16):
        k = graphs.input_hash((a,))
    assert k != graphs.input_hash((a,))
    d, s = {"x": [torch.zeros(2)]}, {"x": [torch.ones(2)]}
    graphs.copy_to(d, s)
    assert torch.equal(d["x"][0], torch.ones(2))


@lazy_only
def test_failing_replay_is_raised_at_the_next_trigger_naming_the_op():
    table = torch.randn(10, 3)
    ht_table = table.to("hpu")
    idx = torch.tensor([1, 2], device="hpu")
    g = torch.hpu.HPUGraph()
    g.capture_begin()
    g.mark_user_inputs([idx])
    out = torch.index_select(ht_table, 0, idx) * 2.0
    g.capture_end()
    g.replayV3([torch.tensor([0, 9], device="hpu")])
    torch.testing.assert_close(out.cpu(), table[[0, 9]] * 2.0)
    bad = torch.tensor([1, 99], device="hpu")
    g.replayV3([bad])  # queued: returns at once
    # The class CPU raises for the op (IndexError), as for any lazy graph's failure.
    with pytest.raises(IndexError, match="index_select"):
        htcore.mark_step()
        torch.hpu.synchronize()
    # The process goes on: new work runs, and what the graph reads is unchanged.
    assert torch.equal((ht_table + 1.0).cpu(), table + 1.0)
    assert torch.equal(bad.cpu(), torch.tensor([1, 99]))
    # The output holds no valid data: reading it says so, naming the failed op.
    with pytest.raises(IndexError, match="holds no valid data.*index_select"):
        out.cpu()
    # A replay that overwrites it makes it valid again.
    g.replayV3([torch.tensor([3, 4], device="hpu")])
    torch.testing.assert_close(out.cpu(), table[[3, 4]] * 2.0)


@lazy_only
def test_failed_replay_leaves_state_it_would_update_clearly_invalid():
    # A graph that reads and updates a tensor in place (a parameter, say): after a failed
    # replay, replaying again raises instead of running over stale values.
    table = torch.randn(10, 3)
    ht_table = table.to("hpu")
    acc = torch.zeros(3, device="hpu")
    idx = torch.tensor([1, 2], device="hpu")
    htcore.mark_step()
    g = torch.hpu.HPUGraph()
    with torch.hpu.graph(g):
        acc.add_(torch.index_select(ht_table, 0, idx).sum(0))
    idx.copy_(torch.tensor([0, 99]))
    g.replay()
    with pytest.raises(IndexError, match="index_select"):
        torch.hpu.synchronize()
    idx.copy_(torch.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="holds no valid data"):
        g.replay()
        torch.hpu.synchronize()
    assert torch.equal(idx.cpu(), torch.tensor([0, 1]))
