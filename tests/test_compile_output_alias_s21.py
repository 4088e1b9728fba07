"""Outputs of hpu_backend graphs that AOT autograd traced as fresh tensors come back as plain
tensors, not autograd views (issue 16; Longformer compiled).

`x.transpose(0, 1).reshape(...)` of a tensor whose last dims cannot be merged is traced as
`clone` + `_unsafe_view`: AOT records the output as a fresh tensor (not an alias), and the
decompositions turn the `_unsafe_view` into a `view`. Before the fix the first call of such a
graph (the recipe's capture, and every call of a cluster running op by op or of a lazy-mode
graph) returned a real view of the clone, made inside AOT's autograd.Function; a frame resumed
after a graph break that writes into it in place (Longformer's global attention:
`attn_output[idx] = ...`) then raised "Output 0 of CompiledFunctionBackward is a view and is
being modified inplace". Also run in lazy mode (the Makefile's lazy line)."""
from __future__ import annotations

import pytest
import torch

import habana_frameworks.torch  # noqa: F401

OPTIONS = [
    pytest.param({}, id="default"),
    pytest.param({"use_fast_runtime": False}, id="aot_runtime"),
    pytest.param({"use_compiled_recipes": False}, id="op_by_op_clusters"),
]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _resumed_write(x, idx):
    y = x.transpose(0, 1).reshape(4, 6)  # clone + _unsafe_view: x's last two dims are transposed
    torch._dynamo.graph_break()
    y[idx] = y[idx] * 3  # index_put_ into the previous graph's output, in the resumed frame
    return y


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 4, 2, generator=g), torch.tensor([0, 2])


@pytest.mark.parametrize("options", OPTIONS)
def test_resumed_frame_writes_into_previous_graph_output(options):
    x0, idx = _inputs()
    ref_x = x0.clone().requires_grad_()
    ref = _resumed_write(ref_x.transpose(1, 2) * 1, idx)
    ref.pow(2).sum().backward()
    fn = torch.compile(_resumed_write, backend="hpu_backend", options=options)
    x = x0.to("hpu").requires_grad_()
    for _ in range(2):  # the recipes' capture, then their replay
        x.grad = None
        out = fn(x.transpose(1, 2) * 1, idx.to("hpu"))
        out.pow(2).sum().backward()
        torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=0, atol=0)
        torch.testing.assert_close(x.grad.cpu(), ref_x.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("options", OPTIONS)
def test_fresh_reshape_output_is_not_a_view(options):
    def f(x, w):
        return (x * w).transpose(0, 1).reshape(4, 6), x[0]  # fresh, and a view of the input

    x0, _ = _inputs()
    x0 = x0.transpose(1, 2)
    w0 = torch.linspace(0.5, 1.5, 4)
    fn = torch.compile(f, backend="hpu_backend", options=options)
    x, w = x0.to("hpu"), w0.to("hpu").requires_grad_()
    ref_w = w0.clone().requires_grad_()
    ref, ref_t = f(x0, ref_w)
    ref = ref.clone()
    ref.mul_(2)
    ref.sum().backward()
    for _ in range(2):
        w.grad = None
        out, t = fn(x, w)
        assert out._base is None, "a fresh output came back as a view"
        assert t._base is not None and t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        out.mul_(2)  # in place into the output of the compiled autograd.Function
        out.sum().backward()
        torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=0, atol=0)
        torch.testing.assert_close(t.cpu(), ref_t)
        torch.testing.assert_close(w.grad.cpu(), ref_w.grad, rtol=1e-6, atol=1e-6)


def test_fresh_reshape_output_is_not_a_view_inference():
    def f(x):
        return torch.relu(x).transpose(0, 1).reshape(4, 6)

    x0, _ = _inputs()
    x0 = x0.transpose(1, 2)
    fn = torch.compile(f, backend="hpu_backend")
    with torch.no_grad():
        for _ in range(2):
            out = fn(x0.to("hpu"))
            assert out._base is None
            out.add_(1)
            torch.testing.assert_close(out.cpu(), f(x0) + 1, rtol=0, atol=0)
