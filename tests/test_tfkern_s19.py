"""Session 19 (tfkern): softmax/log_softmax with the float32 exp against torch CPU and a
float64 reference, and the glue's fast zero_ / in-place ops with a 0-dim operand of
another dtype (results equal to CPU, served without the Python fallback)."""
import os
import subprocess
import sys

import pytest
import torch

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch._ops import registry


def _err(a, ref):
    return (a.double() - ref).abs().max().item()


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("n", [1, 7, 17, 64, 131])
def test_softmax_fp32_close_to_float64_as_cpu(log, n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(33, n, generator=g) * 6
    x[3, 0] = -200.0  # an exp that underflows to a subnormal or zero
    fn = torch.log_softmax if log else torch.softmax
    ref = fn(x.double(), -1)
    cpu, hpu = fn(x, -1), fn(x.to("hpu"), -1).cpu()
    assert _err(hpu, ref) <= 2 * _err(cpu, ref) + 1e-7
    # non-contiguous input (a transposed view), backward too
    xt = x.t().contiguous().t()
    xh = xt.to("hpu").requires_grad_()
    xc = xt.clone().requires_grad_()
    gy = torch.randn(33, n, generator=g)
    fn(xh, -1).backward(gy.to("hpu"))
    fn(xc, -1).backward(gy)
    torch.testing.assert_close(xh.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-6)


def test_softmax_special_values():
    x = torch.tensor([[0.0, float("-inf"), 1.0], [float("nan"), 0.0, 1.0], [float("-inf")] * 3])
    for fn in (torch.softmax, torch.log_softmax):
        torch.testing.assert_close(fn(x.to("hpu"), -1).cpu(), fn(x, -1), equal_nan=True)


def test_softmax_bf16_loose():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 77, generator=g).bfloat16()
    ref = torch.softmax(x.double(), -1)
    assert _err(torch.softmax(x.to("hpu"), -1).cpu(), ref) <= 2 * _err(torch.softmax(x, -1), ref) + 1e-3


def test_zero_and_zeros_like_fast():
    before = registry.native_counts().get("aten::zero_", 0)
    x = torch.randn(5, 7).to("hpu")
    z = torch.zeros_like(x)
    assert z.device.type == "hpu" and torch.equal(z.cpu(), torch.zeros(5, 7))
    y = x.t()  # strided
    y.zero_()
    assert torch.equal(x.cpu(), torch.zeros(5, 7))
    for dt in (torch.int64, torch.bool, torch.bfloat16):
        t = torch.ones(3, dtype=dt).to("hpu")
        assert torch.equal(t.zero_().cpu(), torch.zeros(3, dtype=dt))
    assert registry.native_counts().get("aten::zero_", 0) >= before + 5


@pytest.mark.parametrize("sdt", [torch.int64, torch.int32, torch.float64, torch.bfloat16, torch.bool])
@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
def test_inplace_with_0dim_tensor_of_other_dtype(op, sdt):
    if op == "sub_" and sdt == torch.bool:
        pytest.skip("torch refuses bool subtraction")
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 6, generator=g)
    s = torch.tensor(3, dtype=sdt) if sdt != torch.bool else torch.tensor(True)
    if sdt.is_floating_point:
        s = torch.tensor(1.3, dtype=sdt)
    xh = x.to("hpu")
    getattr(xh, op)(s.to("hpu"))
    getattr(x, op)(s)
    torch.testing.assert_close(xh.cpu(), x, rtol=1e-6, atol=1e-6)


def test_lazy_mode_same():
    code = (
        "import torch, habana_frameworks.torch.core as htcore\n"
        "g = torch.Generator().manual_seed(0); x = torch.randn(8, 19, generator=g)\n"
        "h = x.to('hpu'); z = torch.zeros_like(h); h.add_(torch.tensor(2, device='hpu'))\n"
        "y = torch.softmax(h, -1) + z; htcore.mark_step()\n"
        "torch.testing.assert_close(y.cpu(), torch.softmax(x + 2, -1), rtol=1e-6, atol=1e-7)\n"
        "print('ok')\n")
    env = dict(os.environ, PT_HPU_LAZY_MODE="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
