"""hpu_backend and the strides fake tensors trace for hpu.

Fake tensors of device type hpu give elementwise results contiguous strides (torch's
`_refs.handle_noncontiguous_outputs`), while hpusim's kernels keep their inputs' layout as
CPU does; a `view` traced on such a result must still work (attention blocks of swin, maxvit,
roberta, mistral... all do `x.permute(...) * s` then `reshape`). These run in eager and in
the Makefile's lazy pass."""
import pytest
import torch
import torch.nn.functional as F

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch.dynamo.compile_backend import passes


def _compiled_matches_cpu(fn, *inputs, grad=True):
    torch._dynamo.reset()
    cpu_in = [t.clone().requires_grad_(grad and t.is_floating_point()) for t in inputs]
    hpu_in = [t.to("hpu").requires_grad_(grad and t.is_floating_point()) for t in inputs]
    ref = fn(*cpu_in)
    out = torch.compile(fn, backend="hpu_backend")(*hpu_in)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    if grad:
        ref.pow(2).sum().backward()
        out.pow(2).sum().backward()
        for h, c in zip(hpu_in, cpu_in):
            if c.grad is not None:
                torch.testing.assert_close(h.grad.cpu(), c.grad, rtol=1e-4, atol=1e-5)


def test_view_of_elementwise_result_of_a_permute():
    x = torch.randn(2, 3, 4, 5)
    _compiled_matches_cpu(lambda x: (x.permute(0, 2, 1, 3) * 2).reshape(2, 4, 15), x, grad=False)
    _compiled_matches_cpu(lambda x: ((x.permute(0, 2, 1, 3) * 2).sin() + 1).reshape(2, 4, 15), x)


def test_view_through_permutes_of_a_scaled_query():
    # maxvit's relative attention: a scaled query is unsqueezed and permuted twice, then viewed
    def fn(qkv):
        q = qkv.view(2, 16, 4, 2, 8).permute(0, 1, 3, 2, 4) * 0.25
        q = q.unsqueeze(5).permute(0, 1, 2, 5, 3, 4).permute(0, 1, 2, 3, 5, 4)
        return q.reshape(64, 4, 8).tanh()
    _compiled_matches_cpu(fn, torch.randn(2, 16, 64))


def test_attention_block_and_layer_norm_on_permuted_inputs():

    def fn(x, w):
        b, t, c = x.shape
        y = F.layer_norm(x.transpose(1, 2), (t,), w, None)  # multi-output op on a non-contiguous input
        h = (y.view(b, c, 2, t // 2).permute(0, 2, 1, 3) * 0.5).reshape(b * 2, c, t // 2)
        return torch.softmax(h @ h.transpose(1, 2), -1).reshape(b, -1)
    _compiled_matches_cpu(fn, torch.randn(2, 8, 6), torch.randn(8))


def test_non_contiguous_graph_input():
    x = torch.randn(4, 6, 5).transpose(0, 2)
    _compiled_matches_cpu(lambda x: (x.exp() - 1).reshape(-1)[::3], x)


def test_contiguous_graphs_get_no_copies(monkeypatch):
    def fn(x):
        return (x * 2).view(-1).relu()
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    with FakeTensorMode() as mode:
        traced = make_fx(fn, tracing_mode="fake")(mode.from_tensor(torch.empty(3, 4, device="hpu")))
    ctx = passes.PassContext(traced, [], "g", False, False, False)
    assert passes.pass_restride_view_inputs(ctx) is False
    # torch's own rules for hpu fakes (dense elementwise results), which hpu_backend
    # replaces with CPU's (fake_layouts.py); the pass still guards graphs traced under them
    import importlib
    for mod in (importlib.import_module("torch._refs"), importlib.import_module("torch._subclasses.fake_impls")):
        monkeypatch.setattr(mod, "is_noncontiguous_supported", lambda device: device is None or device.type != "hpu")
    with FakeTensorMode() as mode:
        traced = make_fx(lambda x: (x.t() * 2).view(-1), tracing_mode="fake")(
            mode.from_tensor(torch.empty(3, 4, device="hpu")))
    ctx = passes.PassContext(traced, [], "g", False, False, False)
    assert passes.pass_restride_view_inputs(ctx) is True
    clones = [n for n in traced.graph.nodes if n.target is torch.ops.aten.clone.default]
    assert len(clones) == 1 and clones[0].kwargs["memory_format"] == torch.contiguous_format
