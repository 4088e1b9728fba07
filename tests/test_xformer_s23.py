"""Session 23, the compiled transformer step's kernels: float32 products up to 2^24
multiply-adds with k <= 256 (the bench transformer's linear layers, forward and input
gradients) on the small AVX2 kernel, and dropout's Philox stream and float32 loop in AVX2
lanes (the same bits as the scalar definition, checked in Go). Each product against torch's
CPU result judged from float64, with transposed and strided operands, on 1 and 2 kernel
workers (same bits), eagerly, compiled and in lazy mode; dropout's output against its own
mask (out = x * mask * float32(1/(1-p)) exactly) and the keep rate."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import habana_frameworks.torch  # noqa: F401

EPS = torch.finfo(torch.float32).eps

# (m, n, k, transpose A, transpose B): the transformer's linear layers at batch 16 (1024
# rows) forward (B = W^T) and input gradients (B = W), and a product just past the bound.
_SHAPES = [(1024, 256, 64, False, True), (1024, 64, 256, False, True), (1024, 192, 64, False, True),
           (1024, 64, 64, False, True), (1024, 256, 64, False, False), (1024, 64, 256, False, False),
           (1000, 200, 72, True, False), (500, 130, 250, True, True), (1024, 257, 64, False, True)]


def _judge(h, c, r, scale, what):
    h, c = h.double(), c.double()
    eh, ec = (h - r).abs().max().item(), (c - r).abs().max().item()
    tol = 2 * ec + 4 * EPS * scale
    assert eh <= tol, f"{what}: hpu {eh:.3e} vs CPU {ec:.3e} from float64 (scale {scale:.3e})"


def _operands(gen, m, n, k, ta, tb):
    a = torch.randn(k, m, generator=gen).t() if ta else torch.randn(m, k, generator=gen)
    b = torch.randn(n, k, generator=gen).t() if tb else torch.randn(k, n, generator=gen)
    return a, b, torch.randn(n, generator=gen)


def _products(threads):
    gen = torch.Generator().manual_seed(23)
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    outs = []
    try:
        for m, n, k, ta, tb in _SHAPES:
            a, b, bias = _operands(gen, m, n, k, ta, tb)
            name = f"{m}x{n}x{k} ta={ta} tb={tb}"
            ad, bd = a.double(), b.double()
            scale = (ad.abs() @ bd.abs()).max().item() + bias.abs().max().item()
            ha, hb, hbias = a.to("hpu"), b.to("hpu"), bias.to("hpu")
            mm = (ha @ hb).cpu()
            _judge(mm, a @ b, ad @ bd, scale, name + " mm")
            lin = torch.addmm(hbias, ha, hb).cpu()
            _judge(lin, torch.addmm(bias, a, b), torch.addmm(bias.double(), ad, bd), scale, name + " addmm")
            outs += [mm, lin]
    finally:
        torch.set_num_threads(prev)
    return outs


def test_products_vs_cpu_and_workers_same_bits():
    """The small kernel's products are the same bits on 1 and 2 workers (the last shape,
    past its bound, runs on OpenBLAS, whose split may differ in the last bits)."""
    one, two = _products(1), _products(2)
    for x, y in list(zip(one, two))[:-2]:
        assert torch.equal(x, y)


def test_linear_forward_backward_compiled():
    """A transformer feed-forward block (1024 rows, 64 -> 256 -> 64) compiled with
    hpu_backend: output and every gradient against CPU, judged from float64."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(16, 64, 64, generator=gen)
    w1, b1 = torch.randn(256, 64, generator=gen) / 8, torch.randn(256, generator=gen)
    w2, b2 = torch.randn(64, 256, generator=gen) / 16, torch.randn(64, generator=gen)
    g = torch.randn(16, 64, 64, generator=gen)

    def ff(x, w1, b1, w2, b2):
        return torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, w1, b1)), w2, b2)

    def run(fn, dev, dtype):
        ps = [t.detach().to(dev, dtype).clone().requires_grad_() for t in (x, w1, b1, w2, b2)]
        out = fn(*ps)
        out.backward(g.to(dev, dtype))
        return [out.detach().cpu()] + [p.grad.cpu() for p in ps]

    hpu = run(torch.compile(ff, backend="hpu_backend"), "hpu", torch.float32)
    cpu = run(ff, "cpu", torch.float32)
    ref = run(ff, "cpu", torch.float64)
    for name, h, c, r in zip(["out", "dx", "dw1", "db1", "dw2", "db2"], hpu, cpu, ref):
        _judge(h, c, r, r.abs().max().item() + 1, name)


def test_dropout_output_matches_mask():
    """Eager dropout (the Philox words and the float32 lanes): the output is exactly x times
    the mask times float32(1/(1-p)), and the keep rate is 1-p; infinities and NaNs keep
    their product (inf * 0 is NaN, as on CPU)."""
    torch.hpu.manual_seed(11)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(16, 4, 64, 64, generator=gen)
    x.view(-1)[:5] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 1e-45])
    for p in (0.1, 0.5):
        out, mask = torch.native_dropout(x.to("hpu"), p, True)
        out, mask = out.cpu(), mask.cpu()
        scale = torch.tensor(1 / (1 - p), dtype=torch.float32)
        want = x * mask.float() * scale
        assert torch.equal(out.isnan(), want.isnan())
        assert torch.equal(out.nan_to_num(), want.nan_to_num())
        rate = mask.float().mean().item()
        assert abs(rate - (1 - p)) < 0.01, rate
    # the same seed gives the same mask; training-mode functional dropout uses it too
    torch.hpu.manual_seed(11)
    a = torch.nn.functional.dropout(x.to("hpu"), 0.1, True).cpu()
    torch.hpu.manual_seed(11)
    b = torch.nn.functional.dropout(x.to("hpu"), 0.1, True).cpu()
    assert torch.equal(a.nan_to_num(), b.nan_to_num())


_LAZY = r"""
import torch, habana_frameworks.torch.core as htcore
import test_xformer_s23 as t
outs = t._products(2)
t.test_dropout_output_matches_mask()
print("ok", len(outs))
"""


def test_lazy_mode():
    env = dict(os.environ, PT_HPU_LAZY_MODE="1")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _LAZY], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
