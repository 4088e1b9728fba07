"""Reductions, softmax family and losses lowered to Go."""
from __future__ import annotations
