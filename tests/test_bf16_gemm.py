"""bfloat16 matrix products on hpu (the blocked VDPBF16PS kernel where the CPU has it, the
widening path elsewhere) at shapes that reach every path of the kernel: odd k, k past one
register pass, partial tiles, transposed, strided and offset views, linear layers forward
and backward. Judged against a float64 reference of the same bfloat16 operands: hpu may be
at most a small multiple of torch CPU bf16's own error from it, plus one bf16 rounding."""
import pytest
import torch
import torch.nn.functional as F

from conftest import hpu

GEMM_OPS = {"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "aten::linear"}


def rnd(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + 7 * sum(shape))
    return torch.randn(shape, generator=g).bfloat16()


def judge(got, cpu, ref):
    """got (hpu bf16), cpu (torch CPU bf16) and ref (float64 of the same operands)."""
    assert got.device.type == "hpu" and got.dtype == torch.bfloat16 and got.shape == ref.shape
    g, c = got.cpu().double(), cpu.double()
    ulp = ref.abs() * 2.0**-8 + 1e-6
    cpu_err = (c - ref).abs().max().item()
    err = ((g - ref).abs() - ulp).max().item()
    assert err <= max(2 * cpu_err, 1e-6), f"hpu error {err:.3g} beyond one bf16 ulp; torch CPU's {cpu_err:.3g}"


def no_fallback(counter):
    hit = {k: v for k, v in counter().items() if k in GEMM_OPS}
    assert not hit, f"fell back to CPU: {hit}"


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 3, 33), (13, 31, 65), (6, 64, 130), (70, 257, 50),
                                   (130, 96, 200), (9, 2051, 40)])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt", "strided"])
def test_mm_bf16_shapes(fallback_counter, m, k, n, layout):
    a, b = rnd(m, k), rnd(k, n, seed=1)
    if layout[0] == "t":
        a = a.t().contiguous().t()
    if layout[1:2] == "t":
        b = b.t().contiguous().t()
    ha, hb = hpu(a), hpu(b)
    if layout[0] == "t":
        ha = ha.t().contiguous().t()
    if layout[1:2] == "t":
        hb = hb.t().contiguous().t()
    if layout == "strided":  # every other column of a, an offset column slice of b
        wa, wb = rnd(m, 2 * k + 1, seed=2), rnd(k, n + 5, seed=3)
        a, b = wa[:, 1::2], wb[:, 3:3 + n]
        ha, hb = hpu(wa)[:, 1::2], hpu(wb)[:, 3:3 + n]
    assert ha.stride() == a.stride() and hb.stride() == b.stride()
    judge(torch.mm(ha, hb), torch.mm(a, b), a.double() @ b.double())
    no_fallback(fallback_counter)


@pytest.mark.parametrize("m,k,n", [(5, 33, 17), (64, 1024, 96), (200, 130, 64)])
def test_addmm_bf16(fallback_counter, m, k, n):
    a, b, bias = rnd(m, k), rnd(n, k, seed=1).t(), rnd(n, seed=2)
    ref = 0.5 * (a.double() @ b.double()) + 2 * bias.double()
    judge(torch.addmm(hpu(bias), hpu(a), hpu(b), beta=2, alpha=0.5),
          torch.addmm(bias, a, b, beta=2, alpha=0.5), ref)
    c = rnd(m, n, seed=3)
    hc = hpu(c)
    hc.addmm_(hpu(a), hpu(b))
    judge(hc, c.clone().addmm_(a, b), c.double() + a.double() @ b.double())
    no_fallback(fallback_counter)


@pytest.mark.parametrize("B,m,k,n", [(4, 17, 16, 33), (3, 64, 64, 64), (2, 100, 300, 70)])
def test_bmm_bf16(fallback_counter, B, m, k, n):
    a, b = rnd(B, m, k), rnd(B, n, k, seed=1).transpose(1, 2)
    judge(torch.bmm(hpu(a), hpu(b)), torch.bmm(a, b), a.double() @ b.double())
    no_fallback(fallback_counter)


@pytest.mark.parametrize("shape", [(64, 1024, 1024), (3, 37, 50)])
def test_linear_bf16_forward_backward(fallback_counter, shape):
    m, k, n = shape
    x, w, bias, gy = rnd(m, k), rnd(n, k, seed=1), rnd(n, seed=2), rnd(m, n, seed=3)
    xc, wc, bc = (t.clone().requires_grad_() for t in (x, w, bias))
    xh, wh, bh = (hpu(t).requires_grad_() for t in (x, w, bias))
    yc, yh = F.linear(xc, wc, bc), F.linear(xh, wh, bh)
    judge(yh, yc, x.double() @ w.double().t() + bias.double())
    yc.backward(gy)
    yh.backward(hpu(gy))
    judge(xh.grad, xc.grad, gy.double() @ w.double())
    judge(wh.grad, wc.grad, gy.double().t() @ x.double())
    no_fallback(fallback_counter)
