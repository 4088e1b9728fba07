"""torch.autocast(device_type="hpu"): the bridge's op lists, casts recorded by autograd, no
cast cache, the override files and their messages, fp16 by generation, and bf16 training
that tracks CPU autocast."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from habana_frameworks.torch import _autocast

BF16 = torch.bfloat16
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rand(*shape, dtype=torch.float32, requires_grad=False):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    t = torch.randn(*shape, generator=g, dtype=dtype).to("hpu")
    return t.requires_grad_(requires_grad)


def autocast(**kw):
    return torch.autocast(device_type="hpu", dtype=kw.pop("dtype", BF16), **kw)


class RecordArgDtypes(TorchDispatchMode):
    """Records the dtypes of the tensor arguments of every aten op reaching the backend."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, list]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        dtypes = [a.dtype if isinstance(a, torch.Tensor) else None for a in args]
        self.calls.append((func._schema.name, dtypes))
        return func(*args, **kwargs)


# --- the lists ----------------------------------------------------------------------------

def test_gemm_and_conv_run_in_bf16():
    a, b = rand(4, 8), rand(8, 3)
    x = rand(2, 3, 8, 8)
    conv = nn.Conv2d(3, 4, 3).to("hpu")
    lin = nn.Linear(8, 5).to("hpu")
    with autocast():
        assert torch.mm(a, b).dtype == BF16
        assert torch.matmul(a, b).dtype == BF16
        assert (a @ b).dtype == BF16
        assert lin(a).dtype == BF16
        assert conv(x).dtype == BF16
        assert torch.bmm(rand(2, 3, 4), rand(2, 4, 5)).dtype == BF16
        assert torch.addmm(rand(3), a, b).dtype == BF16
    # The parameters themselves are untouched.
    assert lin.weight.dtype == conv.weight.dtype == torch.float32
    assert torch.mm(a, b).dtype == torch.float32


def test_bf16_results_match_cpu_autocast():
    a, b = rand(16, 32), rand(32, 8)
    with autocast():
        got = torch.mm(a, b)
    with torch.autocast("cpu", dtype=BF16):
        want = torch.mm(a.cpu(), b.cpu())
    assert want.dtype == got.dtype == BF16
    torch.testing.assert_close(got.cpu(), want)


def test_fp32_list_ops_return_float32_from_bf16_inputs():
    x = rand(4, 5).abs().to(BF16) + 0.5
    with autocast():
        for fn in (torch.tan, torch.exp, torch.log, torch.rsqrt, torch.reciprocal, torch.log2):
            assert fn(x).dtype == torch.float32, fn
        assert torch.div(x, x).dtype == torch.float32
        assert torch.pow(x, 2).dtype == torch.float32
        assert F.mse_loss(x, x).dtype == torch.float32
        target = torch.tensor([0, 1, 2, 3], device="hpu")
        assert F.cross_entropy(x, target).dtype == torch.float32
        assert F.nll_loss(x, target).dtype == torch.float32
        assert torch.topk(x, 2).values.dtype == torch.float32


def test_promote_ops_run_in_the_widest_input_type():
    f = rand(3, 4)
    h = rand(3, 4).to(BF16)
    with autocast():
        assert (h + f).dtype == torch.float32
        assert torch.add(h, h).dtype == BF16
        assert (h - f).dtype == torch.float32
        assert torch.cat([h, f]).dtype == torch.float32
        assert torch.cat([h, h]).dtype == BF16
        assert torch.stack([f, h]).dtype == torch.float32
        assert torch.addcmul(h, h, f).dtype == torch.float32
        # doubles are not autocast-eligible and do not take part in the promotion
        assert torch.add(h, h.double()).dtype == torch.float64


def test_unlisted_ops_follow_their_input():
    f, h = rand(3, 4), rand(3, 4).to(BF16)
    with autocast():
        assert torch.relu(f).dtype == torch.float32
        assert torch.relu(h).dtype == BF16
        assert f.sum().dtype == torch.float32


def test_norms_cast_only_their_first_input():
    x = rand(2, 4, 6)
    ln = nn.LayerNorm(6).to("hpu")
    bn = nn.BatchNorm1d(4).to("hpu")
    with RecordArgDtypes() as rec, autocast():
        y = ln(x)
        z = bn(x)
    assert y.dtype == z.dtype == BF16
    ln_calls = [d for n, d in rec.calls if n == "aten::native_layer_norm"]
    assert ln_calls and ln_calls[0][0] == BF16 and ln_calls[0][2] == torch.float32  # weight
    bn_calls = [d for n, d in rec.calls if "batch_norm" in n and d and d[0] is not None]
    assert bn_calls and bn_calls[0][0] == BF16
    assert all(dt in (torch.float32, None) for dt in bn_calls[0][1:])
    assert bn.running_mean.dtype == torch.float32


