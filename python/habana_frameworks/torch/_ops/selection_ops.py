"""Selections, statistics, searches, counting and sampling lowered to Go
(kernels/selection.go, kernels/counting.go): median/nanmedian, kthvalue, mode, searchsorted
and bucketize, unique/unique_consecutive, histc/histogram/histogramdd, bincount and
multinomial (logspace, tril/triu_indices and repeat_interleave are range_factories.py's).

Each follows torch's CPU kernel (ties, NaN order, rounding) so results are bit-equal to
CPU's. Ops whose result size depends on the data (unique, bincount) compute on the device
and read back only the size, as the bridge does; argument errors
come from the meta kernels where torch has them, else from the CPU kernel's checks with its
messages. float64 and complex stay on the CPU fallback (HPU has neither).
"""
from __future__ import annotations

import math

import torch

from .. import _native
from ..hpu import random as hpu_random  # noqa: F401  (the generator _draw uses)
from .linalg import meta
from .nn_ops import _into
from .random_ops import _draw
from .registry import NotNative, native

aten = torch.ops.aten
_CODE = _native.DTYPE_CODE
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)
_INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
SEL_MEDIAN, SEL_NANMEDIAN, SEL_KTH, SEL_MODE = range(4)
HIST_BINARY, HIST_LINEAR, HIST_LINEAR_LOCAL = range(3)


_SCALAR_TYPE_NAMES = {torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char",
                      torch.uint8: "Byte", torch.bool: "Bool", torch.float32: "Float", torch.float64: "Double",
                      torch.float16: "Half", torch.bfloat16: "BFloat16"}


def _type_name(dt: torch.dtype) -> str:
    """c10's ScalarType name, as torch's messages print it."""
    return _SCALAR_TYPE_NAMES.get(dt, str(dt).removeprefix("torch."))


def _served(t: torch.Tensor, allow_bool: bool = False) -> None:
    """float64, complex and dtypes the kernels do not take go to the CPU fallback."""
    if t.dtype in _FLOATS or t.dtype in _INTS or (allow_bool and t.dtype == torch.bool):
        return
    raise NotNative


def _rows(t: torch.Tensor, d: int) -> torch.Tensor:
    """[M, N] view (or copy) of t with dim d last."""
    tt = t.movedim(d, -1)
    n = tt.shape[-1]
    try:
        return tt.view(-1, n)
    except RuntimeError:
        return tt.reshape(-1, n)


def _check_reduction_dim(name, self, dim):
    """CPU's zero-size check, which comes before the meta kernel's other checks."""
    n = max(self.dim(), 1)
    if -n <= dim < n and self.dim() and self.shape[dim % n] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {dim % n} to have non-zero size.")


def _select_dim(kind, self, dim, keepdim, k=0, mshape=None, values=None, indices=None):
    """values/indices of kind along dim, shaped as the meta kernel's result mshape."""
    x = self if self.dim() else self.view(1)
    d = dim % x.dim()
    rows = _rows(x, d)
    v = torch.empty(rows.shape[0], dtype=self.dtype, device=self.device)
    i = torch.empty(rows.shape[0], dtype=torch.int64, device=self.device)
    if rows.numel():
        _native.run("line_select", [v, i, rows], (kind, k))
    v, i = v.view(mshape), i.view(mshape)
    if values is not None:
        return _into(values, v), _into(indices, i)
    return v, i


# ------------------------------------------------------------------ median / nanmedian

class _shape_check_without_determinism_alert:
    """torch's meta kernels of median/nanmedian/mode (dim variants) raise the CUDA kernel's
    "does not have a deterministic implementation" alert under use_deterministic_algorithms
    (they count as a non-CPU device). The meta call here only checks arguments and gives the
    shape; the native kernels are deterministic (CPU's order), as torch's CPU ones."""

    def __enter__(self):
        self.on = torch.are_deterministic_algorithms_enabled()
        self.warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
        if self.on:
            torch.use_deterministic_algorithms(False)

    def __exit__(self, *exc):
        if self.on:
            torch.use_deterministic_algorithms(True, warn_only=self.warn_only)
        return False


