"""nn.Linear on an activation of another float dtype (lightning-habana's
test_autocast_enable_disable: a bfloat16 result of an autocast region fed to an fp32 Linear
outside it). The lazy bridge has its own aten::linear kernel that takes the input's dtype,
so this runs in lazy mode and returns the input's dtype; eager mode keeps torch's composite
and raises the CPU's dtype error, as the bridge's eager decomposition does.
Runs in both passes of the Makefile (eager and PT_HPU_LAZY_MODE=1)."""
import pytest
import torch

import habana_frameworks.torch.core as htcore
from habana_frameworks.torch.utils.internal import is_lazy


def _pair(bias=True):
    torch.manual_seed(0)
    cpu = torch.nn.Linear(8, 5, bias=bias)
    hpu = torch.nn.Linear(8, 5, bias=bias).to("hpu")
    hpu.load_state_dict(cpu.state_dict())
    return cpu, hpu


@pytest.mark.skipif(not is_lazy(), reason="lazy mode's aten::linear")
@pytest.mark.parametrize("shape", [(3, 8), (2, 3, 8)])
@pytest.mark.parametrize("bias", [True, False])
def test_lazy_linear_takes_the_input_dtype_forward_and_backward(shape, bias):
    cpu, hpu = _pair(bias)
    x = torch.randn(*shape).bfloat16()
    xh = x.to("hpu").requires_grad_()
    y = hpu(xh)
    assert y.dtype == torch.bfloat16 and y.shape == (*shape[:-1], 5)
    (y.float() * torch.arange(5.0, device="hpu")).sum().backward()
    htcore.mark_step()
    # CPU reference: the parameters cast to the input's dtype, gradients back through the casts.
    xc = x.clone().requires_grad_()
    yc = torch.nn.functional.linear(xc, cpu.weight.bfloat16(), None if cpu.bias is None else cpu.bias.bfloat16())
    (yc.float() * torch.arange(5.0)).sum().backward()
    torch.testing.assert_close(y.cpu(), yc, atol=0, rtol=0)
    assert hpu.weight.grad.dtype == torch.float32 and xh.grad.dtype == torch.bfloat16
    torch.testing.assert_close(hpu.weight.grad.cpu(), cpu.weight.grad, atol=0, rtol=0)
    torch.testing.assert_close(xh.grad.cpu(), xc.grad, atol=0, rtol=0)
    if bias:
        torch.testing.assert_close(hpu.bias.grad.cpu(), cpu.bias.grad, atol=0, rtol=0)


@pytest.mark.skipif(not is_lazy(), reason="lazy mode's aten::linear")
def test_lazy_linear_inference_mode_and_one_dtype_unchanged():
    cpu, hpu = _pair()
    x = torch.randn(4, 8)
    with torch.inference_mode():
        assert hpu(x.to("hpu").bfloat16()).dtype == torch.bfloat16
        torch.testing.assert_close(hpu(x.to("hpu")).cpu(), cpu(x), atol=1e-6, rtol=1e-6)
    # fp32 weights, bf16 bias: the bias follows the input too
    hpu.bias.data = hpu.bias.data.bfloat16()
    assert hpu(x.to("hpu")).dtype == torch.float32


@pytest.mark.skipif(not is_lazy(), reason="lazy mode's aten::linear")
def test_lazy_autocast_region_then_fp32_linear_trains():
    # lightning-habana's pattern: mm under autocast (bf16 result), then the fp32 layer outside it.
    cpu, hpu = _pair()
    opt = torch.optim.SGD(hpu.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(cpu.parameters(), lr=0.1)
    x = torch.randn(6, 8)
    for _ in range(2):
        with torch.autocast(device_type="hpu", dtype=torch.bfloat16):
            h = torch.mm(x.to("hpu"), torch.eye(8, device="hpu"))
        assert h.dtype == torch.bfloat16
        loss = hpu(h).float().square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        htcore.mark_step()
        hc = torch.mm(x.bfloat16(), torch.eye(8).bfloat16())
        ref = torch.nn.functional.linear(hc, cpu.weight.bfloat16(), cpu.bias.bfloat16()).float().square().mean()
        ref_opt.zero_grad()
        ref.backward()
        ref_opt.step()
        torch.testing.assert_close(loss.cpu(), ref, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(hpu.weight.detach().cpu(), cpu.weight.detach(), atol=1e-3, rtol=1e-3)


@pytest.mark.skipif(is_lazy(), reason="eager mode keeps torch's composite")
def test_eager_mixed_linear_raises_like_cpu():
    cpu, hpu = _pair()
    x = torch.randn(3, 8).bfloat16()
    with pytest.raises(RuntimeError) as cpu_err:
        cpu(x)
    with pytest.raises(RuntimeError) as hpu_err:
        hpu(x.to("hpu"))
    assert str(hpu_err.value) == str(cpu_err.value)
