"""Shared pytest set-up: hpusim must be importable and the hpu device registered."""
import os
import sys

import pytest
import torch

import habana_frameworks.torch  # noqa: F401  (also loaded by torch's autoload entry point)
from habana_frameworks.torch._ops import fallback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Console scripts (hl-smi) live next to the interpreter, as in an activated environment.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


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


# Summary hooks of the OpInfo suite (tests/test_opinfo.py); they must live in the controller
# process under pytest-xdist, which only loads conftest files, not test modules.
from opinfo_plugin import (  # noqa: E402,F401
    pytest_runtest_logreport, pytest_sessionfinish, pytest_terminal_summary, pytest_testnodedown)
