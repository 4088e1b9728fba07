"""Matrix products (mm, addmm, bmm, ...) lowered to Go's GEMM.

The hot path validates with plain integer checks (dims, sizes, one float dtype, an out= of
the right shape and dtype) and computes the result's shape itself: running the op on meta
tensors costs hundreds of microseconds per call (addmm's meta is a Python decomposition).
Anything else (a mismatch, integer dtypes, an out= to resize) takes the slow path: the CPU
kernels' checks in their order and messages, then the meta op for what those leave
(broadcast errors, resize warnings). Float dtypes (float32, bfloat16, float16, float64) and
integers (exact loops, kernels/gemm_int.go) run natively; bool goes to the CPU fallback.
"""
from __future__ import annotations

import warnings

import torch

from .. import _native
from .registry import NotNative, native
from .out_resize import resize_out as _resize_out_warn

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)  # exact Go loops (gemm_int.go)


def meta(v):
    """A meta-tensor twin of v (same shape, strides, dtype); other values unchanged."""
    if isinstance(v, torch.Tensor):
        return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
    if isinstance(v, (list, tuple)):
        return type(v)(meta(x) for x in v)
    return v


_META_MEMO: dict = {}


def meta_of(op, *args):
    """op on meta twins of args, memoized by the tensors' shapes, strides and dtypes and the
    other arguments' values: a training loop asks the same question every step, and
    torch's Python meta kernels cost up to ~100 µs a call. A call that raises is not
    remembered, so bad arguments keep raising torch's own error. A list or tuple holding
    tensors is not memoized."""
    key = [op]
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((a.shape, a.stride(), a.dtype))
        elif isinstance(a, (list, tuple)):
            if any(isinstance(x, torch.Tensor) for x in a):
                return op(*(meta(x) for x in args))
            key.append((type(a), *a))
        else:
            key.append(a)
    k = tuple(key)
    try:
        return _META_MEMO[k]
    except KeyError:
        pass
    except TypeError:  # an unhashable argument
        return op(*(meta(a) for a in args))
    r = op(*(meta(a) for a in args))
    if len(_META_MEMO) >= 4096:
        _META_MEMO.clear()
    _META_MEMO[k] = r
    return r


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
        if t.dtype not in _FLOATS and t.dtype not in _INTS:
            raise NotNative


def _meta_out(op, *args, **kwargs):
    """op's out= checks on meta twins, without the meta resize's warning: the real out=
    is resized (and warned about, once) by resize_out."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="An output with one or more elements was resized")
        return op(*args, **kwargs)


def resize_out(out: torch.Tensor, m) -> torch.Tensor:
    """Resize an out= tensor to m's shape (a meta kernel's result or a torch.Size), with
    CPU's deprecation warning when it had elements (out_resize's one rule)."""
    shape = m if isinstance(m, torch.Size) else m.shape
    if out.shape != shape:
        _resize_out_warn(out, shape)
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


def _fast_out(out, shape, dtype) -> bool:
    """out= needs neither a resize (with its warning) nor a dtype error."""
    return out is None or (out.dtype == dtype and out.shape == shape)


def _bcast_ok(t: torch.Tensor, shape) -> bool:
    """t expands to shape (trailing-aligned, sizes equal or 1)."""
    if t.dim() > len(shape):
        return False
    for a, b in zip(reversed(t.shape), reversed(shape)):
        if a != b and a != 1:
            return False
    return True


def _out_dtype_check(out, dtype) -> None:
    if out is not None and out.dtype != dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {_CNAME.get(dtype, dtype)}, "
                           f"but got {_CNAME.get(out.dtype, out.dtype)} instead")


def _inplace_check(self: torch.Tensor, shape) -> None:
    if tuple(self.shape) != tuple(shape):
        raise RuntimeError(f"Bad in-place call: input tensor size {list(self.shape)} and output "
                           f"tensor size {list(shape)} should match")


def _new_out(out, shape, dtype, device):
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    return resize_out(out, torch.Size(shape))


def _mm_checks(a: torch.Tensor, b: torch.Tensor, out) -> None:
    """CPU mm's checks, in its order."""
    if a.dim() != 2:
        raise RuntimeError("self must be a matrix")
    if b.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} "
                           f"and {b.shape[0]}x{b.shape[1]})")
    _out_dtype_check(out, a.dtype)
    _check_dtypes(a, b, op="mm")


@native("aten::mm", "aten::mm.out")
def mm(self, mat2, *, out=None):
    d = self.dtype
    if (self.dim() == 2 and mat2.dim() == 2 and self.shape[1] == mat2.shape[0]
            and d in _FLOATS and mat2.dtype == d
            and _fast_out(out, (self.shape[0], mat2.shape[1]), d)):
        shape = (self.shape[0], mat2.shape[1])
    else:
        _mm_checks(self, mat2, out)
        m = aten.mm(meta(self), meta(mat2)) if out is None else _meta_out(aten.mm.out, meta(self), meta(mat2), out=meta(out))
        shape = m.shape
    out = _new_out(out, shape, d, self.device)
    gemm(out.unsqueeze(0), self.unsqueeze(0), mat2.unsqueeze(0))
    return out