def test_inplace_and_out_variants_are_not_autocast():
    x = rand(3, 3)
    with autocast():
        y = x.clone()
        y.mul_(2.0)  # in-place: keeps its dtype
        assert y.dtype == torch.float32
        out = torch.empty(3, 3, device="hpu")
        torch.mm(x, x, out=out)
        assert out.dtype == torch.float32


def test_enabled_false_regions_stay_float32():
    a, b = rand(4, 4), rand(4, 4)
    with autocast():
        assert torch.mm(a, b).dtype == BF16
        with torch.autocast(device_type="hpu", enabled=False):
            assert torch.mm(a, b).dtype == torch.float32
            assert not torch.hpu.is_autocast_hpu_enabled()
            with autocast():
                assert torch.mm(a, b).dtype == BF16
        assert torch.mm(a, b).dtype == BF16
    with autocast(enabled=False):
        assert torch.mm(a, b).dtype == torch.float32


def test_decorator_form():
    @torch.autocast(device_type="hpu", dtype=BF16)
    def f(a, b):
        return torch.mm(a, b)
    assert f(rand(2, 2), rand(2, 2)).dtype == BF16


def test_cpu_tensors_are_not_cast_by_hpu_autocast():
    a = torch.randn(3, 3)
    with autocast():
        assert torch.mm(a, a).dtype == torch.float32


# --- autograd and the cast cache -----------------------------------------------------------

def test_casts_are_recorded_by_autograd():
    a = rand(6, 5, requires_grad=True)
    b = rand(5, 4, requires_grad=True)
    with autocast():
        y = torch.mm(a, b)
    assert y.dtype == BF16
    # mm's inputs were produced by recorded casts
    names = [type(fn).__name__ for fn, _ in y.grad_fn.next_functions]
    assert names == ["ToCopyBackward0", "ToCopyBackward0"]
    y.float().sum().backward()
    assert a.grad.dtype == b.grad.dtype == torch.float32

    ac, bc = a.detach().cpu().requires_grad_(), b.detach().cpu().requires_grad_()
    with torch.autocast("cpu", dtype=BF16):
        yc = torch.mm(ac, bc)
    yc.float().sum().backward()
    torch.testing.assert_close(a.grad.cpu(), ac.grad)
    torch.testing.assert_close(b.grad.cpu(), bc.grad)


def test_no_cast_cache_on_hpu():
    """CPU autocast caches the bf16 copy of a leaf weight within a region; HPU never does,
    so an in-place weight update shows in the next op of the same region."""
    x = rand(2, 4)
    lin = nn.Linear(4, 3).to("hpu")
    assert torch.is_autocast_cache_enabled()
    with autocast(cache_enabled=True):
        y1 = lin(x)
        with torch.no_grad():
            lin.weight.add_(1.0)
        y2 = lin(x)
    assert not torch.equal(y1, y2)
    with torch.no_grad():
        torch.testing.assert_close(y2.float(), F.linear(x, lin.weight, lin.bias), atol=0.05, rtol=0.02)

    # The same script on CPU shows the cache (stale weight): the test can tell the difference.
    lin_c = nn.Linear(4, 3)
    xc = x.cpu()
    with torch.autocast("cpu", dtype=BF16, cache_enabled=True):
        c1 = lin_c(xc)
        with torch.no_grad():
            lin_c.weight.add_(1.0)
        c2 = lin_c(xc)
    assert torch.equal(c1, c2)


# --- torch.hpu state API ---------------------------------------------------------------------

def test_torch_hpu_autocast_state_functions():
    assert not torch.hpu.is_autocast_hpu_enabled()
    assert torch.hpu.get_autocast_hpu_dtype() == BF16
    with autocast():
        assert torch.hpu.is_autocast_hpu_enabled()
    assert not torch.hpu.is_autocast_hpu_enabled()

    a = rand(3, 3)
    torch.hpu.set_autocast_hpu_enabled(True)
    try:
        assert torch.hpu.is_autocast_hpu_enabled()
        assert torch.mm(a, a).dtype == BF16
        torch.hpu.set_autocast_hpu_dtype(torch.float16)
        assert torch.hpu.get_autocast_hpu_dtype() == torch.float16
        assert torch.mm(a, a).dtype == torch.float16  # GAUDI2 (the default) has fp16
    finally:
        torch.hpu.set_autocast_hpu_dtype(BF16)
        torch.hpu.set_autocast_hpu_enabled(False)
    assert torch.mm(a, a).dtype == torch.float32


