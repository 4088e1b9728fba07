"""fp8 on the emulated device: the float8 dtypes, hpex.kernels.Fp8Ops (torch.ops.hpu casts
and GEMM, with fake kernels) and the Transformer Engine's Linear with delayed scaling."""
import os
import subprocess
import sys

import pytest
import torch

import habana_frameworks.torch.core as htcore  # noqa: F401
import habana_frameworks.torch.hpex.experimental.transformer_engine as te
from habana_frameworks.torch.hpex.experimental.transformer_engine import recipe
from habana_frameworks.torch.hpex.kernels import Fp8Ops

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def _run(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=180)


def _values():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5000, generator=g) * torch.logspace(-12, 6, 5000)
    edges = torch.tensor([448., 464., 470., 480., 57344., 61440., 70000., float("inf"), float("-inf"),
                          float("nan"), -0.0, 2**-10, 3 * 2**-11, 2**-17, 1.0625, 1.1875])
    return torch.cat([x, edges])


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_casts_match_cpu_bit_for_bit(dtype):
    x = _values()
    for src in (x, x.bfloat16(), x.double()):
        assert torch.equal(src.to(dtype).view(torch.uint8), src.to("hpu").to(dtype).cpu().view(torch.uint8))
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
    torch.testing.assert_close(codes.to("hpu").float().cpu(), codes.float(), equal_nan=True, rtol=0, atol=0)
    ints = torch.arange(-300, 300, 7)
    assert torch.equal(ints.to(dtype).view(torch.uint8), ints.to("hpu").to(dtype).cpu().view(torch.uint8))
    assert torch.tensor(42, dtype=dtype, device="hpu").item() == torch.tensor(42, dtype=dtype).item()
    assert torch.equal(torch.full((3,), 3, dtype=dtype, device="hpu").cpu().float(), torch.full((3,), 3.0))


def test_fp8_not_on_first_generation_gaudi():
    r = _run("import torch, habana_frameworks.torch\n"
             "try:\n    torch.zeros(2, dtype=torch.float8_e4m3fn, device='hpu')\nexcept RuntimeError as e:\n    print('refused', e)\n"
             "import habana_frameworks.torch.hpex.experimental.transformer_engine as te\n"
             "print(te.fp8.is_fp8_available())", HPUSIM_DEVICE_TYPE="GAUDI")
    assert "refused" in r.stdout and "float8 is not supported on Gaudi" in r.stdout, r.stderr
    assert "(False, 'FP8 is supported on Gaudi2 and later devices only')" in r.stdout


def test_cast_to_fp8_saturates_at_the_generation_range():
    x = torch.tensor([1.0, -300.0, 500.0, 1e5, float("nan")])
    q, amax = Fp8Ops.cast_to_fp8_v2(x.to("hpu"), None, False, True, torch.float8_e4m3fn)
    assert q.dtype == torch.float8_e4m3fn and q.device.type == "hpu"
    got = q.float().cpu()
    assert got[:4].tolist() == [1.0, -240.0, 240.0, 240.0] and torch.isnan(got[4])  # Gaudi2: +-240
    assert torch.isnan(amax.cpu()) or amax.item() == 1e5
    q5, _ = Fp8Ops.cast_to_fp8_v2(x.to("hpu"), None, False, False, torch.float8_e5m2)
    assert q5.float().cpu()[:4].tolist() == [1.0, -320.0, 512.0, 57344.0]
    r = _run("import torch, habana_frameworks.torch\nfrom habana_frameworks.torch.hpex.kernels import Fp8Ops\n"
             "q, _ = Fp8Ops.cast_to_fp8_v2(torch.tensor([500.0], device='hpu'), None, False, False, torch.float8_e4m3fn)\n"
             "print(q.float().item())", HPUSIM_DEVICE_TYPE="GAUDI3")
    assert r.stdout.strip() == "448.0", r.stderr


