"""Argument checks that the GEMM and arange lowerings do themselves (no meta op on the hot
path): every case must raise what torch CPU raises (type and message, device names aside)
or give CPU's result, shape and warnings."""
import warnings

import pytest
import torch

from habana_frameworks.torch._ops import registry

F32, F64, I64 = torch.float32, torch.float64, torch.int64


def z(*shape, dtype=F32, dev="cpu"):
    return torch.zeros(*shape, dtype=dtype, device=dev)


def outcome(fn, dev):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = fn(dev)
        except Exception as e:  # noqa: BLE001 - the exception itself is compared
            return type(e).__name__, str(e).replace("HPU", "").replace("torch.", "").split(" (Triggered")[0], None
    msgs = [str(x.message).split(" (Triggered")[0] for x in w]
    return "ok", (tuple(r.shape), r.dtype, r.cpu()), msgs


GEMM_CASES = {
    "mm 3d": lambda d: torch.mm(z(2, 3, 4, dev=d), z(4, 5, dev=d)),
    "mm mat2 1d": lambda d: torch.mm(z(2, 3, dev=d), z(3, dev=d)),
    "mm shape": lambda d: torch.mm(z(2, 3, dev=d), z(4, 5, dev=d)),
    "mm dtype": lambda d: torch.mm(z(2, 3, dev=d), z(3, 5, dtype=F64, dev=d)),
    "mm dtype+shape": lambda d: torch.mm(z(2, 3, dev=d), z(4, 5, dtype=F64, dev=d)),
    "mm out dtype": lambda d: torch.mm(z(2, 3, dev=d), z(3, 5, dev=d), out=z(2, 5, dtype=F64, dev=d)),
    "mm out resize": lambda d: torch.mm(z(2, 3, dev=d), z(3, 5, dev=d), out=z(3, 3, dev=d)),
    "mm out": lambda d: torch.mm(torch.ones(2, 3, device=d), torch.ones(3, 5, device=d), out=z(2, 5, dev=d)),
    "addmm 1d self": lambda d: torch.addmm(torch.ones(5, device=d), torch.ones(2, 3, device=d), torch.ones(3, 5, device=d)),
    "addmm bad self": lambda d: torch.addmm(z(3, dev=d), z(2, 3, dev=d), z(3, 5, dev=d)),
    "addmm 3d mat1": lambda d: torch.addmm(z(2, 5, dev=d), z(1, 2, 3, dev=d), z(3, 5, dev=d)),
    "addmm 1d mat2": lambda d: torch.addmm(z(2, 5, dev=d), z(2, 3, dev=d), z(3, dev=d)),
    "addmm shape": lambda d: torch.addmm(z(2, 5, dev=d), z(2, 3, dev=d), z(4, 5, dev=d)),
    "addmm dtype self": lambda d: torch.addmm(z(2, 5, dtype=F64, dev=d), z(2, 3, dev=d), z(3, 5, dev=d)),
    "addmm dtype mat1": lambda d: torch.addmm(z(2, 5, dev=d), z(2, 3, dtype=F64, dev=d), z(3, 5, dev=d)),
    "addmm dtype+dims": lambda d: torch.addmm(z(2, 5, dev=d), z(2, 3, 1, dtype=F64, dev=d), z(3, dev=d)),
    "addmm out dtype": lambda d: torch.addmm(z(2, 5, dev=d), z(2, 3, dev=d), z(3, 5, dev=d), out=z(2, 5, dtype=F64, dev=d)),
    "addmm out resize": lambda d: torch.addmm(z(2, 5, dev=d), z(2, 3, dev=d), z(3, 5, dev=d), out=z(3, dev=d)),
    "addmm_ bad self": lambda d: z(1, 5, dev=d).addmm_(z(2, 3, dev=d), z(3, 5, dev=d)),
    "addmm_ dtype": lambda d: z(2, 5, dev=d).addmm_(z(2, 3, dtype=F64, dev=d), z(3, 5, dtype=F64, dev=d)),
    "addmm int": lambda d: torch.addmm(torch.ones(2, 5, dtype=I64, device=d), torch.ones(2, 3, dtype=I64, device=d),
                                       torch.ones(3, 5, dtype=I64, device=d), alpha=2),
    "bmm 2d": lambda d: torch.bmm(z(2, 3, dev=d), z(3, 5, dev=d)),
    "bmm batch": lambda d: torch.bmm(z(2, 2, 3, dev=d), z(3, 3, 5, dev=d)),
    "bmm shape": lambda d: torch.bmm(z(2, 2, 3, dev=d), z(2, 4, 5, dev=d)),
    "bmm dtype": lambda d: torch.bmm(z(2, 2, 3, dev=d), z(2, 3, 5, dtype=F64, dev=d)),
    "bmm out dtype": lambda d: torch.bmm(z(2, 2, 3, dev=d), z(2, 3, 5, dev=d), out=z(2, 2, 5, dtype=F64, dev=d)),
    "baddbmm self bad": lambda d: torch.baddbmm(z(3, 2, 5, dev=d), z(2, 2, 3, dev=d), z(2, 3, 5, dev=d)),
    "baddbmm self bcast": lambda d: torch.baddbmm(torch.ones(5, device=d), torch.ones(2, 2, 3, device=d),
                                                  torch.ones(2, 3, 5, device=d)),
    "baddbmm 2d batch1": lambda d: torch.baddbmm(z(2, 2, 5, dev=d), z(2, 3, dev=d), z(2, 3, 5, dev=d)),
    "baddbmm shape": lambda d: torch.baddbmm(z(2, 2, 5, dev=d), z(2, 2, 3, dev=d), z(2, 4, 5, dev=d)),
    "baddbmm dtype self": lambda d: torch.baddbmm(z(2, 2, 5, dtype=F64, dev=d), z(2, 2, 3, dev=d), z(2, 3, 5, dev=d)),
    "baddbmm dtype batch2": lambda d: torch.baddbmm(z(2, 2, 5, dev=d), z(2, 2, 3, dev=d), z(2, 3, 5, dtype=F64, dev=d)),
    "baddbmm_ self bcast": lambda d: z(5, dev=d).baddbmm_(z(2, 2, 3, dev=d), z(2, 3, 5, dev=d)),
    "addmv bad self": lambda d: torch.addmv(z(3, dev=d), z(2, 3, dev=d), z(3, dev=d)),
    "addmv mat 1d": lambda d: torch.addmv(z(2, dev=d), z(3, dev=d), z(3, dev=d)),
    "addmv vec 2d": lambda d: torch.addmv(z(2, dev=d), z(2, 3, dev=d), z(3, 1, dev=d)),
    "addmv size": lambda d: torch.addmv(z(2, dev=d), z(2, 3, dev=d), z(4, dev=d)),
    "addmv dtype vec": lambda d: torch.addmv(z(2, dev=d), z(2, 3, dev=d), z(3, dtype=F64, dev=d)),
    "addmv dtype self": lambda d: torch.addmv(torch.ones(2, dtype=F64, device=d), torch.ones(2, 3, device=d),
                                              torch.ones(3, device=d)),
    "addmv self 2d": lambda d: torch.addmv(z(1, 2, dev=d), z(2, 3, dev=d), z(3, dev=d)),
    "dot 2d": lambda d: torch.dot(z(2, 3, dev=d), z(3, dev=d)),
    "dot size": lambda d: torch.dot(z(3, dev=d), z(4, dev=d)),
    "dot dtype": lambda d: torch.dot(z(3, dev=d), z(3, dtype=F64, dev=d)),
    "dot out resize": lambda d: torch.dot(torch.ones(3, device=d), torch.ones(3, device=d), out=z(2, dev=d)),
}


