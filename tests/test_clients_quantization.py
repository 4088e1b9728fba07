"""fp8 inference as quantization clients run it: `htcore.quantization`'s setup calls, and
habana_quantization_toolkit (what lightning-habana's HPUPrecisionPlugin(precision="fp8")
.convert_modules(inference=True) imports) measuring a model, then quantizing it to fp8 with
torch.ops.hpu.cast_to_fp8_v2 / fp8_gemm_v2 / conv2d_fp8, against the fp32 model on CPU."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import habana_frameworks.torch.core as htcore


def test_inference_env_switches_round_trip():
    htcore.quantization.hpu_set_inference_env()
    try:
        assert torch.hpu.is_inference_mode_enabled()
        assert torch.hpu.is_quantization_enabled()
        assert torch.hpu.is_matmul3d_2d_reshape_enabled()
    finally:
        htcore.quantization.hpu_teardown_inference_env()
    assert not torch.hpu.is_inference_mode_enabled()
    assert not torch.hpu.is_quantization_enabled()
    assert not torch.hpu.is_matmul3d_2d_reshape_enabled()
    htcore.hpu_set_env()
    assert torch.hpu.is_inference_mode_enabled() and not torch.hpu.is_quantization_enabled()
    htcore.hpu_reset_env()
    assert not torch.hpu.is_inference_mode_enabled()


def test_initialize_marks_device_tensors_const():
    model = torch.nn.Linear(4, 2).to("hpu")
    model.register_buffer("scale_input", torch.ones(1, device="hpu"))
    cpu_model = torch.nn.Linear(4, 2)
    htcore.hpu_initialize(model, mark_only_scales_as_const=True)
    assert htcore.quantization.is_const(model.scale_input)
    assert not htcore.quantization.is_const(model.weight)
    htcore.quantization.hpu_inference_initialize(model)
    try:
        assert htcore.quantization.is_const(model.weight) and htcore.quantization.is_const(model.bias)
        assert torch.hpu.is_inference_mode_enabled()
    finally:
        htcore.quantization.hpu_teardown_inference_env()
    htcore.hpu_initialize(cpu_model)  # host tensors have no const section to go into
    assert not htcore.quantization.is_const(cpu_model.weight)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        htcore.hpu_initialize(object())


_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch
    import habana_frameworks.torch.core as htcore
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 6 * 6, 4)).eval()
    x = torch.randn(16, 3, 6, 6)
    with torch.no_grad():
        want = model(x)
    htcore.hpu_set_inference_env()
    model = model.to("hpu")
    import habana_quantization_toolkit as hqt  # reads QUANT_CONFIG at import
    hqt.prep_model(model)
    htcore.hpu_inference_initialize(model)
    with torch.no_grad():
        got = model(x.to("hpu")).cpu().float()
    if os.environ["MODE"] == "MEASURE":
        hqt.finish_measurements(model)
    print(json.dumps({"patched": [type(model[i]).__name__ for i in (0, 3)], "err": (got - want).abs().max().item(),
                      "ref": want.abs().max().item()}))
""")


def _run_hqt(tmp_path, mode):
    config = {"method": "HOOKS", "mode": mode, "observer": "maxabs", "scale_method": "maxabs_hw",
              "dump_stats_path": str(tmp_path / "hqt"), "whitelist": {"types": [], "names": []},
              "blacklist": {"types": [], "names": []}}
    path = tmp_path / f"{mode.lower()}.json"
    path.write_text(json.dumps(config))
    env = dict(os.environ, QUANT_CONFIG=str(path), MODE=mode)
    r = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_quantization_toolkit_measures_then_runs_fp8(tmp_path):
    pytest.importorskip("habana_quantization_toolkit")
    # One process each, as the toolkit reads its config once per process.
    measured = _run_hqt(tmp_path, "MEASURE")
    assert measured["patched"] == ["PatchedConv2d", "PatchedLinear"]
    assert measured["err"] < 1e-5  # measuring observes, it does not change the numbers
    assert {"hqt_hooks_maxabs.json", "hqt_hooks_maxabs.npz", "hqt_hooks_maxabs_mod_list.json"} <= set(os.listdir(tmp_path))
    quant = _run_hqt(tmp_path, "QUANTIZE")
    assert quant["patched"] == ["PatchedConv2d", "PatchedLinear"]
    # fp8 e4m3 keeps 3 mantissa bits: a few percent of the output's range, and not exact.
    assert 0 < quant["err"] < 0.08 * quant["ref"]