def _bmm_checks(b1: torch.Tensor, b2: torch.Tensor) -> None:
    """CPU bmm/baddbmm's shape checks."""
    if b1.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b2.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b2.shape[0] != b1.shape[0] or b2.shape[1] != b1.shape[2]:
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{b1.shape[0]}, {b1.shape[2]}] but got: [{b2.shape[0]}, {b2.shape[1]}].")


def _bmm_fast(b1: torch.Tensor, b2: torch.Tensor) -> bool:
    return (b1.dim() == 3 and b2.dim() == 3 and b1.shape[0] == b2.shape[0]
            and b1.shape[2] == b2.shape[1] and b1.dtype in _FLOATS and b2.dtype == b1.dtype)


@native("aten::bmm", "aten::bmm.out")
def bmm(self, mat2, *, out=None):
    d = self.dtype
    if _bmm_fast(self, mat2) and _fast_out(out, (self.shape[0], self.shape[1], mat2.shape[2]), d):
        shape = (self.shape[0], self.shape[1], mat2.shape[2])
    else:
        _bmm_checks(self, mat2)
        _out_dtype_check(out, mat2.dtype)  # CPU's result takes batch2's dtype
        if mat2.dtype != d:
            raise RuntimeError(f"expected scalar type {_tn(d)} but found {_tn(mat2.dtype)}")
        m = aten.bmm(meta(self), meta(mat2))  # out='s checks are above (bmm's C++ meta would warn after we return)
        _check_dtypes(self, mat2)
        shape = m.shape
    out = _new_out(out, shape, d, self.device)
    # CPU bmm runs its own loop instead of BLAS when one product is this small
    naive = out.dtype in (torch.float32, torch.float64) and \
        self.shape[1] * self.shape[2] * mat2.shape[2] < 400
    gemm(out, self, mat2, naive=naive)
    return out


def _addmm_checks(self, mat1, mat2, out=None, inplace=False) -> None:
    """CPU addmm's checks, in its order (the expand of self raises on its own)."""
    if self.dtype != mat2.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {_tn(self.dtype)} and {_tn(mat2.dtype)}")
    if mat1.dtype != mat2.dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_tn(mat1.dtype)} and {_tn(mat2.dtype)}")
    if mat1.dim() != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {mat1.dim()}-D tensor")
    if mat2.dim() != 2:
        raise RuntimeError(f"mat2 must be a matrix, got {mat2.dim()}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} "
                           f"and {mat2.shape[0]}x{mat2.shape[1]})")
    shape = (mat1.shape[0], mat2.shape[1])
    _out_dtype_check(out, mat1.dtype)
    if inplace:
        _inplace_check(self, shape)
    else:
        self.expand(shape)


def _addmm_fast(self, mat1, mat2) -> bool:
    d = self.dtype
    return (mat1.dim() == 2 and mat2.dim() == 2 and mat1.shape[1] == mat2.shape[0]
            and d in _FLOATS and mat1.dtype == d and mat2.dtype == d)


@native("aten::addmm", "aten::addmm.out")
def addmm(self, mat1, mat2, *, beta=1, alpha=1, out=None):
    if _addmm_fast(self, mat1, mat2) and _bcast_ok(self, (mat1.shape[0], mat2.shape[1])) and \
            _fast_out(out, (mat1.shape[0], mat2.shape[1]), self.dtype):
        shape = (mat1.shape[0], mat2.shape[1])
    else:
        _addmm_checks(self, mat1, mat2, out)
        args = (meta(self), meta(mat1), meta(mat2))
        m = aten.addmm(*args, beta=beta, alpha=alpha) if out is None else \
            _meta_out(aten.addmm.out, *args, beta=beta, alpha=alpha, out=meta(out))
        _check_dtypes(self, mat1, mat2, op="addmm")
        shape = m.shape
    a, b = _scalar(alpha), _scalar(beta)
    out = _new_out(out, shape, mat1.dtype, mat1.device)
    gemm(out.unsqueeze(0), mat1.unsqueeze(0), mat2.unsqueeze(0),
         self.expand(shape).unsqueeze(0), a, b)
    return out


@native("aten::addmm_")
def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    if not (_addmm_fast(self, mat1, mat2) and tuple(self.shape) == (mat1.shape[0], mat2.shape[1])):
        _addmm_checks(self, mat1, mat2, inplace=True)
        aten.addmm_(meta(self), meta(mat1), meta(mat2), beta=beta, alpha=alpha)
        _check_dtypes(self, mat1, mat2, op="addmm")
    s = self.unsqueeze(0)
    gemm(s, mat1.unsqueeze(0), mat2.unsqueeze(0), s, _scalar(alpha), _scalar(beta))
    return self


