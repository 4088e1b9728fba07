"""float32 products of the MLP's sizes (m*n*k up to 2^22) on hpusim's AVX2 small kernel
(kernels/gemm_f32small*.go): mm, addmm with a broadcast bias, linear forward and backward
(the weight gradient's transposed activation, the batch as k), k past one 256-block, alpha
and beta, out=, sliced and transposed operands, against torch's CPU result judged against
float64; the same bits on 1 and 2 kernel workers; the route taken (bits differ from
OpenBLAS's, HPUSIM_F32SMALL=0, somewhere, both within tolerance); lazy mode in a
subprocess."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import habana_frameworks.torch  # noqa: F401

EPS = torch.finfo(torch.float32).eps


def _cases(gen):
    """(name, fn, operands): fn(*operands) on any device."""
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    bias128, bias64, bias10 = r(128), r(64), r(10)
    return [
        ("fc1_addmm", lambda x, w, b: torch.addmm(b, x, w.t()), (r(64, 64), r(128, 64), bias128)),
        ("fc2_addmm", lambda x, w, b: torch.addmm(b, x, w.t()), (r(64, 128), r(64, 128), bias64)),
        ("fc3_addmm", lambda x, w, b: torch.addmm(b, x, w.t()), (r(64, 64), r(10, 64), bias10)),
        ("fc3_dX", torch.mm, (r(64, 10), r(10, 64))),
        ("fc3_dW", lambda g, h: torch.mm(g.t(), h), (r(64, 10), r(64, 64))),
        ("fc2_dX", torch.mm, (r(64, 64), r(64, 128))),
        ("fc2_dW", lambda g, h: torch.mm(g.t(), h), (r(64, 64), r(64, 128))),
        ("fc1_dW", lambda g, h: torch.mm(g.t(), h), (r(64, 128), r(64, 64))),
        ("alpha_beta", lambda c, a, b: torch.addmm(c, a, b, beta=-1.5, alpha=0.5), (r(40, 72), r(40, 600), r(600, 72))),
        ("long_k_tA", lambda a, b: torch.mm(a.t(), b), (r(1000, 48), r(1000, 56))),
        ("sliced", lambda a, b: torch.mm(a[3:70, 5:133], b[2:130, 1:97]), (r(80, 140), r(140, 100))),
        ("both_T", lambda a, b: torch.mm(a.t(), b.t()), (r(96, 60), r(80, 96))),
    ]


def _judge(h, c, r, scale, what):
    """hpu's largest error from float64 at most 2x CPU's plus 4 float32 ulps of the scale."""
    h, c = h.double(), c.double()
    eh, ec = (h - r).abs().max().item(), (c - r).abs().max().item()
    tol = 2 * ec + 4 * EPS * scale
    assert eh <= tol, f"{what}: hpu {eh:.3e} vs CPU {ec:.3e} from float64 (scale {scale:.3e})"


def _scale(fn, ops):
    """The largest sum of absolute products: fn on the operands' absolute values."""
    return fn(*[x.double().abs() for x in ops]).abs().max().item()


def _check_all(threads=None):
    gen = torch.Generator().manual_seed(21)
    outs = {}
    prev = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        for name, fn, ops in _cases(gen):
            c = fn(*ops)
            r = fn(*[x.double() for x in ops])
            h = fn(*[x.to("hpu") for x in ops]).cpu()
            _judge(h, c, r, _scale(fn, ops), name)
            outs[name] = h
    finally:
        torch.set_num_threads(prev)
    return outs


def test_values_and_workers():
    one, two = _check_all(1), _check_all(2)
    for k in one:
        assert torch.equal(one[k], two[k]), f"{k}: 1 and 2 workers differ"


def test_out_and_linear_backward():
    gen = torch.Generator().manual_seed(5)
    x, w, b = torch.randn(64, 64, generator=gen), torch.randn(128, 64, generator=gen), torch.randn(128, generator=gen)
    out = torch.empty(64, 128, device="hpu")
    res = torch.addmm(b.to("hpu"), x.to("hpu"), w.to("hpu").t(), out=out)
    assert res.data_ptr() == out.data_ptr()
    ref = torch.addmm(b.double(), x.double(), w.double().t())
    scale_y = torch.addmm(b.double().abs(), x.double().abs(), w.double().abs().t()).max().item()
    _judge(out.cpu(), torch.addmm(b, x, w.t()), ref, scale_y, "out=")
    # linear forward and backward: input gradient and the weight gradient (batch as k)
    grads = {}
    for dev, dt in (("cpu", torch.float32), ("hpu", torch.float32), ("cpu", torch.float64)):
        xx = x.detach().to(dev, dt, copy=True).requires_grad_()
        ww = w.detach().to(dev, dt, copy=True).requires_grad_()
        y = torch.nn.functional.linear(xx, ww, b.to(dev, dt))
        y.backward(torch.cos(y.detach()))
        grads[(dev, dt)] = (y.detach().cpu(), xx.grad.cpu(), ww.grad.cpu())
    g = torch.cos(ref).abs()
    scales = (scale_y, (g @ w.double().abs()).max().item(), (g.t() @ x.double().abs()).max().item())
    for i, what in enumerate(("y", "dX", "dW")):
        _judge(grads[("hpu", torch.float32)][i], grads[("cpu", torch.float32)][i], grads[("cpu", torch.float64)][i],
               scales[i], f"linear {what}")


_SCRIPT = r"""
import sys, torch
sys.path.insert(0, {tests!r})
import test_gemm_s21 as t
outs = t._check_all()
torch.save(outs, {path!r})
"""


def _sub(tmp_path, tag, **env):
    path = str(tmp_path / f"{tag}.pt")
    e = dict(os.environ, **env)
    src = _SCRIPT.format(tests=os.path.dirname(__file__), path=path)
    p = subprocess.run([sys.executable, "-c", src], env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return torch.load(path)


@pytest.mark.skipif(not torch.backends.cpu.get_cpu_capability().startswith("AVX2"),
                    reason="the small kernel runs on AVX2 CPUs (AVX-512 ones use the f32dot kernel)")
def test_route_small_kernel(tmp_path):
    """The products of the MLP's sizes leave OpenBLAS: their bits differ from
    HPUSIM_F32SMALL=0's somewhere (both within tolerance, checked in the subprocesses)."""
    mine = _sub(tmp_path, "small")
    blas = _sub(tmp_path, "blas", HPUSIM_F32SMALL="0")
    for k in ("fc1_addmm", "fc2_addmm", "fc2_dX", "fc2_dW", "fc1_dW", "alpha_beta", "long_k_tA"):
        assert not torch.equal(mine[k], blas[k]), f"{k}: identical to OpenBLAS: the small kernel did not run"


def test_lazy_mode(tmp_path):
    if os.environ.get("PT_HPU_LAZY_MODE") == "1":
        _check_all()
        return
    lazy = _sub(tmp_path, "lazy", PT_HPU_LAZY_MODE="1")
    eager = _check_all()
    for k in eager:
        assert torch.equal(lazy[k], eager[k]), f"{k}: lazy and eager differ"