def _median_dim(ignore_nan):
    kind = SEL_NANMEDIAN if ignore_nan else SEL_MEDIAN
    op = aten.nanmedian.dim if ignore_nan else aten.median.dim

    def fn(self, dim, keepdim=False, *, values=None, indices=None):
        _served(self)
        _check_reduction_dim("nanmedian" if ignore_nan else "median", self, dim)
        with _shape_check_without_determinism_alert():
            m = op(meta(self), dim, keepdim)[0]  # dim errors, result shape
        return _select_dim(kind, self, dim, keepdim, 0, m.shape, values, indices)
    return fn


def _median_all(ignore_nan):
    kind = SEL_NANMEDIAN if ignore_nan else SEL_MEDIAN

    def fn(self, *, out=None):
        _served(self)
        if self.numel() == 0:
            if not self.dtype.is_floating_point:
                raise NotNative  # CPU's error
            res = torch.full((), float("nan"), dtype=self.dtype, device=self.device)
            return res if out is None else _into(out, res)
        v, _ = _select_dim(kind, self.reshape(1, -1), 1, False, 0, ())
        return v if out is None else _into(out, v)
    return fn


for _nan, _name in ((False, "median"), (True, "nanmedian")):
    native(f"aten::{_name}.dim", f"aten::{_name}.dim_values")(_median_dim(_nan))
    native(f"aten::{_name}", f"aten::{_name}.out")(_median_all(_nan))


# --------------------------------------------------------------------------- kthvalue

@native("aten::kthvalue", "aten::kthvalue.values")
def kthvalue(self, k, dim=-1, keepdim=False, *, values=None, indices=None):
    _served(self)
    _check_reduction_dim("kthvalue", self, dim)
    m = aten.kthvalue(meta(self), k, dim, keepdim)[0]  # k and dim errors
    return _select_dim(SEL_KTH, self, dim, keepdim, k, m.shape, values, indices)


# ------------------------------------------------------------------------------- mode

@native("aten::mode", "aten::mode.values")
def mode(self, dim=-1, keepdim=False, *, values=None, indices=None):
    _served(self, allow_bool=True)
    _check_reduction_dim("mode", self, dim)
    with _shape_check_without_determinism_alert():
        m = aten.mode(meta(self), dim, keepdim)[0]
    return _select_dim(SEL_MODE, self, dim, keepdim, 0, m.shape, values, indices)


# ------------------------------------------------------------------ searchsorted / bucketize

def _searchsorted(seq, vals, out_int32=False, right=False, side=None, sorter=None, out=None,
                  scalar=False):
    _served(seq)
    mvals = torch.empty((), dtype=torch.result_type(seq, vals), device="meta") if scalar else meta(vals)
    m = aten.searchsorted.Tensor(meta(seq), mvals, out_int32=out_int32, right=right, side=side,
                                 sorter=None if sorter is None else meta(sorter))  # argument checks
    if side is not None:
        right = side == "right"
    common = torch.result_type(seq, vals)
    if common not in _FLOATS and common not in _INTS:
        raise NotNative
    if scalar:
        vals = torch.full((), vals, dtype=common, device=seq.device)
    elif vals.device != seq.device:
        raise NotNative
    seq, vals = seq.to(common), vals.to(common)
    res = torch.empty(m.shape, dtype=m.dtype, device=seq.device)
    if res.numel():
        n = seq.shape[-1]
        if seq.dim() == 1:
            s2, v2, o2 = seq.view(1, n), vals.reshape(1, -1), res.view(1, -1)
        else:
            k = vals.shape[-1]
            s2, v2, o2 = seq.reshape(-1, n), vals.reshape(-1, k), res.view(-1, k)
        ts = [o2, s2, v2]
        if sorter is not None:
            ts.append(sorter.reshape(s2.shape))
        _native.run("searchsorted", ts, (int(right),))
    return res if out is None else _into(out, res)


native("aten::searchsorted.Tensor", "aten::searchsorted.Tensor_out")(
    lambda sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None, out=None:
    _searchsorted(sorted_sequence, self, out_int32, right, side, sorter, out))