def _baddbmm_checks(self, batch1, batch2, out=None, inplace=False) -> None:
    """CPU baddbmm's checks, in its order."""
    shape = (batch1.size(0), batch1.size(1), batch2.size(2))
    if not inplace:
        self.expand(shape)
    if self.dtype != batch1.dtype:
        raise RuntimeError(f"Input dtypes must be the same, got: input {_CNAME.get(self.dtype, self.dtype)}, "
                           f"batch1: {_CNAME.get(batch1.dtype, batch1.dtype)}, "
                           f"batch2: {_CNAME.get(batch2.dtype, batch2.dtype)}")
    _bmm_checks(batch1, batch2)
    _out_dtype_check(out, batch2.dtype)  # CPU's result takes batch2's dtype
    if batch2.dtype != batch1.dtype:
        raise RuntimeError(f"expected scalar type {_tn(batch1.dtype)} but found {_tn(batch2.dtype)}")
    if inplace:
        _inplace_check(self, shape)


@native("aten::baddbmm", "aten::baddbmm.out")
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1, out=None):
    d = self.dtype
    if _bmm_fast(batch1, batch2) and batch1.dtype == d and \
            _bcast_ok(self, (batch1.shape[0], batch1.shape[1], batch2.shape[2])) and \
            _fast_out(out, (batch1.shape[0], batch1.shape[1], batch2.shape[2]), d):
        shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    else:
        _baddbmm_checks(self, batch1, batch2, out)
        args = (meta(self), meta(batch1), meta(batch2))
        m = aten.baddbmm(*args, beta=beta, alpha=alpha) if out is None else \
            _meta_out(aten.baddbmm.out, *args, beta=beta, alpha=alpha, out=meta(out))
        _check_dtypes(self, batch1, batch2)
        shape = m.shape
    out = _new_out(out, shape, batch1.dtype, batch1.device)
    gemm(out, batch1, batch2, self.expand(shape), _scalar(alpha), _scalar(beta))
    return out


@native("aten::baddbmm_")
def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    if not (_bmm_fast(batch1, batch2) and batch1.dtype == self.dtype and
            tuple(self.shape) == (batch1.shape[0], batch1.shape[1], batch2.shape[2])):
        _baddbmm_checks(self, batch1, batch2, inplace=True)
        aten.baddbmm_(meta(self), meta(batch1), meta(batch2), beta=beta, alpha=alpha)
        _check_dtypes(self, batch1, batch2)
    gemm(self, batch1, batch2, self, _scalar(alpha), _scalar(beta))
    return self


def _addmv_checks(self, mat, vec) -> None:
    """CPU addmv's shape checks."""
    if not (mat.dim() == 2 and vec.dim() == 1 and self.dim() <= 1):
        raise RuntimeError(f"vector + matrix @ vector expected, got {self.dim()}, {mat.dim()}, {vec.dim()}")
    if not (mat.shape[1] == vec.shape[0] and (mat.shape[0] == self.numel() or self.numel() == 1)):
        raise RuntimeError(f"size mismatch, got input ({self.size(0)}), mat ({mat.shape[0]}x{mat.shape[1]}), "
                           f"vec ({vec.shape[0]})")


@native("aten::addmv", "aten::addmv.out")
def addmv(self, mat, vec, *, beta=1, alpha=1, out=None):
    _addmv_checks(self, mat, vec)
    d = mat.dtype
    if not (d in _FLOATS and vec.dtype == d and self.dtype == d and _fast_out(out, (mat.shape[0],), d)):
        if vec.dtype != d:
            raise RuntimeError(f"expected scalar type {_tn(d)} but found {_tn(vec.dtype)}")
        _out_dtype_check(out, d)
        if self.dtype != d:  # CPU copies self into the result (mat's dtype) first
            self = self.to(d)
        _check_dtypes(self, mat, vec)
    shape = (mat.shape[0],)
    out = _new_out(out, shape, d, mat.device)
    gemm(out.unsqueeze(0).unsqueeze(-1), mat.unsqueeze(0), vec.unsqueeze(0).unsqueeze(-1),
         self.expand(shape).unsqueeze(0).unsqueeze(-1), _scalar(alpha), _scalar(beta))
    return out


@native("aten::dot", "aten::dot.out")
def dot(self, tensor, *, out=None):
    d = self.dtype
    if not (self.dim() == 1 and tensor.dim() == 1 and self.shape[0] == tensor.shape[0]
            and d in _FLOATS and tensor.dtype == d and _fast_out(out, (), d)):
        if self.dim() != 1 or tensor.dim() != 1:
            raise RuntimeError(f"1D tensors expected, but got {self.dim()}D and {tensor.dim()}D tensors")
        _check_dtypes(self, tensor, op="dot")
        if self.numel() != tensor.numel():
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{self.numel()}] and src "
                               f"[{tensor.numel()}] to have the same number of elements, but got "
                               f"{self.numel()} and {tensor.numel()} elements respectively")
        if out is not None:  # the out= checks and resize warning
            _meta_out(aten.dot.out, meta(self), meta(tensor), out=meta(out))
    out = _new_out(out, (), d, self.device)
    gemm(out.view(1, 1, 1), self.view(1, 1, -1),
         tensor.unsqueeze(0).unsqueeze(-1))
    return out
