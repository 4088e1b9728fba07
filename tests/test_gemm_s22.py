"""float32 small-kernel products, session 22 (kernels/gemm_f32small.h): addmm with a bias
row (a Linear layer's) has the bias in the kernel's epilogue instead of being copied into
the output first, with the same bits as addmm with the bias materialised in every row (the
copy path) on 1 and 2 kernel workers; B's strips are packed per strip (zero-padded past n,
so partial strips n % 16 = 1..15 read no masked loads) and, for k > 128, also when B is not
transposed. Each case against torch's CPU result judged against float64, eager and lazy."""
from __future__ import annotations

import os
import subprocess
import sys

import torch

import habana_frameworks.torch  # noqa: F401

EPS = torch.finfo(torch.float32).eps


def _judge(h, c, r, scale, what):
    """hpu's largest error from float64 at most 2x CPU's plus 4 float32 ulps of the scale."""
    h, c = h.double(), c.double()
    eh, ec = (h - r).abs().max().item(), (c - r).abs().max().item()
    tol = 2 * ec + 4 * EPS * scale
    assert eh <= tol, f"{what}: hpu {eh:.3e} vs CPU {ec:.3e} from float64 (scale {scale:.3e})"


# (m, n, k, transpose A, transpose B, alpha, beta): the MLP's addmms, partial strips, k past
# 128 (packed B not transposed) and past 256 (two k-blocks), one row tile.
_SHAPES = [
    (64, 128, 64, False, True, 1.0, 1.0), (64, 64, 128, False, True, 1.0, 1.0), (64, 10, 64, False, True, 1.0, 1.0),
    (33, 37, 300, True, True, 0.5, -2.0), (40, 24, 129, False, False, 1.0, 1.0), (13, 17, 520, True, False, -1.25, 0.75),
    (70, 9, 200, False, False, 1.0, 1.0), (6, 31, 77, False, True, 2.0, 0.5), (100, 47, 1, False, False, 1.0, 1.0),
]


def _operands(gen, m, n, k, ta, tb):
    a = torch.randn(k, m, generator=gen).t() if ta else torch.randn(m, k, generator=gen)
    b = torch.randn(n, k, generator=gen).t() if tb else torch.randn(k, n, generator=gen)
    return a, b, torch.randn(n, generator=gen)


def _bias_cases(threads=None):
    """addmm with the bias row (fused) and with it expanded into a contiguous matrix (copied)
    on hpu, each judged against CPU and float64; returns {case: (fused, copied)}."""
    gen = torch.Generator().manual_seed(22)
    prev = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    outs = {}
    try:
        for m, n, k, ta, tb, alpha, beta in _SHAPES:
            a, b, bias = _operands(gen, m, n, k, ta, tb)
            name = f"{m}x{n}x{k} ta={ta} tb={tb}"
            c = torch.addmm(bias, a, b, alpha=alpha, beta=beta)
            r = torch.addmm(bias.double(), a.double(), b.double(), alpha=alpha, beta=beta)
            scale = abs(alpha) * (a.double().abs() @ b.double().abs()).max().item() + abs(beta) * bias.abs().max().item()
            ha, hb = a.to("hpu"), b.to("hpu")
            fused = torch.addmm(bias.to("hpu"), ha, hb, alpha=alpha, beta=beta).cpu()
            full = bias.expand(m, n).contiguous().to("hpu")
            copied = torch.addmm(full, ha, hb, alpha=alpha, beta=beta).cpu()
            _judge(fused, c, r, scale, name)
            outs[name] = (fused, copied)
    finally:
        torch.set_num_threads(prev)
    return outs


def test_bias_fused_same_bits_as_copied():
    one, two = _bias_cases(1), _bias_cases(2)
    for name, (fused, copied) in one.items():
        assert torch.equal(fused, copied), f"{name}: bias row and materialised bias differ"
        assert torch.equal(fused, two[name][0]), f"{name}: 1 and 2 workers differ"


def test_products_vs_cpu():
    """mm (no bias) at the same shapes: packed strips, k blocks, layouts."""
    gen = torch.Generator().manual_seed(23)
    for m, n, k, ta, tb, alpha, _ in _SHAPES:
        a, b, _ = _operands(gen, m, n, k, ta, tb)
        h = (torch.mm(a.to("hpu"), b.to("hpu")) * 1).cpu()
        _judge(h, a @ b, a.double() @ b.double(), (a.double().abs() @ b.double().abs()).max().item(),
               f"mm {m}x{n}x{k} ta={ta} tb={tb}")


def test_linear_and_inplace_self():
    """nn.functional.linear forward/backward with a bias, and addmm_/out= where self is out
    (not a bias row: the copy path) agree with CPU."""
    gen = torch.Generator().manual_seed(24)
    x, w, b = torch.randn(64, 64, generator=gen), torch.randn(10, 64, generator=gen), torch.randn(10, generator=gen)
    res = {}
    for dev, dt in (("cpu", torch.float32), ("hpu", torch.float32), ("cpu", torch.float64)):
        xx = x.to(dev, dt, copy=True).requires_grad_()
        ww = w.to(dev, dt, copy=True).requires_grad_()
        bb = b.to(dev, dt, copy=True).requires_grad_()
        y = torch.nn.functional.linear(xx, ww, bb)
        y.backward(torch.cos(y.detach()))
        res[dev, dt] = [t.detach().cpu() for t in (y, xx.grad, ww.grad, bb.grad)]
    for i, what in enumerate(("y", "dX", "dW", "db")):
        h, c, r = res["hpu", torch.float32][i], res["cpu", torch.float32][i], res["cpu", torch.float64][i]
        _judge(h, c, r, r.abs().max().item() * 64 + 1, f"linear {what}")
    s = torch.randn(64, 10, generator=gen)
    hs = s.to("hpu")
    hs.addmm_(x.to("hpu"), w.to("hpu").t(), beta=0.5, alpha=2.0)
    ref = s.double() * 0.5 + 2.0 * (x.double() @ w.double().t())
    _judge(hs.cpu(), s.clone().addmm_(x, w.t(), beta=0.5, alpha=2.0), ref,
           (s.abs() + 2 * (x.abs() @ w.abs().t())).max().item(), "addmm_")


_SCRIPT = r"""
import sys, torch
sys.path.insert(0, {tests!r})
import test_gemm_s22 as t
torch.save(t._bias_cases(), {path!r})
"""


def test_lazy_mode(tmp_path):
    if os.environ.get("PT_HPU_LAZY_MODE") == "1":
        _bias_cases()
        return
    path = str(tmp_path / "lazy.pt")
    p = subprocess.run([sys.executable, "-c", _SCRIPT.format(tests=os.path.dirname(__file__), path=path)],
                       env=dict(os.environ, PT_HPU_LAZY_MODE="1"), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    lazy = torch.load(path)
    for name, (fused, copied) in _bias_cases().items():
        assert torch.equal(lazy[name][0], fused), f"{name}: lazy and eager differ"
        assert torch.equal(lazy[name][1], copied), f"{name}: lazy and eager differ (copied)"