@pytest.mark.parametrize("name", list(GEMM_CASES))
def test_gemm_checks_match_cpu(name):
    want, got = outcome(GEMM_CASES[name], "cpu"), outcome(GEMM_CASES[name], "hpu")
    assert got[0] == want[0], (got, want)
    if want[0] != "ok":
        assert got[1] == want[1]
    else:
        assert got[1][:2] == want[1][:2] and torch.equal(got[1][2], want[1][2])
        assert len(got[2]) == len(want[2])


def test_valid_calls_skip_the_meta_op(monkeypatch):
    """The hot path never runs the op on meta tensors (that cost ~250 us per addmm)."""
    from habana_frameworks.torch._ops import linalg

    def boom(v):
        raise AssertionError("meta op on the hot path")
    monkeypatch.setattr(linalg, "meta", boom)
    a, b = torch.ones(4, 3, device="hpu"), torch.ones(3, 5, device="hpu")
    torch.addmm(torch.ones(5, device="hpu"), a, b)
    torch.mm(a, b, out=torch.empty(4, 5, device="hpu"))
    torch.bmm(a[None], b[None])
    torch.baddbmm(torch.ones(5, device="hpu"), a[None], b[None])
    torch.ones(4, 5, device="hpu").addmm_(a, b)
    torch.addmv(torch.ones(4, device="hpu"), a, torch.ones(3, device="hpu"))
    torch.dot(torch.ones(3, device="hpu"), torch.ones(3, device="hpu"))


ARANGE_CASES = [
    ((0., 0.5, 0.5), I64), ((0, 10, 0.5), I64), ((0.4, 3.7, 0.9), I64), ((1.5, 0.3, -0.4), torch.int16),
    ((0., 1e39, 1.), torch.float16), ((0., float("inf"), 1.), F32), ((0, float("nan"), 1), F64),
    ((5, 0, 1), torch.int32), ((0, 2 ** 62, 1e-300), F64), ((0, 10, 3), torch.bool),
    ((-3.5, 3.9, 1.2), I64), ((0, 10, 3), I64), ((10, 0, -3), I64), ((-5, -20, -4), torch.int8),
    ((0, 300, 7), torch.uint8), ((2, 2, 1), I64), ((0, 1, 0.3), torch.bfloat16), ((1, 2.5, 0.5), F64),
    ((0, 3, 1), F32),
]


@pytest.mark.parametrize("args,dtype", ARANGE_CASES, ids=[f"{a}-{d}" for a, d in ARANGE_CASES])
def test_arange_out_matches_cpu(args, dtype):
    def fn(dev):
        return torch.arange(*args, out=torch.empty(3, dtype=dtype, device=dev))
    want, got = outcome(fn, "cpu"), outcome(fn, "hpu")
    assert got[0] == want[0] and got[2] == want[2], (got, want)
    if want[0] != "ok":
        assert got[1] == want[1]
    else:
        assert got[1][:2] == want[1][:2] and torch.equal(got[1][2], want[1][2])


def test_arange_out_keeps_a_same_numel_shape():
    o = torch.empty(2, 3, device="hpu")
    assert torch.arange(0, 6, out=o).shape == (2, 3)
    assert torch.equal(o.cpu(), torch.arange(0, 6, out=torch.empty(2, 3)))
    assert registry.is_native(torch.ops.aten.arange.start_out)
