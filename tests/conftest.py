"""Shared pytest set-up: hpusim must be importable and the hpu device registered."""
import os

import pytest
import torch

import habana_frameworks.torch  # noqa: F401  (also loaded by torch's autoload entry point)
from habana_frameworks.torch._ops import fallback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def fallback_counter():
    """Count CPU fallbacks inside a test: yields a function returning {op: n} since start."""
    before = fallback.counts()

    def delta():
        now = fallback.counts()
        return {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}
    return delta


def hpu(t: torch.Tensor) -> torch.Tensor:
    return t.to("hpu")
