"""The aten ops allowed to stay on the CPU fallback in the OpInfo suite, each with its reason.

tests/opinfo_plugin.py prints every op that still falls back in a run with the reason given
here, and flags loudly the ones that fall back without being listed (a missing native
kernel). As on Gaudi, linear-algebra decompositions (factorizations, solvers, eigen and
singular values) run on the host CPU; everything else is expected to be native.
"""
from __future__ import annotations

_LINALG = "linear-algebra decomposition, CPU on Gaudi too"
_SOLVE = "linear-algebra solver (factorization inside), CPU on Gaudi too"

ALLOWED_CPU_FALLBACKS: dict[str, str] = {
    # factorizations
    "aten::linalg_qr": _LINALG,
    "aten::geqrf": _LINALG,
    "aten::ormqr": _LINALG,
    "aten::linalg_householder_product": _LINALG,
    "aten::_linalg_svd": _LINALG,
    "aten::_linalg_eigh": _LINALG,
    "aten::linalg_eig": _LINALG,
    "aten::_linalg_eigvals": _LINALG,
    "aten::linalg_lu_factor_ex": _LINALG,
    "aten::linalg_lu": _LINALG,
    "aten::lu_unpack": _LINALG,
    "aten::linalg_cholesky_ex": _LINALG,
    "aten::cholesky": _LINALG,
    "aten::linalg_ldl_factor_ex": _LINALG,
    "aten::_linalg_det": _LINALG + " (LU)",
    "aten::_linalg_slogdet": _LINALG + " (LU)",
    "aten::linalg_matrix_exp": "matrix function (Pade approximant with solves), CPU on Gaudi too",
    # solvers
    "aten::linalg_solve_triangular": _SOLVE,
    "aten::triangular_solve": _SOLVE,
    "aten::linalg_lu_solve": _SOLVE,
    "aten::_linalg_solve_ex": _SOLVE,
    "aten::linalg_inv_ex": _SOLVE,
    "aten::linalg_lstsq": _SOLVE,
    "aten::linalg_ldl_solve": _SOLVE,
    "aten::_cholesky_solve_helper": _SOLVE,
    "aten::cholesky_inverse": _SOLVE,
    # complex
    "aten::_fft_r2c": "FFT with a complex result (HPU has no complex dtypes)",
}


def reason(op: str) -> str | None:
    """The documented reason op may fall back, or None when it should be native."""
    return ALLOWED_CPU_FALLBACKS.get(op)
