"""The Go kernels' worker count follows torch's intra-op thread setting
(torch.set_num_threads), read as natively dispatched ops (mm, elementwise) run."""
from __future__ import annotations

import os

import pytest
import torch

from habana_frameworks.torch import _native


def _workers_after_op() -> int:
    a = torch.randn(64, 64, device="hpu")
    (a @ a).cpu()
    return int(_native.go().hpusim_kernel_workers())


def test_set_num_threads_sets_kernel_workers() -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert _workers_after_op() == 1
        torch.set_num_threads(2)
        assert _workers_after_op() == min(2, os.cpu_count() or 1)
    finally:
        torch.set_num_threads(before)
        _workers_after_op()


@pytest.mark.parametrize("threads", [1, 2])
def test_results_do_not_depend_on_threads(threads: int) -> None:
    # bf16 GEMM sums in one float32 chain per element whatever the split: the same bits.
    g = torch.Generator().manual_seed(threads)
    a = torch.randn(300, 520, generator=g).bfloat16()
    b = torch.randn(520, 270, generator=g).bfloat16()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        want = (a.to("hpu") @ b.to("hpu")).cpu()
        torch.set_num_threads(threads)
        got = (a.to("hpu") @ b.to("hpu")).cpu()
    finally:
        torch.set_num_threads(before)
    assert torch.equal(got, want)
