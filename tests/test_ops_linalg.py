"""Matrix products on hpu run natively (Go GEMM) and equal torch's CPU kernels."""
import pytest
import torch

from conftest import hpu

GEMM_OPS = {"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm",
            "aten::baddbmm_", "aten::addmv", "aten::dot"}


def no_gemm_fallback(counter):
    hit = {k: v for k, v in counter().items() if k in GEMM_OPS}
    assert not hit, f"fell back to CPU: {hit}"


def rnd(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(shape, generator=g).to(dtype)


def close(got, want, dtype):
    assert got.device.type == "hpu"
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype == torch.bfloat16:
        torch.testing.assert_close(got.cpu().float(), want.float(), atol=2e-2, rtol=1.6e-2)
    else:
        torch.testing.assert_close(got.cpu(), want)


DTYPES = [torch.float32, torch.bfloat16, torch.float64]
SHAPES = [(1, 1, 1), (3, 5, 7), (64, 33, 17), (17, 128, 64), (2, 0, 4), (3, 0, 2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt", "strided"])
def test_mm(fallback_counter, dtype, m, k, n, layout):
    a, b = rnd(m, k, dtype=dtype), rnd(k, n, dtype=dtype, seed=1)
    if layout[0] == "t":
        a = a.t().contiguous().t()
    if layout[1:2] == "t":
        b = b.t().contiguous().t()
    if layout == "strided":
        a = rnd(m, 2 * k, dtype=dtype)[:, ::2]
        b = rnd(k, 3 * n, dtype=dtype)[:, 1::3]
    want = torch.mm(a, b)
    ha, hb = hpu(a), hpu(b)
    if layout == "strided":
        ha = hpu(rnd(m, 2 * k, dtype=dtype))[:, ::2]
        hb = hpu(rnd(k, 3 * n, dtype=dtype))[:, 1::3]
    elif layout != "nn":
        ha = hpu(a.contiguous()).t().contiguous().t() if layout[0] == "t" else ha
        hb = hpu(b.contiguous()).t().contiguous().t() if layout[1] == "t" else hb
        assert ha.stride() == a.stride() and hb.stride() == b.stride()
    close(torch.mm(ha, hb), want, dtype)
    close(ha @ hb, want, dtype)
    no_gemm_fallback(fallback_counter)


def test_mm_really_uses_transposed_views(fallback_counter):
    a = rnd(40, 30)
    b = rnd(50, 30, seed=3)
    close(hpu(a) @ hpu(b).t(), a @ b.t(), torch.float32)
    close(hpu(b).t().t() @ hpu(a).t(), b @ a.t(), torch.float32)
    no_gemm_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias_shape", [(6,), (1, 6), (4, 6), (4, 1), ()])
@pytest.mark.parametrize("alpha,beta", [(1, 1), (0.5, 2.0), (2, 0)])
def test_addmm(fallback_counter, dtype, bias_shape, alpha, beta):
    s, a, b = rnd(*bias_shape, dtype=dtype, seed=5), rnd(4, 9, dtype=dtype), rnd(9, 6, dtype=dtype, seed=2)
    want = torch.addmm(s, a, b, alpha=alpha, beta=beta)
    close(torch.addmm(hpu(s), hpu(a), hpu(b), alpha=alpha, beta=beta), want, dtype)
    # in place and out=
    s2 = rnd(4, 6, dtype=dtype, seed=7)
    hs2 = hpu(s2)
    hs2.addmm_(hpu(a), hpu(b), alpha=alpha, beta=beta)
    close(hs2, s2.clone().addmm_(a, b, alpha=alpha, beta=beta), dtype)
    out = torch.empty(0, dtype=dtype, device="hpu")
    r = torch.addmm(hpu(s), hpu(a), hpu(b), alpha=alpha, beta=beta, out=out)
    assert r is out
    close(out, want, dtype)
    no_gemm_fallback(fallback_counter)


def test_addmm_beta_zero_ignores_nan(fallback_counter):
    s = torch.full((3, 4), float("nan"))
    a, b = rnd(3, 5), rnd(5, 4)
    close(torch.addmm(hpu(s), hpu(a), hpu(b), beta=0), torch.addmm(s, a, b, beta=0), torch.float32)
    no_gemm_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,m,k,n", [(1, 3, 4, 5), (6, 17, 8, 33), (3, 1, 64, 1), (0, 2, 2, 2), (2, 4, 0, 3)])
def test_bmm_baddbmm(fallback_counter, dtype, B, m, k, n):
    a, b = rnd(B, m, k, dtype=dtype), rnd(B, k, n, dtype=dtype, seed=3)
    close(torch.bmm(hpu(a), hpu(b)), torch.bmm(a, b), dtype)
    # transposed batch operands, as attention's backward produces
    at, bt = a.transpose(1, 2).contiguous(), b.transpose(1, 2).contiguous()
    close(torch.bmm(hpu(at).transpose(1, 2), hpu(bt).transpose(1, 2)), torch.bmm(a, b), dtype)
    s = rnd(B, m, n, dtype=dtype, seed=9)
    want = torch.baddbmm(s, a, b, alpha=0.5, beta=1.5)
    close(torch.baddbmm(hpu(s), hpu(a), hpu(b), alpha=0.5, beta=1.5), want, dtype)
    close(torch.baddbmm(hpu(s[:1, :1]), hpu(a), hpu(b)), torch.baddbmm(s[:1, :1], a, b), dtype)
    hs = hpu(s)
    hs.baddbmm_(hpu(a), hpu(b), alpha=0.5, beta=1.5)
    close(hs, want, dtype)
    out = torch.empty(0, dtype=dtype, device="hpu")
    torch.bmm(hpu(a), hpu(b), out=out)
    close(out, torch.bmm(a, b), dtype)
    no_gemm_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_shapes_and_vectors(fallback_counter, dtype):
    for sa, sb in [((5,), (5,)), ((4, 5), (5,)), ((5,), (5, 3)), ((2, 3, 4, 5), (5, 6)),
                   ((2, 3, 4, 5), (3, 5, 2)), ((7, 4, 5), (5,))]:
        a, b = rnd(*sa, dtype=dtype), rnd(*sb, dtype=dtype, seed=4)
        close(hpu(a) @ hpu(b), a @ b, dtype)
    no_gemm_fallback(fallback_counter)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_forward_backward(fallback_counter, dtype):
    x = rnd(8, 2, 16, dtype=dtype)
    lin = torch.nn.Linear(16, 12).to(dtype)
    hlin = torch.nn.Linear(16, 12).to(dtype)
    hlin.load_state_dict(lin.state_dict())
    hlin = hlin.to("hpu")
    xc = x.clone().requires_grad_()
    xh = hpu(x).requires_grad_()
    yc, yh = lin(xc), hlin(xh)
    close(yh, yc, dtype)
    g = rnd(*yc.shape, dtype=dtype, seed=11)
    yc.backward(g)
    yh.backward(hpu(g))
    close(xh.grad, xc.grad, dtype)
    close(hlin.weight.grad, lin.weight.grad, dtype)
    close(hlin.bias.grad, lin.bias.grad, dtype)
    hit = {k: v for k, v in fallback_counter().items() if k in GEMM_OPS}
    assert not hit


def test_errors_match_cpu(fallback_counter):
    a, b = rnd(3, 4), rnd(5, 6)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(hpu(a), hpu(b))
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(hpu(a), hpu(rnd(4, 2).double()))
    with pytest.raises(RuntimeError):
        torch.bmm(hpu(a), hpu(a))
    with pytest.raises(RuntimeError):
        torch.addmm(hpu(rnd(7, 7)), hpu(a), hpu(rnd(4, 2)))


def test_integer_mm_falls_back():
    a = torch.arange(12).reshape(3, 4)
    b = torch.arange(8).reshape(4, 2)
    assert torch.equal(torch.mm(hpu(a), hpu(b)).cpu(), a @ b)
