"""Matrix products (mm, addmm, bmm, ...) lowered to Go's GEMM."""
from __future__ import annotations