def test_cast_roundtrip_and_gemm_against_cpu():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(24, 40, generator=g) * 3, torch.randn(16, 40, generator=g)
    sa, sb = torch.tensor(8.0), torch.tensor(16.0)
    out = {}
    for dev in ("cpu", "hpu"):
        a8, amax = Fp8Ops.cast_to_fp8_v2(a.to(dev), sa.to(dev), False, True, torch.float8_e4m3fn)
        b8, _ = Fp8Ops.cast_to_fp8_v2(b.to(dev), sb.to(dev), False, False, torch.float8_e4m3fn)
        back = Fp8Ops.cast_from_fp8(a8, (1 / sa).to(dev), torch.float32)
        bias = torch.ones(16, device=dev)
        y = Fp8Ops.fp8_gemm_v2(a8, False, b8, True, None, torch.bfloat16, (1 / sa).to(dev), (1 / sb).to(dev), bias)
        out[dev] = [t.cpu() for t in (a8.view(torch.uint8), amax, back, y)]
    for h, c in zip(out["hpu"], out["cpu"]):
        torch.testing.assert_close(h, c, rtol=1e-6, atol=1e-6)
    # E4M3 keeps 3 mantissa bits: each element within 2**-4 relative of the original.
    assert ((out["hpu"][2] - a).abs() <= a.abs() * 2**-4 + 2**-9 / 8).all()
    # The GEMM multiplies the dequantized fp8 operands in float32 and rounds once to bf16.
    bq = (b * 16).to(torch.float8_e4m3fn).float() / 16
    torch.testing.assert_close(out["hpu"][3], (out["hpu"][2] @ bq.T + 1).bfloat16(), rtol=2**-7, atol=1e-3)


def test_conv2d_fp8_against_cpu_conv_of_the_dequantized_operands():
    # As habana_quantization_toolkit's PatchedConv2d calls it: fp8 input and weight, inverse scales.
    g = torch.Generator().manual_seed(2)
    x, w, bias = torch.randn(2, 3, 9, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g), torch.randn(4, generator=g)
    sx, sw = torch.tensor(4.0), torch.tensor(32.0)
    x8, _ = Fp8Ops.cast_to_fp8_v2(x.to("hpu"), sx.to("hpu"), False, False, torch.float8_e4m3fn)
    w8, _ = Fp8Ops.cast_to_fp8_v2(w.to("hpu"), sw.to("hpu"), False, False, torch.float8_e4m3fn)
    y = torch.ops.hpu.conv2d_fp8(input=x8, weight=w8, bias=bias.to("hpu"), stride=[2, 1], padding=[1, 1],
                                 dilation=[1, 1], groups=1, out_dtype=torch.bfloat16,
                                 scale_input=(1 / sx).to("hpu"), scale_weight=(1 / sw).to("hpu"))
    xq = (x * 4).to(torch.float8_e4m3fn).float() / 4
    wq = (w * 32).to(torch.float8_e4m3fn).float() / 32
    want = torch.nn.functional.conv2d(xq, wq, bias, stride=(2, 1), padding=1).bfloat16()
    assert y.device.type == "hpu" and y.dtype == torch.bfloat16 and y.shape == want.shape == (2, 4, 5, 8)
    torch.testing.assert_close(y.cpu(), want, rtol=2**-7, atol=1e-2)
    # ...and the dequantized fp8 conv is close to the fp32 conv, within fp8's error.
    full = torch.nn.functional.conv2d(x, w, bias, stride=(2, 1), padding=1)
    assert (y.cpu().float() - full).abs().max() < 0.1 * full.abs().max()


def test_fp8_ops_have_fake_kernels():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a = torch.empty(8, 4, dtype=torch.float8_e4m3fn)
        b = torch.empty(6, 4, dtype=torch.float8_e4m3fn)
        y = torch.ops.hpu.fp8_gemm_v2(a, False, b, True, None, torch.bfloat16)
        q, amax = torch.ops.hpu.cast_to_fp8_v2(torch.empty(3, 5), None, False, True, torch.float8_e5m2)
        back = torch.ops.hpu.cast_from_fp8(q, None, torch.float32)
        c = torch.ops.hpu.conv2d_fp8(torch.empty(2, 3, 9, 8, dtype=torch.float8_e4m3fn),
                                     torch.empty(4, 3, 3, 3, dtype=torch.float8_e4m3fn), None, [2, 1], [1, 1])
    assert c.shape == (2, 4, 5, 8) and c.dtype == torch.bfloat16
    assert y.shape == (8, 6) and y.dtype == torch.bfloat16
    assert q.shape == (3, 5) and q.dtype == torch.float8_e5m2 and amax.shape == ()
    assert back.dtype == torch.float32


