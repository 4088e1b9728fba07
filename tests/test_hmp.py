"""Habana Mixed Precision (habana_frameworks.torch.hpex.hmp): the O1 lists, widest-type
multi-input ops, in-place ops, custom list files, O2, disable_casts, verbose lines, bad
input, and the seeds' Linear + SGD usage example."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from habana_frameworks.torch.hpex import hmp

BF16, FP32 = torch.bfloat16, torch.float32
ORIGINALS = (torch.mm, torch.Tensor.matmul, torch.Tensor.__add__, F.linear, F.softmax,
             torch.Tensor.add_)


@pytest.fixture(autouse=True)
def restore():
    yield
    hmp._unconvert()
    assert (torch.mm, torch.Tensor.matmul, torch.Tensor.__add__, F.linear, F.softmax,
            torch.Tensor.add_) == ORIGINALS


def rand(*shape, dtype=FP32):
    g = torch.Generator().manual_seed(7 + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype).to("hpu")


def test_o1_default_lists(capsys):
    hmp.convert()
    assert capsys.readouterr().out == "hmp:verbose_mode  False\nhmp:opt_level O1\n"
    a, b = rand(4, 8), rand(8, 3)
    h = rand(4, 3, dtype=BF16)
    assert torch.mm(a, b).dtype == BF16
    assert a.matmul(b).dtype == BF16 and (a @ b).dtype == BF16
    assert nn.Linear(8, 5).to("hpu")(a).dtype == BF16
    assert nn.Conv2d(3, 4, 3).to("hpu")(rand(1, 3, 6, 6)).dtype == BF16
    assert torch.relu(a).dtype == BF16 and F.relu(a).dtype == BF16
    assert (a * 2).dtype == BF16  # mul is on the bf16 list
    # fp32 list
    assert F.softmax(h, -1).dtype == FP32 and h.softmax(-1).dtype == FP32
    assert F.log_softmax(h, -1).dtype == FP32
    assert torch.log(h.abs() + 1).dtype == FP32
    assert (h / 2).dtype == FP32 and torch.div(h, h).dtype == FP32
    target = torch.tensor([0, 1, 2, 0], device="hpu")
    assert F.cross_entropy(h, target).dtype == FP32
    # other ops follow their input
    assert torch.sigmoid(h).dtype == BF16 and torch.sigmoid(a).dtype == FP32
    assert h.sum().dtype == BF16


def test_o1_multi_input_ops_take_the_widest_type():
    hmp.convert()
    f, h = rand(3, 4), rand(3, 4, dtype=BF16)
    assert (h + f).dtype == FP32 and (f - h).dtype == FP32
    assert (h + h).dtype == BF16
    assert torch.add(h, h).dtype == BF16
    assert torch.cat([h, f]).dtype == FP32 and torch.cat([h, h]).dtype == BF16
    assert torch.stack([h, f]).dtype == FP32
    assert torch.where(f > 0, h, f).dtype == FP32


def test_o1_inplace_ops_follow_their_first_input():
    hmp.convert()
    f, h = rand(3, 4), rand(3, 4, dtype=BF16)
    x = h.clone()
    x.add_(f)  # f is cast to bf16 first
    assert x.dtype == BF16
    torch.testing.assert_close(x, h + f.to(BF16))
    y = f.clone()
    y += h
    assert y.dtype == FP32
    z = h.clone()
    z += f
    assert z.dtype == BF16


def test_o1_norms_cast_only_their_first_input():
    hmp.convert()
    bn = nn.BatchNorm2d(3).to("hpu")
    ln = nn.LayerNorm(6).to("hpu")
    x = rand(2, 3, 6, 6)
    assert bn(x).dtype == BF16
    assert ln(x).dtype == BF16
    assert bn.running_mean.dtype == FP32 and bn.weight.dtype == FP32 and ln.weight.dtype == FP32


def test_autograd_through_hmp_casts():
    hmp.convert()
    lin = nn.Linear(6, 3).to("hpu")
    x = rand(5, 6)
    out = lin(x)
    assert out.dtype == BF16
    F.cross_entropy(out, torch.zeros(5, dtype=torch.long, device="hpu")).backward()
    assert lin.weight.grad.dtype == FP32 and lin.weight.grad.abs().sum() > 0


def test_disable_casts():
    hmp.convert()
    a = rand(3, 3)
    with hmp.disable_casts():
        assert torch.mm(a, a).dtype == FP32
        with hmp.disable_casts():
            assert torch.mm(a, a).dtype == FP32
        assert torch.mm(a, a).dtype == FP32
    assert torch.mm(a, a).dtype == BF16
    with pytest.raises(ZeroDivisionError):
        with hmp.disable_casts():
            1 / 0
    assert torch.mm(a, a).dtype == BF16


def test_custom_list_files_replace_the_defaults(tmp_path):
    bf16, fp32 = tmp_path / "ops_bf16.txt", tmp_path / "ops_fp32.txt"
    bf16.write_text("softmax\ntan\n")
    fp32.write_text("mm\nlinear\n")
    hmp.convert(bf16_file_path=str(bf16), fp32_file_path=str(fp32))
    assert hmp.bf16_ops() == ("softmax", "tan") and hmp.fp32_ops() == ("mm", "linear")
    a, h = rand(3, 3), rand(3, 3, dtype=BF16)
    assert torch.mm(h, h).dtype == FP32
    assert F.linear(h, h).dtype == FP32
    assert F.softmax(a, -1).dtype == BF16
    assert torch.tan(a).dtype == BF16
    assert torch.relu(a).dtype == FP32  # relu is no longer on any list


def test_a_user_list_wins_over_the_other_default_list(tmp_path):
    bf16 = tmp_path / "ops_bf16.txt"
    bf16.write_text("softmax\nmm\n")  # softmax is on the default fp32 list
    hmp.convert(bf16_file_path=str(bf16))
    assert "softmax" not in hmp.fp32_ops()
    assert F.softmax(rand(3, 3), -1).dtype == BF16
    assert F.log_softmax(rand(3, 3, dtype=BF16), -1).dtype == FP32


def test_two_user_lists_must_not_overlap(tmp_path):
    bf16, fp32 = tmp_path / "a.txt", tmp_path / "b.txt"
    bf16.write_text("mm\n")
    fp32.write_text("mm\n")
    with pytest.raises(AssertionError, match=r"\['mm'\] in both fp32 & bf16 list"):
        hmp.convert(bf16_file_path=str(bf16), fp32_file_path=str(fp32))


def test_o2_keeps_only_gemm_and_conv_in_bf16(tmp_path, capsys):
    hmp.convert(opt_level="O2", bf16_file_path=str(tmp_path / "ignored.txt"))
    assert "Input op list would be overridden in opt_level O2" in capsys.readouterr().out
    a, h = rand(4, 4), rand(4, 4, dtype=BF16)
    assert torch.mm(a, a).dtype == BF16
    assert torch.bmm(a[None], a[None]).dtype == BF16
    assert nn.Conv1d(4, 2, 1).to("hpu")(rand(1, 4, 5)).dtype == BF16
    assert F.linear(h, h).dtype == FP32  # not on the O2 list
    assert torch.relu(h).dtype == FP32
    assert (h + h).dtype == FP32
    assert F.softmax(h, -1).dtype == FP32


def test_verbose_prints_one_line_per_cast_decision(capsys):
    hmp.convert(isVerbose=True)
    capsys.readouterr()
    a, b = rand(3, 3), rand(3, 3)
    a.matmul(b)
    assert capsys.readouterr().out.splitlines() == [
        f"casting  {ORIGINALS[1]!r} to_bf16"]
    a.matmul(b)
    torch.mm(a, b) + a
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"casting  {ORIGINALS[1]!r} to_bf16",
                     f"casting  {ORIGINALS[0]!r} to_bf16",
                     f"casting  {ORIGINALS[2]!r}  to  to_fp32"]
    assert lines[0] == "casting  <method 'matmul' of 'torch._C.TensorBase' objects> to_bf16"
    with hmp.disable_casts():
        a.matmul(b)
    assert capsys.readouterr().out.splitlines() == ["Disabled HMP casting", "Enabled HMP casting"]


def test_convert_twice_does_not_wrap_twice(capsys):
    hmp.convert(isVerbose=True)
    hmp.convert(isVerbose=True)
    capsys.readouterr()
    a = rand(2, 2)
    assert torch.mm(a, a).dtype == BF16
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_bad_list_files_warn_and_keep_the_default(tmp_path, capsys):
    with pytest.warns(UserWarning, match="cannot read the bf16 ops list"):
        hmp.convert(bf16_file_path=str(tmp_path / "missing.txt"))
    assert hmp.bf16_ops() == hmp.DEFAULT_BF16_OPS
    garbage = tmp_path / "garbage.txt"
    garbage.write_bytes(bytes(range(256)))
    with pytest.warns(UserWarning, match="cannot read the fp32 ops list"):
        hmp.convert(fp32_file_path=str(garbage))
    assert hmp.fp32_ops() == hmp.DEFAULT_FP32_OPS
    nonsense = tmp_path / "nonsense.txt"
    nonsense.write_text("hello\nworld\n")
    with pytest.warns(UserWarning, match="names no op hmp supports"):
        hmp.convert(bf16_file_path=str(nonsense))
    assert hmp.bf16_ops() == hmp.DEFAULT_BF16_OPS
    with pytest.warns(UserWarning, match="cannot read"):
        hmp.convert(bf16_file_path=str(tmp_path))  # a directory
    assert torch.mm(rand(2, 2), rand(2, 2)).dtype == BF16
    # an unknown name among known ones is reported and skipped
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("mm\nfrobnicate\n")
    capsys.readouterr()
    hmp.convert(bf16_file_path=str(mixed))
    assert "frobnicate OP not supported. Please add it to OPs dict and try again" in \
        capsys.readouterr().out
    assert torch.mm(rand(2, 2), rand(2, 2)).dtype == BF16


def test_invalid_opt_level():
    with pytest.raises(AssertionError, match="Optlevel should be either O1 or O2"):
        hmp.convert(opt_level="O3")


def test_seed_usage_example_linear_sgd_with_disable_casts():
    """The seeds' example: convert, a Linear model trained with SGD, the optimizer step
    run under disable_casts. Compared with the same loop in float32 on CPU."""
    def run(device: str, use_hmp: bool) -> tuple[list[float], nn.Module]:
        torch.manual_seed(0)
        model = nn.Linear(16, 4)
        model.to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        data = torch.randn(64, 16, generator=g)
        target = (data[:, :4].argmax(1))
        losses = []
        for _ in range(15):
            x, y = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(x)
            loss = F.cross_entropy(output, y)
            loss.backward()
            if use_hmp:
                with hmp.disable_casts():
                    optimizer.step()
            else:
                optimizer.step()
            losses.append(loss.item())
        return losses, model

    want, _ = run("cpu", False)
    hmp.convert(opt_level="O1", bf16_file_path="", fp32_file_path="", isVerbose=False)
    got, model = run("hpu", True)
    assert all(p.dtype == FP32 for p in model.parameters())
    assert got[-1] < got[0] * 0.8
    for g, w in zip(got, want):
        assert abs(g - w) <= 0.03 + 0.02 * abs(w), (got, want)
