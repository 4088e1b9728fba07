"""What users do with a device works on hpu and matches CPU (issue: a real hpu device)."""
import copy
import io
import os
import subprocess
import sys
import threading

import pytest
import torch
import torch.nn as nn

ALL_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8,
              torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]


def test_factories_match_cpu():
    assert torch.zeros(2, 3, device="hpu").device == torch.device("hpu:0")
    for make in (lambda d: torch.zeros(2, 3, device=d), lambda d: torch.ones(4, device=d, dtype=torch.int32),
                 lambda d: torch.full((2, 2), 7.5, device=d), lambda d: torch.arange(0, 10, 3, device=d),
                 lambda d: torch.arange(5.0, device=d), lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
                 lambda d: torch.tensor(3.25, device=d), lambda d: torch.eye(3, device=d),
                 lambda d: torch.linspace(0, 1, 5, device=d)):
        h, c = make("hpu"), make("cpu")
        assert h.device.type == "hpu"
        assert h.dtype == c.dtype and h.shape == c.shape
        torch.testing.assert_close(h.cpu(), c)
    assert torch.empty(3, 4, device="hpu").shape == (3, 4)


def test_randn_uses_hpu_generator_reproducibly():
    torch.hpu.manual_seed(123)
    a = torch.randn(5, device="hpu")
    torch.hpu.manual_seed(123)
    b = torch.randn(5, device="hpu")
    assert torch.equal(a.cpu(), b.cpu())
    torch.manual_seed(7)  # as in the bridge, torch.manual_seed also seeds hpu
    c = torch.rand(5, device="hpu")
    torch.manual_seed(7)
    d = torch.rand(5, device="hpu")
    assert torch.equal(c.cpu(), d.cpu())
    state = torch.hpu.get_rng_state()
    e = torch.randn(3, device="hpu")
    torch.hpu.set_rng_state(state)
    assert torch.equal(e.cpu(), torch.randn(3, device="hpu").cpu())


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d is not torch.float16])
def test_roundtrip_and_dtype_conversion(dtype):
    src = (torch.randn(4, 5) * 50)
    if dtype is torch.bool:
        c = src > 0
    elif dtype is torch.uint8:
        c = src.abs().to(dtype)
    else:
        c = src.to(dtype)
    h = c.to("hpu")
    assert h.dtype == dtype and h.device.type == "hpu"
    assert torch.equal(h.cpu(), c)
    assert torch.equal(c.to("hpu:0").cpu(), c)
    for other in (torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool, torch.uint8):
        assert torch.equal(h.to(other).cpu(), c.to(other)), (dtype, other)


def test_float16_allowed_on_gaudi2():
    assert torch.hpu.get_device_name() == "GAUDI2"
    x = torch.tensor([1.5, -2.25, 65504.0, 1e-7], dtype=torch.float16)
    assert torch.equal(x.to("hpu").cpu(), x)
    r = torch.randn(10)
    assert torch.equal(r.to("hpu").half().cpu(), r.half())
    assert torch.equal(r.half().to("hpu").float().cpu(), r.half().float())


def test_complex_rejected_with_bridge_message():
    with pytest.raises(RuntimeError, match="Complex datatype is not supported on HPU device."):
        torch.zeros(2, dtype=torch.complex64, device="hpu")


def test_views_and_inplace_through_views():
    c = torch.arange(24.0).reshape(4, 6)
    h = c.to("hpu")
    for f in (lambda t: t.view(6, 4), lambda t: t.reshape(2, 12), lambda t: t.t(), lambda t: t.transpose(0, 1),
              lambda t: t.permute(1, 0), lambda t: t[1:3, ::2], lambda t: t[:, 2], lambda t: t[None].expand(3, 4, 6),
              lambda t: t.as_strided((3, 3), (7, 1), 2), lambda t: t.unfold(1, 2, 2), lambda t: t.diagonal(),
              lambda t: t.narrow(0, 1, 2), lambda t: t.unsqueeze(1).squeeze(1)):
        v = f(h)
        assert v.untyped_storage().data_ptr() == h.untyped_storage().data_ptr()  # a real alias
        assert torch.equal(v.cpu(), f(c))
    # in-place through views writes the base
    hv, cv = h[1:3, ::2], c[1:3, ::2]
    hv.fill_(-1.0)
    cv.fill_(-1.0)
    h.t()[0].zero_()
    c.t()[0].zero_()
    assert torch.equal(h.cpu(), c)
    hv.mul_(3)  # a non-native in-place op (CPU fallback) must still write through the view
    cv.mul_(3)
    assert torch.equal(h.cpu(), c)


def test_indexing_get_and_set():
    c = torch.arange(30.0).reshape(5, 6)
    h = c.to("hpu")
    idx = torch.tensor([0, 3, 4])
    assert torch.equal(h[idx].cpu(), c[idx])
    assert torch.equal(h[idx.to("hpu")].cpu(), c[idx])
    assert torch.equal(h[h > 10].cpu(), c[c > 10])
    assert torch.equal(h[2, 3].cpu(), c[2, 3])
    h[1] = 5.0
    c[1] = 5.0
    h[:, 0] = torch.tensor([9.0, 8, 7, 6, 5], device="hpu")
    c[:, 0] = torch.tensor([9.0, 8, 7, 6, 5])
    h[idx.to("hpu"), 1] = -2.0
    c[idx, 1] = -2.0
    assert torch.equal(h.cpu(), c)


