"""The host scalar program's results reach the recipe exactly (host_scalars.py packs them
into one buffer copied to the device): float32 and float64, finite and nan/inf results
(the IEEE fallback path), compared with eager torch on the CPU."""
from __future__ import annotations

import pytest
import torch

import habana_frameworks.torch.core as htcore  # noqa: F401
from habana_frameworks.torch.dynamo.compile_backend import host_scalars
from habana_frameworks.torch.utils.internal import is_lazy

pytestmark = pytest.mark.skipif(is_lazy(), reason="lazy mode runs compiled graphs as lazy ops, without recipes")


def _corrections(step, p):
    step += 1
    bc1 = 1 - 0.9 ** step
    bc2 = (1 - 0.999 ** step).sqrt()
    p.mul_(bc2 / bc1)
    p.add_(1 / bc1)
    return p


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_host_scalar_results_reach_the_recipe_exactly(dtype):
    torch._dynamo.reset()
    calls = []
    original = host_scalars.HostScalarProgram.__call__

    def spy(self, *inputs):
        out = original(self, *inputs)
        # Copied now: a program may rewrite one device buffer at each call (reuse_output).
        calls.append(out.clone())
        return out

    host_scalars.HostScalarProgram.__call__ = spy
    try:
        compiled = torch.compile(_corrections, backend="hpu_backend")
        # -1: the first call's bc1 is 1 - 0.9 ** 0 = 0, so nan and inf (the IEEE path).
        for start in (-1.0, 3.0, 1e6):
            step_h, step_c = torch.tensor(start, dtype=dtype), torch.tensor(start, dtype=dtype)
            p_c = torch.linspace(-1, 1, 7, dtype=dtype)
            p_h = p_c.to("hpu")
            for _ in range(3):
                compiled(step_h, p_h)
                _corrections(step_c, p_c)
            assert step_h.item() == step_c.item()
            torch.testing.assert_close(p_h.cpu(), p_c, rtol=2e-7 if dtype == torch.float32 else 1e-15, atol=0,
                                       equal_nan=True)
    finally:
        host_scalars.HostScalarProgram.__call__ = original
    assert calls, "no host scalar program ran"
    assert all(t.device.type == "hpu" and t.dtype == dtype and t.dim() == 1 for t in calls)
    assert any(t.cpu().isnan().any() or t.cpu().isinf().any() for t in calls)
