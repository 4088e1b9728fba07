"""Session 21: a recipe run's fresh outputs are allocated by the core inside the run's own
crossing (hpusim_recipe_run_alloc) and wrapped in C++ (hpu_recipe.cpp fresh_tensor/view_of)
instead of one at::empty_strided (one hpusim_alloc crossing) per output. The tensors must be
what empty_strided made: own storages of the right size, plain (not autograd views), the
right dtype/shape/strides, values equal to CPU, memory returned when they die; a failing
run frees what was allocated for it."""
from __future__ import annotations

import gc

import pytest
import torch

import habana_frameworks.torch.core  # noqa: F401
from habana_frameworks.torch import _recipe
from habana_frameworks.torch.hpu import memory


def _fn(a, b):
    s = a @ b
    return s.relu(), (s * 2).t(), s.sum(0), a.new_zeros(0), s.view(-1)[3:10]


def test_fresh_outputs_are_own_plain_storages_equal_to_cpu():
    g = torch.Generator().manual_seed(21)
    a, b = torch.randn(8, 5, generator=g), torch.randn(5, 6, generator=g)
    ha, hb = a.to("hpu"), b.to("hpu")
    rec, outs = _recipe.capture(_fn, [ha, hb])
    ref = _fn(a, b)
    runs = [rec.run([ha, hb]) for _ in range(3)]
    for got in runs:
        for o, c, cap in zip(got, ref, outs):
            assert o.device.type == "hpu" and o.dtype == c.dtype and o.shape == c.shape
            assert o.stride() == cap.stride() and o.storage_offset() == cap.storage_offset()
            assert o._base is None and not o._is_view()
            assert o.untyped_storage().nbytes() == cap.untyped_storage().nbytes()
            torch.testing.assert_close(o.cpu(), c, rtol=1e-6, atol=1e-6)
        ptrs = {o.untyped_storage().data_ptr() for o in got[:3]}
        assert len(ptrs) == 3  # one storage each
        # the view of s and s.t() share the captured (bytes) storage layout, not the inputs'
        assert got[4].untyped_storage().data_ptr() not in (ha.untyped_storage().data_ptr(),
                                                           hb.untyped_storage().data_ptr())
    p0 = {o.untyped_storage().data_ptr() for o in runs[0][:3]}
    p1 = {o.untyped_storage().data_ptr() for o in runs[1][:3]}
    assert not p0 & p1  # live outputs of two runs never share memory


def test_outputs_are_freed_and_resizable():
    a, b = torch.ones(64, 32, device="hpu"), torch.ones(32, 16, device="hpu")
    rec, _ = _recipe.capture(_fn, [a, b])
    out = rec.run([a, b])
    del out
    gc.collect()
    base = memory.memory_allocated()
    for _ in range(50):
        out = rec.run([a, b])
    del out
    gc.collect()
    assert memory.memory_allocated() <= base  # nothing of 50 runs' outputs is kept
    r = rec.run([a, b])[0]
    r.resize_(100, 100)  # grows through the hpu allocator as an empty_strided tensor does
    r.fill_(3.0)
    assert r.cpu().sum().item() == 30000.0


def test_failing_run_raises_and_frees_its_outputs():
    def fn(w, i):
        return torch.nn.functional.embedding(i, w) * 2, w + 1

    w = torch.randn(4, 3, device="hpu")
    i = torch.tensor([0, 3], device="hpu")
    rec, _ = _recipe.capture(fn, [w, i])
    gc.collect()
    base = memory.memory_allocated()
    bad = torch.tensor([0, 7], device="hpu")
    for _ in range(5):
        with pytest.raises((IndexError, RuntimeError)):
            rec.run([w, bad])
    del bad
    gc.collect()
    assert memory.memory_allocated() <= base  # the failed runs' outputs were freed
    with pytest.raises(ValueError, match="recipe input 1"):
        rec.run([w, torch.tensor([0, 1, 2], device="hpu")])
    out = rec.run([w, i])
    torch.testing.assert_close(out[1].cpu(), w.cpu() + 1)


def test_compiled_graph_outputs_match_eager():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    ref = m(x)
    ref.sum().backward()
    hm = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    hm.load_state_dict(m.state_dict())
    hm = hm.to("hpu")
    c = torch.compile(hm, backend="hpu_backend")
    for _ in range(3):
        hm.zero_grad()
        out = c(x.to("hpu"))
        out.sum().backward()
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    for p, q in zip(hm.parameters(), m.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-5)