native("aten::searchsorted.Scalar", "aten::searchsorted.Scalar_out")(
    lambda sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None, out=None:
    _searchsorted(sorted_sequence, self, out_int32, right, side, sorter, out, scalar=True))


def _bucketize(self, boundaries, out_int32=False, right=False, out=None, scalar=False):
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    return _searchsorted(boundaries, self, out_int32, right, None, None, out, scalar)


native("aten::bucketize.Tensor", "aten::bucketize.Tensor_out")(
    lambda self, boundaries, *, out_int32=False, right=False, out=None:
    _bucketize(self, boundaries, out_int32, right, out))
native("aten::bucketize.Scalar", "aten::bucketize.Scalar_out")(
    lambda self, boundaries, *, out_int32=False, right=False, out=None:
    _bucketize(self, boundaries, out_int32, right, out, scalar=True))


# ------------------------------------------------------------------ unique / unique_consecutive

def _unique_flat(self, consecutive):
    """(values, inverse [self.shape], counts) of the flattened input, sized on the host."""
    _served(self, allow_bool=True)
    flat = self.reshape(-1)
    n = flat.numel()
    vals = torch.empty(n, dtype=self.dtype, device=self.device)
    inv = torch.empty(n, dtype=torch.int64, device=self.device)
    cnt = torch.empty(n, dtype=torch.int64, device=self.device)
    count = torch.zeros(1, dtype=torch.int64)  # host: reading it is the one sync
    if n:
        _native.run("unique", [vals, inv, cnt, count, flat], (int(consecutive),))
    k = int(count[0])
    return vals[:k].clone(), inv.view(self.shape), cnt[:k].clone()


def _empty_long(self):
    return torch.empty(0, dtype=torch.int64, device=self.device)


@native("aten::_unique2", "aten::_unique2.out")
def _unique2(self, sorted=True, return_inverse=False, return_counts=False, *, out0=None, out1=None, out2=None):
    v, i, c = _unique_flat(self, False)
    res = (v, i if return_inverse else _empty_long(self), c if return_counts else _empty_long(self))
    if out0 is None:
        return res
    return _into(out0, res[0]), _into(out1, res[1]), _into(out2, res[2])


@native("aten::_unique", "aten::_unique.out")
def _unique(self, sorted=True, return_inverse=False, *, out0=None, out1=None):
    v, i, _ = _unique_flat(self, False)
    res = (v, i if return_inverse else _empty_long(self))
    if out0 is None:
        return res
    return _into(out0, res[0]), _into(out1, res[1])


@native("aten::unique_consecutive", "aten::unique_consecutive.out")
def unique_consecutive(self, return_inverse=False, return_counts=False, dim=None, *,
                       out0=None, out1=None, out2=None):
    if dim is not None:
        raise NotNative  # unique_dim_consecutive: slices along dim
    v, i, c = _unique_flat(self, True)
    res = (v, i if return_inverse else _empty_long(self), c if return_counts else _empty_long(self))
    if out0 is None:
        return res
    return _into(out0, res[0]), _into(out1, res[1]), _into(out2, res[2])


# ---------------------------------------------------------------------- histograms

