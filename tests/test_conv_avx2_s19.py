"""The direct float32 convolution kernels on AVX2 (kernels/conv_direct_avx2_cgo.go) and the
paths around them, against torch's CPU convolution: forward and all three gradients, float32
judged against float64 (no further from it than torch's CPU result), bfloat16 loosely; odd
sizes, padding, dilation, stride, groups, depthwise, channels_last, 32+8 channel blocks.
Eager here; lazy mode and the HPUSIM_ISA caps (avx2, generic) in subprocesses."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import habana_frameworks.torch  # noqa: F401
from habana_frameworks.torch._ops import fallback



def _judge(h, c, r, what):
    """hpu's largest error against float64 at most 3x CPU's plus 4 float32 ulps of the
    largest value: the direct kernels sum each element's taps in one float32 chain (432 taps
    for a 48-channel 3x3 input gradient), about 2x the error of CPU's blocked sums."""
    eh, ec = (h.double() - r).abs().max().item(), (c.double() - r).abs().max().item()
    ulp = torch.finfo(torch.float32).eps * r.abs().max().item()
    assert eh <= 3 * ec + 4 * ulp + 1e-12, f"{what}: hpu {eh:.3e} vs CPU {ec:.3e} from float64 (ulp {ulp:.3e})"

# (N, C, H, W, O, K, stride, padding, dilation, groups)
CASES = [
    (4, 16, 14, 14, 32, 3, 1, 1, 1, 1),   # the bench CNN's second layer
    (3, 13, 9, 11, 20, 3, 1, 1, 1, 1),    # odd sizes, a partial 16-lane half
    (2, 12, 10, 7, 40, 5, 1, 2, 1, 1),    # 5x5, a 32-channel block plus 8
    (2, 14, 13, 12, 17, 3, 1, (2, 3), 2, 1),  # dilation, uneven padding
    (2, 16, 11, 9, 32, 3, (2, 1), 1, 1, 1),   # stride 2 along H (direct forward only)
    (2, 16, 12, 12, 24, 3, 2, 1, 1, 1),   # stride 2 (other paths)
    (2, 24, 6, 6, 24, 3, 1, 1, 1, 2),     # groups
    (2, 16, 8, 8, 16, 3, 1, 1, 1, 16),    # depthwise
    (2, 12, 5, 31, 48, 3, 1, 0, 1, 1),    # long rows, no padding
    (1, 16, 7, 9, 32, 3, 1, 3, 1, 1),     # padding past the kernel
]


def _check(case, dtype=torch.float32, channels_last=False, seed=0):
    N, C, H, W, O, K, s, p, d, g = case
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, C, H, W, generator=gen)
    w = torch.randn(O, C // g, K, K, generator=gen) / (C // g * K * K) ** 0.5
    b = torch.randn(O, generator=gen)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)

    def run(dev, dt):
        ts = [t.detach().to(dev, dt).requires_grad_(True) for t in (x, w, b)]
        y = F.conv2d(*ts, stride=s, padding=p, dilation=d, groups=g)
        gy = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed + 1)).to(dev, dt)
        y.backward(gy)
        return [y.detach().cpu()] + [t.grad.cpu() for t in ts]

    before = sum(fallback.counts().values())
    hpu = run("hpu", dtype)
    assert sum(fallback.counts().values()) == before, "a CPU fallback"
    names = ("output", "input grad", "weight grad", "bias grad")
    if dtype == torch.float32:
        cpu, ref = run("cpu", torch.float32), run("cpu", torch.float64)
        for n, h, c, r in zip(names, hpu, cpu, ref):
            assert h.dtype == torch.float32
            _judge(h, c, r, f"{case} {n}")
            torch.testing.assert_close(h, c, rtol=1e-4, atol=1e-4 * max(1.0, r.abs().max().item()))
    else:
        ref = run("cpu", torch.float64)
        for n, h, r in zip(names, hpu, ref):
            assert h.dtype == dtype
            scale = max(1.0, r.abs().max().item())
            torch.testing.assert_close(h.double(), r, rtol=2e-2, atol=2e-2 * scale, msg=f"{case} {n}")


def _all():
    for i, case in enumerate(CASES):
        _check(case, seed=i)
        _check(case, channels_last=True, seed=100 + i)
    for i, case in enumerate(CASES[:4]):
        _check(case, dtype=torch.bfloat16, seed=200 + i)


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_conv_f32(case):
    _check(case, seed=CASES.index(case))


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_conv_f32_channels_last(case):
    _check(case, channels_last=True, seed=100 + CASES.index(case))


@pytest.mark.parametrize("case", CASES[:4], ids=[str(i) for i in range(4)])
def test_conv_bf16(case):
    _check(case, dtype=torch.bfloat16, seed=200 + CASES.index(case))


def test_conv_weight_grad_same_bits_on_one_and_two_threads():
    """The direct weight gradient sums fixed blocks of samples: torch.set_num_threads(1)
    (one kernel worker) and 2 give the same bits."""
    gen = torch.Generator().manual_seed(7)
    x, w, gy = torch.randn(17, 16, 14, 14, generator=gen), torch.randn(32, 16, 3, 3, generator=gen), \
        torch.randn(17, 32, 14, 14, generator=gen)
    old = torch.get_num_threads()
    outs = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            xh, wh = x.to("hpu").requires_grad_(True), w.to("hpu").requires_grad_(True)
            F.conv2d(xh, wh, padding=1).backward(gy.to("hpu"))
            outs.append((xh.grad.cpu(), wh.grad.cpu()))
    finally:
        torch.set_num_threads(old)
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("env", [{"PT_HPU_LAZY_MODE": "1"}, {"HPUSIM_ISA": "avx2"},
                                 {"HPUSIM_ISA": "generic"}, {"PT_HPU_LAZY_MODE": "1", "HPUSIM_ISA": "generic"}],
                         ids=["lazy", "avx2", "generic", "lazy-generic"])
def test_conv_in_subprocess(env):
    here = os.path.dirname(os.path.abspath(__file__))
    code = "import sys; sys.path.insert(0, %r); import test_conv_avx2_s19 as t; t._all(); print('ok')" % here
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-4000:]