def test_recipe_and_autocast_state():
    r = recipe.DelayedScaling()
    assert r.fp8_format is recipe.Format.HYBRID and r.margin == 0 and r.interval == 1
    assert recipe.Format.HYBRID.fwd_dtype == torch.float8_e4m3fn and recipe.Format.HYBRID.bwd_dtype == torch.float8_e5m2
    with pytest.raises(ValueError):
        recipe.DelayedScaling(amax_compute_algo="median")
    assert te.fp8.is_fp8_available() == (True, "")
    assert not te.fp8.is_fp8_enabled()
    with te.fp8_autocast(enabled=True, fp8_recipe=r):
        assert te.fp8.is_fp8_enabled() and te.fp8.get_fp8_recipe() is r
        with te.fp8_autocast(enabled=False):
            assert not te.fp8.is_fp8_enabled()
        assert te.fp8.is_fp8_enabled()
    assert not te.fp8.is_fp8_enabled()


def _te_reference_step(x, w, b, go, scales, fwd, bwd, limit_fwd):
    """One fp8 Linear step computed on the CPU from first principles."""
    def q(t, s, dt, lim):
        return (t * s).clamp(-lim, lim).to(dt).float() / s
    xq, wq = q(x, scales[0], fwd, limit_fwd), q(w, scales[1], fwd, limit_fwd)
    y = xq @ wq.T + b
    gq = q(go, scales[2], bwd, 57344.0)
    return y, gq @ wq, gq.T @ xq


def test_te_linear_fp8_step_matches_first_principles_and_scales_are_delayed():
    torch.manual_seed(0)
    m = te.Linear(32, 8)
    assert m.weight.device.type == "hpu"
    r = recipe.DelayedScaling(margin=1, amax_history_len=3, amax_compute_algo="max")
    x = torch.randn(4, 5, 32) * 4
    go = torch.randn(4, 5, 8) * 1e-3
    w, b = m.weight.detach().cpu(), m.bias.detach().cpu()
    scales = [torch.tensor(1.0)] * 3
    amax_hist = []
    for step in range(3):
        xh = x.to("hpu").requires_grad_()
        with te.fp8_autocast(enabled=True, fp8_recipe=r):
            y = m(xh)
        y.backward(go.to("hpu"))
        ry, rgx, rgw = _te_reference_step(x.reshape(-1, 32), w, b, go.reshape(-1, 8), scales,
                                          torch.float8_e4m3fn, torch.float8_e5m2, 240.0)
        torch.testing.assert_close(y.detach().cpu().reshape(-1, 8), ry, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(xh.grad.cpu().reshape(-1, 32), rgx, rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(m.weight.grad.cpu(), rgw, rtol=1e-5, atol=1e-7)
        m.weight.grad = None
        # Delayed scaling: the next step's scales come from this and earlier steps' amaxes.
        amax_hist.append(torch.stack([x.abs().max(), w.abs().max(), go.abs().max()]))
        amax = torch.stack(amax_hist[-3:]).amax(0)
        limits = torch.tensor([240.0, 240.0, 57344.0])
        scales = list(limits / amax / 2)
    # Outside fp8_autocast the module is an ordinary linear layer.
    torch.testing.assert_close(m(x.to("hpu")).cpu(), torch.nn.functional.linear(x, w, b), rtol=1e-5, atol=1e-5)


def test_te_linear_trains_like_linear_within_fp8_error():
    torch.manual_seed(0)
    te_model = torch.nn.Sequential(te.Linear(16, 32), torch.nn.ReLU(), te.Linear(32, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    ref.load_state_dict({k: v.cpu() for k, v in te_model.state_dict().items()})
    assert set(te_model.state_dict()) == set(ref.state_dict())  # drop-in checkpoints
    x = torch.randn(256, 16)
    y = (x[:, :1] * 2 - x[:, 1:2]).clone()
    opt = torch.optim.SGD(te_model.parameters(), lr=0.05)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for _ in range(60):
        with te.fp8_autocast(enabled=True):
            loss = torch.nn.functional.mse_loss(te_model(x.to("hpu")), y.to("hpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        rloss = torch.nn.functional.mse_loss(ref(x), y)
        ropt.zero_grad()
        rloss.backward()
        ropt.step()
    assert loss.item() < 0.1 * torch.nn.functional.mse_loss(torch.zeros_like(y), y).item()
    assert abs(loss.item() - rloss.item()) < 0.05 + 0.25 * rloss.item()
