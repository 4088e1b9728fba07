"""softmax / log_softmax forward and backward on hpu against torch CPU (session 20: the
float32 rows moved to AVX2 intrinsics, with exp skipped for masked trailing vectors).

float32 is judged against a float64 reference (hpu's error at most a small multiple of
CPU float32's own, plus a few ulps), bfloat16 loosely against CPU; non-finite results
(fully -inf rows, NaN, +inf inputs) must sit where CPU's are. Row lengths 1..1000, dims other
than the last, non-contiguous and channels_last inputs, causal masks, huge values; one and
two kernel workers give the same bits. Eager here; lazy mode and the HPUSIM_ISA caps
(avx2, generic) in subprocesses."""
import os
import subprocess
import sys

import pytest
import torch

import habana_frameworks.torch.core as htcore

LENGTHS = [1, 7, 16, 63, 64, 65, 1000]


def _rows(gen, shape, kind):
    """A float32 tensor of the given kind along its last dim."""
    x = torch.randn(*shape, generator=gen) * 3
    n = shape[-1]
    if kind == "causal":
        mask = torch.ones(shape[-2], n, dtype=torch.bool).triu(1)
        x = x.masked_fill(mask, float("-inf"))
    elif kind == "special":  # a fully -inf row, a NaN, a +inf, huge values, a far tail
        x = x.reshape(-1, n).clone()
        x[0] = float("-inf")
        if x.shape[0] > 1:
            x[1, n // 2] = float("nan")
        if x.shape[0] > 2:
            x[2, n - 1] = float("inf")
        if x.shape[0] > 3:
            x[3] = torch.randn(n, generator=gen) * 1e38
        if x.shape[0] > 4:
            x[4] = -torch.rand(n, generator=gen) * 120
            x[4, 0] = 0
        x = x.reshape(shape)
    return x


def _run(x, dim, log, dtype, device, grad):
    t = x.detach().to(device=device, dtype=dtype).requires_grad_()
    y = torch.log_softmax(t, dim) if log else torch.softmax(t, dim)
    y.backward(grad.to(device=device, dtype=dtype))
    htcore.mark_step()
    return y.detach().cpu(), t.grad.cpu()


def _judge(got, cpu, ref, what):
    """got/cpu float32 against float64 ref: same non-finite places; finite error at most
    4x CPU's own plus 4 ulps of the row scale."""
    got, cpu = got.double(), cpu.double()
    fin = torch.isfinite(cpu)
    assert torch.equal(fin, torch.isfinite(got)), what + ": non-finite places differ"
    assert torch.equal(torch.isnan(cpu), torch.isnan(got)), what + ": NaN places differ"
    assert torch.equal(cpu[~fin & ~torch.isnan(cpu)], got[~fin & ~torch.isnan(got)]), what + ": infinities differ"
    if fin.any():
        scale = ref[fin].abs().max().item() if torch.isfinite(ref[fin]).all() else cpu[fin].abs().max().item()
        e_got = (got[fin] - ref[fin]).abs().max().item()
        e_cpu = (cpu[fin] - ref[fin]).abs().max().item()
        assert e_got <= 4 * e_cpu + 4 * 2.0 ** -23 * max(scale, 1e-30), \
            f"{what}: hpu error {e_got:.3g}, cpu {e_cpu:.3g}, scale {scale:.3g}"


def _check(x, dim, log, seed, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    grad = torch.randn(x.shape, generator=gen)
    got = _run(x, dim, log, dtype, "hpu", grad)
    cpu = _run(x, dim, log, dtype, "cpu", grad)
    what = f"shape {tuple(x.shape)} dim {dim} log {log} {dtype}"
    if dtype == torch.float32:
        ref = _run(x.double(), dim, log, torch.float64, "cpu", grad.double())
        _judge(got[0], cpu[0], ref[0], what + " forward")
        _judge(got[1], cpu[1], ref[1], what + " backward")
    else:
        for g, c, part in zip(got, cpu, ("forward", "backward")):
            g, c = g.float(), c.float()
            assert torch.equal(torch.isnan(g), torch.isnan(c)), what + " " + part
            fin = torch.isfinite(c)
            tol = 3e-2 * max(c[fin].abs().max().item(), 1e-3) if fin.any() else 0
            assert (g[fin] - c[fin]).abs().max().item() <= tol, what + " " + part


def _cases():
    out = []
    for n in LENGTHS:
        for kind in ("normal", "causal", "special"):
            if kind == "causal" and n > 65:
                continue
            out.append((n, kind))
    return out


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("n,kind", _cases(), ids=[f"{n}-{k}" for n, k in _cases()])
def test_last_dim_float32(n, kind, log):
    gen = torch.Generator().manual_seed(n * 7 + len(kind))
    rows = 9 if n >= 1000 else 37
    shape = (rows, n) if kind != "causal" else (3, n, n)
    _check(_rows(gen, shape, kind), -1, log, seed=n)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_attention_shape(log):
    """The reference transformer's scores: f32[16,4,64,64], causal."""
    gen = torch.Generator().manual_seed(3)
    _check(_rows(gen, (16, 4, 64, 64), "causal"), -1, log, seed=4)


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_other_dims(dim, log):
    gen = torch.Generator().manual_seed(10 + dim)
    _check(_rows(gen, (5, 33, 17), "special"), dim, log, seed=dim)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_non_contiguous_and_channels_last(log):
    gen = torch.Generator().manual_seed(21)
    x = _rows(gen, (6, 64, 65), "normal")
    _check(x.transpose(1, 2), -1, log, seed=1)         # the softmax dim strided
    _check(x[:, ::2, 1:], -1, log, seed=2)              # sliced rows
    c = torch.randn(2, 24, 5, 7, generator=gen).contiguous(memory_format=torch.channels_last)
    for dim in (1, -1):
        _check(c, dim, log, seed=3 + dim)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("n", [7, 64, 1000])
def test_bfloat16(n, log):
    gen = torch.Generator().manual_seed(30 + n)
    _check(_rows(gen, (24, n), "normal"), -1, log, seed=n, dtype=torch.bfloat16)
    _check(_rows(gen, (2, 64, 64), "causal"), -1, log, seed=n + 1, dtype=torch.bfloat16)


def test_same_bits_on_one_and_two_threads():
    gen = torch.Generator().manual_seed(40)
    x = _rows(gen, (16, 4, 64, 64), "causal")
    grad = torch.randn(x.shape, generator=gen)
    old = torch.get_num_threads()
    outs = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            outs.append([t for log in (False, True) for t in _run(x, -1, log, torch.float32, "hpu", grad)])
    finally:
        torch.set_num_threads(old)
    for a, b in zip(*outs):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def _all():
    """Every check above once (the subprocess runs)."""
    for n, kind in _cases():
        for log in (False, True):
            test_last_dim_float32(n, kind, log)
    for log in (False, True):
        test_attention_shape(log)
        for dim in (0, 1, 2):
            test_other_dims(dim, log)
        test_non_contiguous_and_channels_last(log)
        test_bfloat16(64, log)


@pytest.mark.parametrize("env", [{"PT_HPU_LAZY_MODE": "1"}, {"HPUSIM_ISA": "avx2"}, {"HPUSIM_ISA": "generic"}],
                         ids=["lazy", "avx2", "generic"])
def test_in_subprocess(env):
    here = os.path.dirname(os.path.abspath(__file__))
    code = "import sys; sys.path.insert(0, %r); import test_softmax_s20 as t; t._all(); print('ok')" % here
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-4000:]
