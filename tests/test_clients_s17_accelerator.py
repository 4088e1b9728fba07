"""hpu is torch.accelerator, as on Gaudi (torch without CUDA, the bridge's hooks built), so
DataLoader(pin_memory=True) without pin_memory_device pins its batches for hpu instead of
warning that no accelerator is found (hpu/accelerator.py). Only while CUDA is unusable."""
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import habana_frameworks.torch  # noqa: F401

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="with a working CUDA, torch's accelerator is CUDA")


def test_torch_accelerator_is_hpu():
    acc = torch.accelerator.current_accelerator()
    assert acc == torch.device("hpu") and acc.index is None
    assert torch.accelerator.current_accelerator(check_available=True) == torch.device("hpu")
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == torch.hpu.device_count() >= 1
    assert torch.accelerator.current_device_index() == torch.hpu.current_device() == 0
    torch.accelerator.set_device_index(0)
    torch.accelerator.set_device_index("hpu:0")
    with pytest.raises(ValueError):
        torch.accelerator.set_device_index("cuda:0")
    s = torch.accelerator.current_stream()
    assert s.device.type == "hpu" and s == torch.hpu.current_stream()
    torch.accelerator.set_stream(s)
    x = torch.ones(4, device="hpu") * 3
    torch.accelerator.synchronize()
    torch.accelerator.synchronize("hpu:0")
    assert x.cpu().tolist() == [3.0] * 4
    assert torch.get_device_module() is torch.hpu
    assert torch._C._get_accelerator() == torch.device("hpu", 0)


@pytest.mark.parametrize("workers", [0, 1])
def test_dataloader_pin_memory_pins_for_hpu(workers):
    ds = TensorDataset(torch.arange(40, dtype=torch.float32).view(20, 2), torch.arange(20))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns "no accelerator is found" and does not pin
        loader = DataLoader(ds, batch_size=4, pin_memory=True, num_workers=workers)
        it = iter(loader)
        assert it._pin_memory and it._pin_memory_device is None
        batches = list(it)
    assert len(batches) == 5
    for i, (x, y) in enumerate(batches):
        assert x.is_pinned() and y.is_pinned()
        assert torch.equal(x, torch.arange(8 * i, 8 * i + 8, dtype=torch.float32).view(4, 2))
        xh = x.to("hpu", non_blocking=True)
        assert torch.equal((xh * 2).cpu(), x * 2)