def _fmt(v: float) -> str:
    """A double as C++'s ostream prints it (6 significant digits)."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:g}"


def _hist_served(self):
    if self.dtype not in _FLOATS:
        raise NotNative


# Width of torch's CPU vectors (Vectorized<T>), which decides how its linspace rounds.
_VEC_BYTES = 64 if torch.backends.cpu.get_cpu_capability().startswith("AVX512") else 32


def _linspace(lo, hi, n, like):
    """Bin edges as CPU's float linspace rounds them (kernels/selection.go LinspaceCPU)."""
    res = torch.empty(n, dtype=like.dtype, device=like.device)
    _native.run("linspace_cpu", [res], (_VEC_BYTES // like.element_size(),), (float(lo), float(hi)))
    return res


def _run_hist(x2, weight, edges, algorithm, density):
    """hist of x2 [M, D] over the given edges (zeroed, accumulated, normalised)."""
    hist = torch.zeros([e.numel() - 1 for e in edges], dtype=x2.dtype, device=x2.device)
    ts = [hist, x2]
    if weight is not None:
        ts.append(weight.reshape(-1))
    ts += [e.reshape(-1) for e in edges]
    if x2.shape[0]:
        _native.run("histogramdd", ts, (algorithm, int(weight is not None), torch.get_num_threads()))
    if density:
        hist.div_(hist.sum())
        for d, e in enumerate(edges):
            shape = [1] * len(edges)
            shape[d] = e.numel() - 1
            hist.div_(e.reshape(-1).diff().reshape(shape))
    return hist


def _check_weight(x2, weight):
    if weight is None:
        return
    if weight.dtype != x2.dtype:
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided, input tensor and weight "
                           f"tensor should have the same dtype, but got input({x2.dtype}), and "
                           f"weight({weight.dtype})")
    if weight.numel() != x2.shape[0]:
        raise NotNative  # CPU's shape message


@native("aten::histc", "aten::histc.out")
def histc(self, bins=100, min=0, max=0, *, out=None):
    _hist_served(self)
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi and self.numel():
        mn, mx = torch.aminmax(self)
        lo, hi = float(mn), float(mx)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{_fmt(lo)}, {_fmt(hi)}] is not finite")
    if not lo < hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    edges = _linspace(lo, hi, bins + 1, self)
    hist = _run_hist(self.reshape(-1, 1), None, [edges], HIST_LINEAR, False)
    return hist if out is None else _into(out, hist)


def _outer_edges(x2, rng, name="torch.histogramdd"):
    """CPU's select_outer_bin_edges for x2 [M, D]: the range, else each column's min/max."""
    D = x2.shape[1]
    lo, hi = [0.0] * D, [1.0] * D
    if rng is not None:
        if len(rng) != 2 * D:
            raise RuntimeError(f"torch.histogramdd: for a {D}-dimensional histogram range should have "
                               f"{2 * D} elements, but got {len(rng)}")
        lo, hi = [float(rng[2 * d]) for d in range(D)], [float(rng[2 * d + 1]) for d in range(D)]
    elif x2.numel():
        mn, mx = torch.aminmax(x2, dim=0)
        lo, hi = mn.tolist(), mx.tolist()
    for d in range(D):
        if not (math.isfinite(lo[d]) and math.isfinite(hi[d])):
            raise RuntimeError(f"torch.histogramdd: dimension {d}'s range [{_fmt(lo[d])}, {_fmt(hi[d])}] "
                               "is not finite")
        if not lo[d] <= hi[d]:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {_fmt(lo[d])} "
                               f"max {_fmt(hi[d])} for dimension {d}")
        if lo[d] == hi[d]:
            lo[d], hi[d] = lo[d] - 0.5, hi[d] + 0.5
    return lo, hi


def _check_bins(bins):
    for d, b in enumerate(bins):
        if b <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {b} for dimension {d}")


@native("aten::histogram.bin_ct", "aten::histogram.bin_ct_out")
def histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False, hist=None, bin_edges=None):
    _hist_served(self)
    x2 = self.reshape(-1, 1)
    _check_bins([bins])
    lo, hi = _outer_edges(x2, range)
    edges = _linspace(lo[0], hi[0], bins + 1, self)
    _check_weight(x2, weight)
    h = _run_hist(x2, weight, [edges], HIST_LINEAR_LOCAL, density)
    if hist is None:
        return h, edges
    return _into(hist, h), _into(bin_edges, edges)


@native("aten::histogram.bins_tensor", "aten::histogram.bins_tensor_out")
def histogram_bins_tensor(self, bins, *, weight=None, density=False, hist=None, bin_edges=None):
    _hist_served(self)
    if bins.dtype != self.dtype or bins.dim() != 1:
        raise NotNative  # CPU's checks and messages
    if bins.numel() < 2:
        raise NotNative
    x2 = self.reshape(-1, 1)
    _check_weight(x2, weight)
    h = _run_hist(x2, weight, [bins], HIST_BINARY, density)
    edges = bins.clone()
    if hist is None:
        return h, edges
    return _into(hist, h), _into(bin_edges, edges)


