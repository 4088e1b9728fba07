"""habana_frameworks.torch.core.quantizer: the bridge's PT2E quantizer (what optimum-habana's
pt2e example imports), with prepare_pt2e/convert_pt2e on a model exported on hpu, against the
same pipeline on CPU (torch's reference quantize/dequantize numerics)."""
import os
import subprocess
import sys

import pytest
import torch
from torch.ao.quantization.quantize_pt2e import convert_pt2e, prepare_pt2e

import habana_frameworks.torch.core as htcore
from habana_frameworks.torch.core.observer import AbsMaxObserver, SimpleAbsMaxObserver
from habana_frameworks.torch.core.quantizer import habana_quant_config_symmetric, habana_quantizer

FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 4 * 4, 16)

    def forward(self, x):
        y = self.pool(torch.relu(self.conv(x))).flatten(1)
        z = self.fc(y)
        return torch.matmul(z, z.t())


def _pipeline(device, dtype):
    g = torch.Generator().manual_seed(0)
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(0)
        model = Net().eval()
    model = model.to(device)
    xs = [torch.randn(4, 3, 8, 8, generator=g).to(device) for _ in range(3)]
    gm = torch.export.export(model, (xs[0],)).module()
    q = habana_quantizer().set_global(habana_quant_config_symmetric(dtype))
    prepared = prepare_pt2e(gm, q)
    for x in xs:
        prepared(x)
    scales = sorted(float(m.calculate_qparams()[0]) for m in prepared.modules() if isinstance(m, AbsMaxObserver))
    converted = convert_pt2e(prepared)
    return converted, converted(xs[0]), scales


@pytest.mark.parametrize("dtype", FP8)
def test_prepare_convert_on_hpu_matches_cpu_reference(dtype):
    gm, y, scales = _pipeline("hpu", dtype)
    gm_cpu, y_cpu, scales_cpu = _pipeline("cpu", dtype)
    htcore.mark_step()
    assert y.device.type == "hpu"
    assert scales == scales_cpu and len(scales) > 0
    torch.testing.assert_close(y.cpu(), y_cpu, rtol=1e-5, atol=1e-5)
    qd = torch.ops.quantized_decomposed
    q_nodes = [n for n in gm.graph.nodes if n.target == qd.quantize_per_tensor.default]
    dq_nodes = [n for n in gm.graph.nodes if n.target == qd.dequantize_per_tensor.default]
    assert q_nodes and len(dq_nodes) >= len(q_nodes)
    assert all(n.args[-1] == dtype and n.args[3:5] == (-240, 240) for n in q_nodes)
    # Every conv/linear/matmul/maxpool input is dequantized (the annotation covered them).
    targets = {"aten.conv2d.default", "aten.linear.default", "aten.matmul.default", "aten.max_pool2d.default"}
    for n in gm.graph.nodes:
        if str(n.target) in targets:
            assert n.args[0].target == qd.dequantize_per_tensor.default, n
    if dtype == torch.float8_e5m2:
        assert set(scales) == {1.0}  # Gaudi2's only e5m2 exponent bias


def test_annotation_of_the_bridge():
    torch.manual_seed(0)
    gm = torch.export.export(Net().eval(), (torch.randn(2, 3, 8, 8),)).module()
    habana_quantizer().set_global(habana_quant_config_symmetric(torch.float8_e4m3fn)).annotate(gm)
    ann = {str(n.target): n.meta["quantization_annotation"] for n in gm.graph.nodes
           if "quantization_annotation" in n.meta and n.op == "call_function"}
    conv = ann["aten.conv2d.default"]
    # input, weight, float bias; outputs are not quantized (the config has no output spec)
    assert len(conv.input_qspec_map) == 3 and conv.output_qspec is None
    bias_specs = [s for k, s in conv.input_qspec_map.items() if k.name.endswith("bias")]
    assert bias_specs and bias_specs[0].dtype == torch.float
    assert len(ann["aten.linear.default"].input_qspec_map) == 3
    assert len(ann["aten.matmul.default"].input_qspec_map) == 2
    pool = ann["aten.max_pool2d.default"]
    assert len(pool.input_qspec_map) == 1 and type(pool.output_qspec).__name__ == "SharedQuantizationSpec"
    assert "aten.relu.default" not in ann
    # An empty quantizer leaves the graph alone.
    gm2 = torch.export.export(Net().eval(), (torch.randn(2, 3, 8, 8),)).module()
    habana_quantizer().annotate(gm2)
    assert not any("quantization_annotation" in n.meta for n in gm2.graph.nodes)


