"""A subset of PyTorch's OpInfo database run through torch.compile(backend="hpu_backend"):
forward, and forward+backward where the op has a gradient, against torch's CPU kernels with
the eager suite's float32 tolerances (torch.testing defaults). Dynamo compiles are slow, so
the subset is the ops the reference models and optimizers use plus a few without a native
kernel (they run as eager nodes inside the compiled graph) and a few decomposed ones."""
from __future__ import annotations

import habana_frameworks.torch  # noqa: F401  (must precede torch.testing._internal)
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_map

OPS = ("add", "div", "tanh", "nn.functional.gelu", "nn.functional.layer_norm", "log_softmax", "addmm",
       "sum", "where", "nn.functional.cross_entropy", "nn.functional.hardswish", "cumprod")
SAMPLES = 2
_BY_NAME: dict = {}
for _op in op_db:
    _BY_NAME.setdefault(_op.name, _op)  # the first variant (div: no rounding mode)


def _to(x, device):
    return x.detach().to(device).requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("name", OPS)
def test_op_compiled_matches_cpu(name):
    op = _BY_NAME[name]
    grad = op.supports_autograd
    samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=grad))[:SAMPLES]
    assert samples
    compiled = torch.compile(op.op, backend="hpu_backend", dynamic=False)
    for s in samples:
        cpu_in = [s.input, *s.args]
        hpu_in = tree_map(lambda x: _to(x, "hpu"), cpu_in)
        kwargs = tree_map(lambda x: _to(x, "hpu"), s.kwargs)
        expected = op.op(*cpu_in, **s.kwargs)
        got = compiled(*hpu_in, **kwargs)
        torch.testing.assert_close(tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, got),
                                   expected, equal_nan=True)
        outs = [t for t in tree_flatten(expected)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        if not grad or not outs:
            continue
        leaves = [x for x in tree_flatten(cpu_in)[0] if isinstance(x, torch.Tensor) and x.requires_grad]
        hleaves = [x for x in tree_flatten(hpu_in)[0] if isinstance(x, torch.Tensor) and x.requires_grad]
        houts = [t for t in tree_flatten(got)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        gos = [torch.randn_like(t) for t in outs]
        g_cpu = torch.autograd.grad(outs, leaves, gos, allow_unused=True)
        g_hpu = torch.autograd.grad(houts, hleaves, [g.to("hpu") for g in gos], allow_unused=True)
        for a, b in zip(g_hpu, g_cpu):
            if b is None:
                continue
            torch.testing.assert_close(a.cpu(), b, equal_nan=True)
