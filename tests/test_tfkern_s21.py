"""Session 21: GELU's erf form (the default, the transformer's) in AVX2 lanes
(kernels/gelu_avx2.h: Phi(-|x|) = e^(-x^2/2) N/D, one division and one exponential for the
forward and the backward) against torch CPU and a float64 reference."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import habana_frameworks.torch.core as htcore  # noqa: F401


def _ref64(x):
    """gelu and its derivative in float64 without cancellation (torch's float64 1 + erf
    flushes the tail below x ~ -8 to 0)."""
    x = x.double()
    phi_cdf = 0.5 * torch.special.erfc(-x / 2 ** 0.5)
    return x * phi_cdf, phi_cdf + x * torch.exp(-x * x / 2) / (2 * torch.pi) ** 0.5


def _run(x, dev):
    x = x.detach().to(dev).requires_grad_(True)
    y = F.gelu(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    return y.detach().cpu().double(), g.cpu().double()


def _rel_ulps(got, ref):
    """|got - ref| in float32 ulps of |ref| (subnormal spacing at the bottom)."""
    spacing = torch.clamp(ref.abs(), min=2.0 ** -126) * 2.0 ** -23
    spacing = torch.where(ref.abs() < 2.0 ** -126, torch.full_like(ref, 2.0 ** -149), spacing)
    return ((got - ref).abs() / spacing)


def test_gelu_erf_negative_tail_relative_accuracy():
    """x in [-13, -1]: hpu's forward within a few ulps of float64 relative to the (tiny)
    result, where CPU's erf (absolute 1.5e-7) loses it entirely; the backward likewise."""
    x = torch.linspace(-13, -1, 4001)
    ry, rg = _ref64(x)
    hy, hg = _run(x, "hpu")
    cy, _ = _run(x, "cpu")
    hu, cu = _rel_ulps(hy, ry).max().item(), _rel_ulps(cy, ry).max().item()
    assert hu <= 8 and cu > 1000 * hu, (hu, cu)
    # the derivative: error relative to max(Phi, |x phi|), the terms it sums
    scale = torch.maximum(0.5 * torch.erfc(-x.double() / 2 ** 0.5),
                          (x.double() * torch.exp(-x.double() ** 2 / 2) / (2 * torch.pi) ** 0.5).abs())
    assert (_rel_ulps(hg, rg) * rg.abs().clamp(min=1e-300) / scale.clamp(min=1e-300)).max().item() <= 8


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "channels_last"])
def test_gelu_erf_float32_vs_cpu_and_float64(layout):
    """Activations as the transformer's (and wider), four layouts: forward and backward
    no further from float64 than CPU float32 (plus a rounding floor), and close to CPU."""
    g = torch.Generator().manual_seed(21)
    x = torch.randn(4, 8, 12, 37, generator=g) * 3
    if layout == "transposed":
        x = x.transpose(1, 3)
    elif layout == "sliced":
        x = x[:, 1:7, ::2, 3:]
    elif layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    w = torch.randn(x.shape, generator=g)
    outs = {}
    for dev, dt in (("cpu", torch.float64), ("cpu", torch.float32), ("hpu", torch.float32)):
        xx = x.detach().to(dev, dt).requires_grad_(True)
        y = F.gelu(xx)
        (y * w.to(dev, dt)).sum().backward()
        outs[(dev, dt)] = (y.detach().cpu().double(), xx.grad.cpu().double())
    ref, cpu, hpu = outs[("cpu", torch.float64)], outs[("cpu", torch.float32)], outs[("hpu", torch.float32)]
    for r, c, h in zip(ref, cpu, hpu):
        herr, cerr = (h - r).abs().max().item(), (c - r).abs().max().item()
        assert herr <= 2 * cerr + 2e-7 * r.abs().max().item(), (herr, cerr)
        torch.testing.assert_close(h, c, rtol=1.3e-6, atol=1e-6)


def test_gelu_erf_special_values():
    x = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e-42, -1e-42, 14.4, -14.4, 14.6, -14.6, 30.0, -30.0,
                      3e38, -3e38, float("inf"), float("-inf"), float("nan")])
    cy, cg = _run(x, "cpu")
    hy, hg = _run(x, "hpu")
    for c, h in ((cy, hy), (cg, hg)):
        assert torch.equal(c.isnan(), h.isnan()) and torch.equal(c.isinf(), h.isinf())
        ok = c.isfinite()
        torch.testing.assert_close(h[ok], c[ok], rtol=2e-6, atol=1e-40)
    # signs of zeros as CPU's: gelu(-0) = -0, gelu(-30) = -0
    assert torch.signbit(hy[1]) and torch.signbit(hy[11])


def test_gelu_erf_bfloat16():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(64, 257, generator=g) * 3
    want = F.gelu(x)
    got = F.gelu(x.to("hpu", torch.bfloat16)).cpu().float()
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


_SUB = r"""
import torch, torch.nn.functional as F
import habana_frameworks.torch.core as htcore
g = torch.Generator().manual_seed(3)
x = torch.randn(16, 64, 256, generator=g) * 2
w = torch.randn(16, 64, 256, generator=g)
def run(dev, threads):
    torch.set_num_threads(threads)
    xx = x.to(dev).requires_grad_(True)
    y = F.gelu(xx)
    (y * w.to(dev)).sum().backward()
    htcore.mark_step()
    return y.detach().cpu(), xx.grad.cpu()
h1, h2, c = run("hpu", 1), run("hpu", 2), run("cpu", 2)
for a, b in zip(h1, h2):
    assert torch.equal(a, b)
for a, b in zip(h1, c):
    torch.testing.assert_close(a, b, rtol=1.3e-6, atol=1e-6)
print("ok")
"""


@pytest.mark.parametrize("env", [{"PT_HPU_LAZY_MODE": "1"}, {"HPUSIM_ISA": "generic"}, {"HPUSIM_ISA": "avx2"}])
def test_gelu_erf_modes_and_workers(env):
    """Lazy mode and both ISA settings (generic: the portable loops) match CPU, with the same
    bits on 1 and 2 threads."""
    e = dict(os.environ, **env)
    r = subprocess.run([sys.executable, "-c", _SUB], env=e, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