def _expected_scale(absmax, margin, dtype):
    # s = absmax * 2**margin / 240, up to a power of 2, then to a power of 2**4, clamped to
    # the exponent-bias scales (e4m3fn 2**-8..2**4, e5m2 1).
    import math
    s = max(absmax * 2 ** margin / 240, 2 ** -12)
    e = math.ceil(math.log2(s))
    e = math.ceil(e / 4) * 4
    lo, hi = (-8, 4) if dtype == torch.float8_e4m3fn else (0, 0)
    return 2.0 ** min(max(e, lo), hi)


@pytest.mark.parametrize("absmax", [1e-6, 0.3, 1.0, 7.5, 100.0, 1e5])
@pytest.mark.parametrize("dtype", FP8)
def test_observers_scales(absmax, dtype):
    for device in ("cpu", "hpu"):
        for margin in (0, 1, 2):
            obs = AbsMaxObserver(dtype=dtype, quant_min=-240, quant_max=240, eps=2 ** -12, backoff_margin=margin)
            x = torch.tensor([-absmax / 3, absmax / 5, 0.0], device=device)
            obs(x)
            obs(-x * 3)  # min -absmax after both
            scale, zp = obs.calculate_qparams()
            assert float(scale) == _expected_scale(absmax, margin, dtype), (device, margin)
            assert int(zp) == 0
            simple = SimpleAbsMaxObserver(dtype=dtype, quant_min=-240, quant_max=240, eps=2 ** -12,
                                          backoff_margin=margin)
            simple(x)
            simple(-x * 3)
            assert float(simple.calculate_qparams()[0]) == _expected_scale(absmax, margin, dtype)


def test_observer_refuses_what_the_bridge_refuses():
    with pytest.raises(NotImplementedError):
        AbsMaxObserver(dtype=torch.int8, quant_min=-128, quant_max=127)
    with pytest.raises(NotImplementedError):
        AbsMaxObserver(qscheme=torch.per_tensor_affine)
    with pytest.raises(NotImplementedError):
        SimpleAbsMaxObserver(is_dynamic=True)
    # The int8 config builds, as in the bridge, but its observer is refused at prepare time.
    gm = torch.export.export(Net().eval(), (torch.randn(2, 3, 8, 8),)).module()
    with pytest.raises(NotImplementedError):
        prepare_pt2e(gm, habana_quantizer().set_global(habana_quant_config_symmetric(torch.int8)))


def test_lazy_mode_matches_eager():
    code = ("import torch, sys; sys.path.insert(0, %r)\n"
            "import test_clients_s18_quantizer as t\n"
            "gm, y, s = t._pipeline('hpu', torch.float8_e4m3fn)\n"
            "import habana_frameworks.torch.core as htcore; htcore.mark_step()\n"
            "print('OUT', y.cpu().double().sum().item().hex(), s)\n") % os.path.dirname(__file__)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PT_HPU_")}
    env["PT_HPU_LAZY_MODE"] = "1"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    _, y, scales = _pipeline("hpu", torch.float8_e4m3fn)
    htcore.mark_step()
    assert p.stdout.split("OUT ", 1)[1].strip() == f"{y.cpu().double().sum().item().hex()} {scales}"
