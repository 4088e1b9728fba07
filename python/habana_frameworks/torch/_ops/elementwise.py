"""Elementwise ops (unary, binary, ternary, comparisons, activations and their backward) lowered to Go."""
from __future__ import annotations
