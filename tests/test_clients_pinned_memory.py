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


# Factories with pin_memory=True allocate in C++ (torch's CPU empty kernels); on Gaudi they pin
# through the bridge's host allocator, here through the glue's (csrc/hpu_pinned_factories.cpp).
_PINNED_FACTORIES = {
    "empty": lambda: torch.empty(3, 4, pin_memory=True),
    "empty_strided": lambda: torch.empty_strided((2, 3), (1, 2), pin_memory=True),
    "zeros": lambda: torch.zeros(5, dtype=torch.bfloat16, pin_memory=True),
    "ones": lambda: torch.ones(2, 2, dtype=torch.int32, pin_memory=True),
    "full": lambda: torch.full((3,), 7.5, pin_memory=True),
    "tensor": lambda: torch.tensor([[1.0, 2.0], [3.0, 4.0]], pin_memory=True),
    "arange": lambda: torch.arange(6, pin_memory=True),
    "linspace": lambda: torch.linspace(0, 1, 5, pin_memory=True),
    "eye": lambda: torch.eye(3, pin_memory=True),
    "empty_like": lambda: torch.empty_like(torch.ones(4), pin_memory=True),
    "zeros_like": lambda: torch.zeros_like(torch.ones(4), pin_memory=True),
    "randn": lambda: torch.randn(4, generator=torch.Generator().manual_seed(3), pin_memory=True),
    "randint": lambda: torch.randint(0, 9, (4,), generator=torch.Generator().manual_seed(3), pin_memory=True),
}
_UNPINNED_TWINS = {
    "zeros": lambda: torch.zeros(5, dtype=torch.bfloat16),
    "ones": lambda: torch.ones(2, 2, dtype=torch.int32),
    "full": lambda: torch.full((3,), 7.5),
    "tensor": lambda: torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
    "arange": lambda: torch.arange(6),
    "linspace": lambda: torch.linspace(0, 1, 5),
    "eye": lambda: torch.eye(3),
    "zeros_like": lambda: torch.zeros(4),
    "randn": lambda: torch.randn(4, generator=torch.Generator().manual_seed(3)),
    "randint": lambda: torch.randint(0, 9, (4,), generator=torch.Generator().manual_seed(3)),
}


@pytest.mark.parametrize("name", sorted(_PINNED_FACTORIES))
def test_factories_with_pin_memory_pin_for_hpu(name):
    t = _PINNED_FACTORIES[name]()
    assert t.device.type == "cpu" and t.is_pinned()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert t.is_pinned("hpu")
    if name in _UNPINNED_TWINS:
        ref = _UNPINNED_TWINS[name]()
        assert t.dtype == ref.dtype and torch.equal(t, ref)
    assert t.pin_memory() is t  # already pinned: Tensor.pin_memory() makes no second copy
    d = t.to("hpu", non_blocking=True)
    assert torch.equal(d.cpu(), t)


def test_factories_without_pin_memory_stay_unpinned():
    assert not torch.empty(3).is_pinned()
    assert not torch.zeros(2, pin_memory=False).is_pinned()
    assert not torch.tensor([1, 2]).is_pinned()
    assert not torch.empty_strided((2, 2), (1, 2)).is_pinned()


def test_pinned_factory_keeps_memory_format_and_grows_pinned():
    t = torch.empty(2, 3, 4, 5, memory_format=torch.channels_last, pin_memory=True)
    assert t.is_pinned() and t.is_contiguous(memory_format=torch.channels_last)
    out = torch.empty(0, pin_memory=True)
    torch.arange(100, out=out)  # resizing reallocates through the storage's (pinned) allocator
    assert out.is_pinned() and torch.equal(out, torch.arange(100))


def test_pinned_factory_errors_are_torchs():
    # The same refusals as on CPU/CUDA torch: no pinning of numpy-backed data or sparse layouts.
    np = pytest.importorskip("numpy")
    with pytest.raises(RuntimeError, match="Can't pin tensor constructed from numpy"):
        torch.tensor(np.ones(3), pin_memory=True)
    with pytest.raises(RuntimeError, match="Only dense CPU tensors can be pinned"):
        torch.empty(2, layout=torch.sparse_coo, pin_memory=True)


def test_pinned_empty_is_filled_under_deterministic_algorithms():
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        t = torch.empty(16, pin_memory=True)
        i = torch.empty(4, dtype=torch.int64, pin_memory=True)
    finally:
        torch.use_deterministic_algorithms(was)
    assert t.is_pinned() and torch.isnan(t).all()  # as torch's CPU empty: NaN for floats
    assert (i == torch.iinfo(torch.int64).max).all()  # and the maximum for integers


def test_pinned_factory_registration_is_silent():
    # torch would log "Overriding a previously registered kernel" for the wrapped CPU kernels.
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import habana_frameworks.torch, torch; "
                          "assert torch.zeros(2, pin_memory=True).is_pinned()"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    assert "Overriding a previously registered kernel" not in out.stderr + out.stdout