def _dd_input(self):
    if self.dim() < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    return self.reshape(-1, self.shape[-1])


def _dd_edges(self, bins, range):
    _hist_served(self)
    x2 = _dd_input(self)
    if len(bins) != x2.shape[1]:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost dimension of the input.")
    lo, hi = _outer_edges(x2, range)
    return x2, [_linspace(lo[d], hi[d], bins[d] + 1, self) for d in builtins_range(len(bins))]


builtins_range = range


@native("aten::_histogramdd_bin_edges")
def _histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):
    _check_bins(bins)
    return _dd_edges(self, bins, range)[1]


@native("aten::_histogramdd_from_bin_cts", "aten::_histogramdd_from_bin_cts.out")
def _histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density=False, out=None):
    _check_bins(bins)
    x2, edges = _dd_edges(self, bins, range)
    _check_weight(x2, weight)
    h = _run_hist(x2, weight, edges, HIST_LINEAR_LOCAL, density)
    return h if out is None else _into(out, h)


@native("aten::_histogramdd_from_bin_tensors", "aten::_histogramdd_from_bin_tensors.out")
def _histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False, out=None):
    _hist_served(self)
    x2 = _dd_input(self)
    if len(bins) != x2.shape[1] or any(b.dtype != self.dtype or b.dim() != 1 or b.numel() < 2 for b in bins):
        raise NotNative  # CPU's checks and messages
    _check_weight(x2, weight)
    h = _run_hist(x2, weight, list(bins), HIST_BINARY, density)
    return h if out is None else _into(out, h)


# --------------------------------------------------------------------------- bincount

@native("aten::bincount", "aten::bincount.out")
def bincount(self, weights=None, minlength=0, *, out=None):
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if self.dim() == 1 and self.numel() == 0:
        res = torch.zeros(minlength, dtype=torch.int64, device=self.device)
        return res if out is None else _into(out, res)
    if self.dim() != 1 or self.dtype.is_floating_point or self.dtype == torch.bool or self.is_complex():
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != self.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if self.dtype not in _INTS:
        raise NotNative
    if weights is not None and (weights.is_complex() or weights.dtype not in _CODE):
        raise NotNative
    lo, hi = torch.stack(torch.aminmax(self)).tolist()  # one host read: CPU's check and the size
    if lo < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    n = max(hi + 1, minlength)
    # CPU sums float32 weights in float32, every other weight dtype in float64
    wdt = torch.int64 if weights is None else (torch.float32 if weights.dtype == torch.float32 else torch.float64)
    res = torch.zeros(n, dtype=wdt, device=self.device)
    _native.run("bincount", [res, self] + ([] if weights is None else [weights]))
    return res if out is None else _into(out, res)


# ------------------------------------------------------------------------- multinomial

@native("aten::multinomial", "aten::multinomial.out")
def multinomial(self, num_samples, replacement=False, *, generator=None, out=None):
    if not 0 < self.dim() <= 2:
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{_type_name(self.dtype)}")
    if out is not None and out.dtype != torch.int64:
        raise RuntimeError(f"multinomial expects Long tensor out, got: {_type_name(out.dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    C = self.shape[-1]
    if not replacement and num_samples > C:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if C > 1 << 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    if self.dtype not in _CODE:
        raise NotNative
    p2 = self.reshape(-1, C)
    res = torch.empty((p2.shape[0], num_samples), dtype=torch.int64, device=self.device)
    if res.numel():
        seed, off = _draw(generator)
        try:
            _native.run("multinomial", [res, p2], (seed, off, int(replacement)))
        except _native.NativeError as e:  # CPU's check of the values, as RuntimeError
            raise RuntimeError(str(e).removeprefix("multinomial: ")) from None
    res = res.view(num_samples) if self.dim() == 1 else res
    return res if out is None else _into(out, res)
