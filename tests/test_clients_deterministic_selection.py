"""torch.mode / median / nanmedian along a dim on hpu under torch.use_deterministic_algorithms:
the native kernels are deterministic (CPU's tie order), so like torch's CPU kernels they run
(DeepSpeed's HPU accelerator turns deterministic algorithms on process-wide). Before, the meta
shape check raised the CUDA kernel's "does not have a deterministic implementation" alert."""
import pytest
import torch

import habana_frameworks.torch  # noqa: F401


@pytest.fixture
def deterministic():
    on, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(on, warn_only=warn_only)


@pytest.mark.parametrize("op", ["mode", "median", "nanmedian"])
def test_selection_along_dim_runs_and_matches_cpu(deterministic, op):
    x = torch.tensor([[1.0, 2, 2, 3, float("nan")], [4, 4, 1, 0, 1], [5, 5, 5, 2, 2]])
    if op == "mode":
        x = torch.nan_to_num(x, nan=7.0)
    fn = getattr(torch, op)
    for dim, keepdim in ((1, False), (0, True)):
        got = fn(x.to("hpu"), dim, keepdim)
        ref = fn(x, dim, keepdim)
        torch.testing.assert_close(got.values.cpu(), ref.values, equal_nan=True)
        assert torch.equal(got.indices.cpu(), ref.indices)
    # The setting is the caller's afterwards.
    assert torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()


def test_bad_dim_still_raises(deterministic):
    with pytest.raises(IndexError):
        torch.mode(torch.randn(3, device="hpu"), 2)