def test_unsupported_dtype_warns_and_disables_like_stock_torch():
    a = rand(3, 3)
    with pytest.warns(UserWarning, match="In HPU autocast, but the target dtype is not supported"):
        ctx = torch.autocast(device_type="hpu", dtype=torch.float64)
    with ctx:
        assert not torch.hpu.is_autocast_hpu_enabled()
        assert torch.mm(a, a).dtype == torch.float32


def test_policy_table():
    pol = _autocast.op_policies()
    assert pol["mm"] == "lower_precision_fp"
    assert pol["linear"] == "lower_precision_fp"
    assert pol["layer_norm"] == "lower_first_arg"
    assert pol["tan"] == "fp32"
    assert pol["add.Tensor"] == "promote"
    assert pol["mul.Tensor"] == "lower_precision_fp"  # lower wins over promote
    assert pol["div.Tensor"] == "fp32"  # fp32 wins over promote
    assert not any(k.startswith(("add_", "mm.out")) or k.endswith(".out") for k in pol)


# --- override files --------------------------------------------------------------------------

def _load(capfd, path, default=frozenset({"mm", "linear"})):
    got = _autocast.load_ops_list(str(path), default)
    return got, capfd.readouterr().err


def test_list_file_replaces_the_default(tmp_path, capfd):
    p = tmp_path / "lower.txt"
    p.write_text("tan\nrelu\n")
    got, err = _load(capfd, p)
    assert got == {"tan", "relu"}
    assert f'[DEBUG][PT_BRIDGE][AUTOCAST] Autocast ops loaded via "{p}": ' in err
    assert "tan, " in err and "relu, " in err


def test_missing_list_file_warns_and_keeps_default(tmp_path, capfd):
    p = tmp_path / "nope.txt"
    got, err = _load(capfd, p)
    assert got == {"mm", "linear"}
    assert err.strip() == ("[WARNING][PT_BRIDGE][AUTOCAST] Verification of ops list to autocast "
                           f'failed: File("{p}") does not exist. Loading default ops list.')


def test_directory_and_unsafe_locations_keep_default(tmp_path, capfd):
    got, err = _load(capfd, tmp_path)
    assert got == {"mm", "linear"} and f'Path("{tmp_path}") is a directory Loading default' in err
    got, err = _load(capfd, "/etc/hostname")
    assert got == {"mm", "linear"} and 'Used unsafe file location("/etc/hostname").' in err


def test_unknown_op_lines_are_discarded(tmp_path, capfd):
    p = tmp_path / "lower.txt"
    p.write_text("mm\nnot_an_op\n\ntan\n")
    got, err = _load(capfd, p)
    assert got == {"mm", "tan"}
    assert "[WARNING][PT_BRIDGE][AUTOCAST] Discarded unregistered op at line: 2" in err
    assert "Discarded unregistered op at line: 3" in err


def test_malformed_list_file_keeps_default(tmp_path, capfd):
    p = tmp_path / "garbage.bin"
    p.write_bytes(bytes(range(256)) * 4)
    got, err = _load(capfd, p)
    assert got == {"mm", "linear"}
    assert "names no registered op. Loading default ops list." in err
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    got, _ = _load(capfd, empty)
    assert got == frozenset()  # an empty file is a valid, empty list


