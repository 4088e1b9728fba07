"""Matrix products (mm, addmm, bmm, ...) lowered to Go's GEMM.

Every lowering first runs the op on meta tensors: that validates shapes and dtypes with
torch's own checks (so errors match the CPU ones) and yields the result's shape. Float
dtypes (float32, bfloat16, float16, float64) run natively; others go to the CPU fallback.
"""
from __future__ import annotations

import torch

from .. import _native
from .registry import NotNative, native

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def meta(v):
    """A meta-tensor twin of v (same shape, strides, dtype); other values unchanged."""
    if isinstance(v, torch.Tensor):
        return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
    if isinstance(v, (list, tuple)):
        return type(v)(meta(x) for x in v)
    return v


def _scalar(v) -> float:
    if isinstance(v, torch.Tensor):
        v = v.item()
    if isinstance(v, complex):
        raise NotNative
    return float(v)


_CNAME = {torch.float32: "float", torch.float64: "double", torch.bfloat16: "c10::BFloat16",
          torch.float16: "c10::Half"}
_TNAME = {torch.float32: "Float", torch.float64: "Double", torch.bfloat16: "BFloat16",
          torch.float16: "Half"}


def _tn(d):
    return _TNAME.get(d, str(d).replace("torch.", ""))


def _check_dtypes(*ts: torch.Tensor, op: str = "") -> None:
    """Same-dtype check with the CPU kernels' messages, then: floats only natively."""
    d = ts[0].dtype
    for t in ts[1:]:
        if t.dtype != d:
            if op == "mm":
                raise RuntimeError("expected m1 and m2 to have the same dtype, but got: "
                                   f"{_CNAME.get(d, d)} != {_CNAME.get(t.dtype, t.dtype)}")
            if op == "addmm":
                raise RuntimeError(f"self and mat2 must have the same dtype, but got {_tn(d)} and {_tn(t.dtype)}")
            if op == "dot":
                raise RuntimeError("dot : expected both vectors to have same dtype, but found "
                                   f"{_tn(d)} and {_tn(t.dtype)}")
            raise RuntimeError(f"expected scalar type {_tn(d)} but found {_tn(t.dtype)}")
    for t in ts:
        if t.dtype not in _FLOATS:
            raise NotNative


def resize_out(out: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Resize an out= tensor to the shape the meta kernel produced (torch's semantics)."""
    if out.shape != m.shape:
        out.resize_(m.shape)
    return out


def gemm(out3, a3, b3, self3=None, alpha=1.0, beta=0.0, naive=False) -> None:
    """out3 = alpha * a3 @ b3 + beta * self3 over 3-D views (self3 already broadcast).

    naive: torch's small-bmm loop (k-order sums) instead of the BLAS path."""
    if out3.numel() == 0:
        return
    ts = [out3, a3, b3]
    if self3 is not None and beta != 0:
        ts.append(self3)
    _native.run("bgemm", ts, (int(naive),), (float(alpha), float(beta)))


@native("aten::mm", "aten::mm.out")
def mm(self, mat2, *, out=None):
    m = aten.mm(meta(self), meta(mat2)) if out is None else aten.mm.out(meta(self), meta(mat2), out=meta(out))
    _check_dtypes(self, mat2, op="mm")
    if out is None:
        out = torch.empty(m.shape, dtype=m.dtype, device=self.device)
    else:
        resize_out(out, m)
    gemm(out.unsqueeze(0), self.unsqueeze(0), mat2.unsqueeze(0))
    return out


@native("aten::bmm", "aten::bmm.out")
def bmm(self, mat2, *, out=None):
    m = aten.bmm(meta(self), meta(mat2)) if out is None else aten.bmm.out(meta(self), meta(mat2), out=meta(out))
    _check_dtypes(self, mat2)
    if out is None:
        out = torch.empty(m.shape, dtype=m.dtype, device=self.device)
    else:
        resize_out(out, m)
    # CPU bmm runs its own loop instead of BLAS when one product is this small
    naive = out.dtype in (torch.float32, torch.float64) and \
        self.shape[1] * self.shape[2] * mat2.shape[2] < 400
    gemm(out, self, mat2, naive=naive)
    return out


@native("aten::addmm", "aten::addmm.out")
def addmm(self, mat1, mat2, *, beta=1, alpha=1, out=None):
    args = (meta(self), meta(mat1), meta(mat2))
    m = aten.addmm(*args, beta=beta, alpha=alpha) if out is None else \
        aten.addmm.out(*args, beta=beta, alpha=alpha, out=meta(out))
    _check_dtypes(self, mat1, mat2, op="addmm")
    a, b = _scalar(alpha), _scalar(beta)
    if out is None:
        out = torch.empty(m.shape, dtype=m.dtype, device=mat1.device)
    else:
        resize_out(out, m)
    gemm(out.unsqueeze(0), mat1.unsqueeze(0), mat2.unsqueeze(0),
         self.expand(m.shape).unsqueeze(0), a, b)
    return out


@native("aten::addmm_")
def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    aten.addmm_(meta(self), meta(mat1), meta(mat2), beta=beta, alpha=alpha)
    _check_dtypes(self, mat1, mat2, op="addmm")
    s = self.unsqueeze(0)
    gemm(s, mat1.unsqueeze(0), mat2.unsqueeze(0), s, _scalar(alpha), _scalar(beta))
    return self


@native("aten::baddbmm", "aten::baddbmm.out")
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1, out=None):
    args = (meta(self), meta(batch1), meta(batch2))
    m = aten.baddbmm(*args, beta=beta, alpha=alpha) if out is None else \
        aten.baddbmm.out(*args, beta=beta, alpha=alpha, out=meta(out))
    _check_dtypes(self, batch1, batch2)
    if out is None:
        out = torch.empty(m.shape, dtype=m.dtype, device=batch1.device)
    else:
        resize_out(out, m)
    gemm(out, batch1, batch2, self.expand(m.shape), _scalar(alpha), _scalar(beta))
    return out


@native("aten::baddbmm_")
def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    aten.baddbmm_(meta(self), meta(batch1), meta(batch2), beta=beta, alpha=alpha)
    _check_dtypes(self, batch1, batch2)
    gemm(self, batch1, batch2, self, _scalar(alpha), _scalar(beta))
    return self


@native("aten::addmv", "aten::addmv.out")
def addmv(self, mat, vec, *, beta=1, alpha=1, out=None):
    args = (meta(self), meta(mat), meta(vec))
    m = aten.addmv(*args, beta=beta, alpha=alpha) if out is None else \
        aten.addmv.out(*args, beta=beta, alpha=alpha, out=meta(out))
    _check_dtypes(self, mat, vec)
    if out is None:
        out = torch.empty(m.shape, dtype=m.dtype, device=mat.device)
    else:
        resize_out(out, m)
    gemm(out.unsqueeze(0).unsqueeze(-1), mat.unsqueeze(0), vec.unsqueeze(0).unsqueeze(-1),
         self.expand(m.shape).unsqueeze(0).unsqueeze(-1), _scalar(alpha), _scalar(beta))
    return out


@native("aten::dot", "aten::dot.out")
def dot(self, tensor, *, out=None):
    m = aten.dot(meta(self), meta(tensor)) if out is None else aten.dot.out(meta(self), meta(tensor), out=meta(out))
    _check_dtypes(self, tensor, op="dot")
    if out is None:
        out = torch.empty(m.shape, dtype=m.dtype, device=self.device)
    else:
        resize_out(out, m)
    gemm(out.view(1, 1, 1), self.view(1, 1, -1),
         tensor.unsqueeze(0).unsqueeze(-1))
    return out