def test_item_tolist_print():
    c = torch.tensor([[1.5, 2.0], [3.0, -4.25]])
    h = c.to("hpu")
    assert h[1, 1].item() == -4.25
    assert h.tolist() == c.tolist()
    assert torch.tensor(7, device="hpu").item() == 7
    text = repr(h)
    assert "device='hpu:0'" in text
    assert text.replace(", device='hpu:0'", "") == repr(c)
    assert "bfloat16" in str(h.bfloat16())


def test_deepcopy_and_clone():
    h = torch.randn(3, 3, device="hpu", requires_grad=True)
    d = copy.deepcopy(h)
    assert d.device.type == "hpu" and d.requires_grad
    assert d.data_ptr() != h.data_ptr()
    assert torch.equal(d.detach().cpu(), h.detach().cpu())
    m = copy.deepcopy(nn.Linear(3, 2).to("hpu"))
    assert m.weight.device.type == "hpu"


def test_save_load_roundtrips(tmp_path):
    model = nn.Linear(4, 3)
    ref = {k: v.clone() for k, v in model.state_dict().items()}
    model.to("hpu")
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "t": torch.arange(5, device="hpu")}, path)
    on_cpu = torch.load(path, map_location="cpu")
    assert on_cpu["t"].device.type == "cpu" and torch.equal(on_cpu["t"], torch.arange(5))
    for k, v in ref.items():
        assert torch.equal(on_cpu["model"][k], v)
    on_hpu = torch.load(path, map_location="hpu")
    assert on_hpu["t"].device == torch.device("hpu:0")
    assert torch.equal(on_hpu["t"].cpu(), torch.arange(5))
    # saved on hpu, loaded with no map_location: stays on hpu
    assert torch.load(path)["t"].device.type == "hpu"
    # a cpu checkpoint loaded onto hpu through load_state_dict
    buf = io.BytesIO()
    torch.save({k: v for k, v in ref.items()}, buf)
    buf.seek(0)
    m2 = nn.Linear(4, 3).to("hpu")
    m2.load_state_dict(torch.load(buf, map_location="hpu"))
    assert torch.equal(m2.weight.detach().cpu(), ref["weight"])


def _train(device, opt_cls, steps=5, **opt_kw):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x = torch.randn(32, 8)
    y = torch.randint(0, 3, (32,))
    model.to(device)
    opt = opt_cls(model.parameters(), **opt_kw)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("opt_cls,kw", [(torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
                                        (torch.optim.Adam, dict(lr=0.01)),
                                        (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1))])
def test_training_steps_match_cpu(opt_cls, kw):
    lc, pc = _train("cpu", opt_cls, **kw)
    lh, ph = _train("hpu", opt_cls, **kw)
    torch.testing.assert_close(lh, lc)
    for a, b in zip(ph, pc):
        torch.testing.assert_close(a, b)


def test_model_to_hpu_moves_params_and_buffers():
    m = nn.BatchNorm1d(4)
    m.to("hpu")
    assert all(p.device.type == "hpu" for p in m.parameters())
    assert all(b.device.type == "hpu" for b in m.buffers())
    assert type(m.weight) is nn.Parameter


def test_dataloader_default_pin_memory():
    ds = torch.utils.data.TensorDataset(torch.randn(10, 3), torch.arange(10))
    for pin in (False, True):
        total = 0
        for xb, yb in torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=pin):
            total += xb.to("hpu").sum().item()
        assert abs(total - ds.tensors[0].sum().item()) < 1e-4


def test_device_mismatch_raises_like_pytorch():
    h = torch.ones(3, device="hpu")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        h + torch.ones(3)
    # 0-dim cpu scalars mix in, as on CUDA
    assert torch.equal((h + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))


def test_unknown_device_index():
    with pytest.raises(RuntimeError, match="Invalid device id"):
        torch.zeros(2, device="hpu:3")
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.hpu.get_device_name(3)


def _backward_thread() -> int:
    seen = []
    x = torch.randn(4, 4, device="hpu", requires_grad=True)
    y = (x * 2).sum()
    x.register_hook(lambda g: seen.append(threading.get_native_id()) or g)
    y.backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((4, 4), 2.0))
    assert seen
    return seen[0]


def test_backward_runs_on_calling_thread_by_default():
    # hpusim turns torch's per-device backward thread off for the importing thread.
    assert not torch._C._is_multithreading_enabled()
    assert _backward_thread() == threading.get_native_id()


def test_backward_runs_on_autograd_thread_when_enabled():
    with torch.autograd.set_multithreading_enabled(True):
        # the engine's hpu device thread calls into Go
        assert _backward_thread() != threading.get_native_id()
    assert not torch._C._is_multithreading_enabled()


def test_backward_from_many_python_threads():
    errors = []

    def work():
        try:
            for _ in range(5):
                a = torch.randn(16, 16, device="hpu", requires_grad=True)
                (a * a).sum().backward()
                torch.testing.assert_close(a.grad.cpu(), 2 * a.detach().cpu())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_autograd_thread_env_keeps_torch_default():
    code = ("import torch, habana_frameworks.torch; "
            "print(torch._C._is_multithreading_enabled())")
    env = dict(os.environ, HPUSIM_AUTOGRAD_THREAD="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "True"