def run_py(code: str, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


PROBE = """
import torch, habana_frameworks.torch
x = torch.randn(4, 4).to("hpu")
with torch.autocast(device_type="hpu", dtype=torch.bfloat16):
    print("mm", torch.mm(x, x).dtype, "tan", torch.tan(x).dtype, "relu", torch.relu(x).dtype)
"""


def test_env_override_files_swap_the_behaviour(tmp_path):
    lower, fp32 = tmp_path / "ops_bf16.txt", tmp_path / "ops_fp32.txt"
    lower.write_text("tan\nrelu\n")
    fp32.write_text("mm\n")
    r = run_py(PROBE, {"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": str(lower),
                       "PT_HPU_AUTOCAST_FP32_OPS_LIST": str(fp32)})
    assert r.returncode == 0, r.stderr
    assert "mm torch.float32 tan torch.bfloat16 relu torch.bfloat16" in r.stdout
    assert f'Autocast ops loaded via "{fp32}": mm, ' in r.stderr

    r = run_py(PROBE, {"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": str(tmp_path / "missing.txt")})
    assert r.returncode == 0, r.stderr
    assert "mm torch.bfloat16 tan torch.float32 relu torch.float32" in r.stdout
    assert "does not exist. Loading default ops list." in r.stderr


def test_lists_are_read_once_at_import(tmp_path):
    lower = tmp_path / "ops_bf16.txt"
    lower.write_text("tan\n")
    code = """
    import os, torch, habana_frameworks.torch
    os.environ["PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST"] = %r
    x = torch.randn(4, 4).to("hpu")
    with torch.autocast(device_type="hpu", dtype=torch.bfloat16):
        print("mm", torch.mm(x, x).dtype, "tan", torch.tan(x).dtype)
    """ % str(lower)
    r = run_py(code, {})
    assert r.returncode == 0, r.stderr
    assert "mm torch.bfloat16 tan torch.float32" in r.stdout


def test_bridge_usage_example_with_override_files(tmp_path):
    """The bridge's documented autocast loop, run with the override lists of its docs."""
    lower, fp32 = tmp_path / "lower_list.txt", tmp_path / "fp32_list.txt"
    lower.write_text("linear\nrelu\nmm\n")
    fp32.write_text("cross_entropy_loss\nlog_softmax\nsoftmax\nnll_loss\n")
    code = """
    import torch
    import habana_frameworks.torch.core as htcore

    device = torch.device("hpu")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 3)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randn(32, 10).to(device)
    target = (torch.arange(32) % 3).to(device)
    losses = []
    for _ in range(10):
        optimizer.zero_grad()
        with torch.autocast(device_type="hpu", dtype=torch.bfloat16):
            output = model(data)
            loss = torch.nn.functional.cross_entropy(output, target)
        loss.backward()
        htcore.mark_step()
        optimizer.step()
        htcore.mark_step()
        losses.append(loss.item())
    print("dtypes", output.dtype, loss.dtype)
    print("first", losses[0], "last", losses[-1])
    """
    r = run_py(code, {"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": str(lower),
                      "PT_HPU_AUTOCAST_FP32_OPS_LIST": str(fp32)})
    assert r.returncode == 0, r.stderr
    assert "dtypes torch.bfloat16 torch.float32" in r.stdout
    first, last = (float(v) for v in r.stdout.split("first ")[1].split(" last "))
    assert last < first


# --- fp16 by generation ------------------------------------------------------------------------

FP16_PROBE = """
import torch, habana_frameworks.torch
x = torch.randn(4, 4).to("hpu")
try:
    with torch.autocast(device_type="hpu", dtype=torch.float16):
        print("result", torch.mm(x, x).dtype, torch.tan(x).dtype)
except RuntimeError as e:
    print("error", e)
"""


@pytest.mark.parametrize("gen,ok", [("GAUDI", False), ("GAUDI2", True), ("GAUDI3", True)])
def test_fp16_autocast_follows_the_generation(gen, ok):
    r = run_py(FP16_PROBE, {"HPUSIM_DEVICE_TYPE": gen})
    assert r.returncode == 0, r.stderr
    if ok:
        assert "result torch.float16 torch.float32" in r.stdout
    else:
        assert "error Expected false to be true, but got false.  float16/half is not supported " \
               "on Gaudi." in r.stdout
        assert "GAUDI2 or later" in r.stdout


# --- training ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,steps,batch", [("cnn", 20, 16), ("transformer", 12, 8)])
def test_bf16_training_tracks_cpu_autocast(name, steps, batch):
    from hpusim_models import build, make_batches, train_steps

    kw = {"dropout": 0.0} if name == "transformer" else {}
    batches = make_batches(name, batch, steps, seed=0)
    cpu = train_steps(build(name, seed=0, **kw), batches, "cpu", autocast_dtype=BF16)
    model = build(name, seed=0, **kw)
    hpu = train_steps(model, batches, "hpu", autocast_dtype=BF16)
    assert len(hpu) == steps
    for i, (h, c) in enumerate(zip(hpu, cpu)):
        assert abs(h - c) <= 0.02 + 0.02 * abs(c), (i, hpu, cpu)
    assert min(hpu[-3:]) < hpu[0]
    # the run really was mixed precision: the logits come out in bf16
    inputs = batches[0][0].to("hpu")
    with autocast(), torch.no_grad():
        assert model(inputs).dtype == BF16
    assert all(p.dtype == torch.float32 for p in model.parameters())
