"""Pinned host memory for hpu: Tensor.pin_memory() / is_pinned() (no device: hpu, as on Gaudi
where the bridge is the accelerator), the glue's pinned host allocator behind them, and
DataLoader(pin_memory=True, pin_memory_device="hpu") handing out pinned batches."""
import warnings

import pytest
import torch

import habana_frameworks.torch  # noqa: F401

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="with a working CUDA, torch pins for CUDA")


def test_pin_memory_without_device_pins_for_hpu():
    t = torch.randn(5, 7)
    assert not t.is_pinned()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NVIDIA error, no deprecation warning either
        p = t.pin_memory()
        assert p.is_pinned()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch deprecates the device argument
        assert p.is_pinned("hpu")
    assert p.device.type == "cpu" and p.data_ptr() != t.data_ptr() and torch.equal(p, t)
    assert p.pin_memory() is p  # already pinned: no second copy
    assert p[1:3].is_pinned()  # views share the pinned storage
    assert not p.clone().is_pinned()  # ordinary host memory again
    # Copies from pinned memory to the device and back are exact, also non-blocking.
    d = p.to("hpu", non_blocking=True)
    assert torch.equal(d.cpu(), t)


def test_pin_memory_with_explicit_hpu_device():
    t = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch deprecates the device argument
        p = t.pin_memory("hpu")
        assert p.is_pinned("hpu") and not t.is_pinned("hpu")
    assert torch.equal(p, t)


def test_empty_tensor_pins():
    p = torch.empty(0).pin_memory()
    assert p.numel() == 0 and p.device.type == "cpu"


def test_dataloader_pins_batches_for_hpu():
    ds = torch.utils.data.TensorDataset(torch.randn(10, 3), torch.arange(10))
    dl = torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True, pin_memory_device="hpu")
    seen = 0
    for x, y in dl:
        assert x.is_pinned() and y.is_pinned()
        torch.testing.assert_close(x.to("hpu").cpu(), ds.tensors[0][seen:seen + len(x)])
        seen += len(x)
    assert seen == 10
