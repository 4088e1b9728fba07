"""DeepSpeed's HPU accelerator (public deepspeed 0.17.6, `deepspeed/accelerator/hpu_accelerator.py`)
as DeepSpeed and its users call it: device naming, RNG state round trips, streams and events,
memory figures that follow real allocations, the hccl backend name and the op builders it
resolves (missing ones come back as DeepSpeed's NotImplementedBuilder, as on a Gaudi); in lazy
mode DeepSpeed's FusedAdam calls hpu::optimizer_adamw with the lazy bridge's float decay factor."""
import importlib.util
import os

import pytest
import torch

if importlib.util.find_spec("deepspeed") is None:
    pytest.skip("deepspeed is not installed (requirements.txt pins it)", allow_module_level=True)


@pytest.fixture(scope="module")
def acc():
    os.environ.setdefault("DS_ACCELERATOR", "hpu")
    # DeepSpeed's HPU accelerator turns on torch's deterministic algorithms for the whole
    # process when it is built (as on Gaudi); the other tests in this worker must not inherit it.
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    try:
        from deepspeed.accelerator import get_accelerator
        a = get_accelerator()
        if a.device_name() != "hpu":
            pytest.skip(f"DeepSpeed picked {a.device_name()!r}")
        yield a
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def test_device_naming_and_backend(acc):
    assert acc.device_name() == "hpu" and acc.device_name(0) == "hpu"
    assert acc.current_device_name() == "hpu:0" and acc.current_device() == 0
    assert acc.device_count() >= 1 and acc.is_available()
    assert acc.communication_backend_name() == "hccl"
    assert acc.is_bf16_supported() and torch.bfloat16 in acc.supported_dtypes()
    t = acc.FloatTensor([1.0, 2.0])
    assert t.device.type == "hpu" and t.dtype == torch.float32
    assert acc.on_accelerator(t) and not acc.on_accelerator(torch.ones(1))


def test_rng_state_round_trip_replays_the_stream(acc):
    acc.manual_seed_all(123)
    state = acc.get_rng_state()
    a = torch.rand(8, device="hpu").cpu()
    acc.set_rng_state(state)
    b = torch.rand(8, device="hpu").cpu()
    assert torch.equal(a, b)
    acc.manual_seed(123)
    assert acc.initial_seed() == 123
    assert torch.equal(torch.rand(8, device="hpu").cpu(), a)


def test_streams_and_events(acc):
    s = acc.Stream()
    with acc.stream(s):
        x = torch.ones(4, device="hpu") * 3
    acc.current_stream().wait_stream(s)
    start, end = acc.Event(enable_timing=True), acc.Event(enable_timing=True)
    start.record()
    y = x + 1
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0
    acc.synchronize()
    assert torch.equal(y.cpu(), torch.full((4,), 4.0))


def test_memory_figures_follow_allocations(acc):
    acc.reset_peak_memory_stats()
    before = acc.memory_allocated()
    t = torch.empty(1 << 20, dtype=torch.uint8, device="hpu")
    assert acc.memory_allocated() >= before + (1 << 20)
    assert acc.max_memory_allocated() >= acc.memory_allocated()
    stats = acc.memory_stats()
    assert stats["InUse"] == acc.memory_allocated() and acc.total_memory() == stats["Limit"]
    assert acc.available_memory() == stats["Limit"] - stats["InUse"]
    del t
    assert acc.memory_allocated() <= before + 64


def test_op_builders(acc):
    from deepspeed.ops.adam import FusedAdam
    assert acc.get_op_builder("FusedAdamBuilder").__name__ == "FusedAdamBuilder"
    assert acc.create_op_builder("TransformerBuilder") is None  # DeepSpeed's answer for what HPU lacks
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    ref = torch.nn.Linear(4, 3)
    ref.load_state_dict(m.state_dict())
    m = m.to("hpu")
    opt = FusedAdam(m.parameters(), lr=1e-2, weight_decay=0.1)
    ropt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.1)
    x = torch.randn(5, 4)
    for _ in range(3):
        opt.zero_grad()
        m(x.to("hpu")).square().sum().backward()
        opt.step()
        ropt.zero_grad()
        ref(x).square().sum().backward()
        ropt.step()
    torch.testing.assert_close(m.weight.detach().cpu(), ref.weight.detach(), atol=1e-5, rtol=1e-5)
