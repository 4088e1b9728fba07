"""optimum-habana 1.21.2 runs unchanged on hpusim: GaudiTrainer trains tiny GPT-2, BERT and
Llama models (eager and lazy; plain AdamW in fp32, and FusedAdamW + FusedClipNorm + hpu bf16
autocast) with the losses of plain transformers' Trainer on the CPU, and GaudiGenerationMixin
generates the CPU's greedy tokens (eager, lazy, and lazy with HPU graphs).

Each mode runs in its own process (tests/clients_optimum_worker.py): the execution mode is
fixed when the bridge loads, and optimum-habana patches transformers' classes for good.
Models are built from tiny local configs; nothing is downloaded (HF_HUB_OFFLINE=1)."""
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from packaging.version import InvalidVersion, Version

if importlib.util.find_spec("optimum") is None or importlib.util.find_spec("optimum.habana") is None:
    pytest.skip("optimum-habana is not installed (requirements.txt pins it)", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))


def _pip_list_version():
    """The plugin version as optimum-habana reads it (`pip list | grep habana-torch-plugin`,
    last column), with the venv's pip first on PATH as in an activated venv."""
    out = subprocess.run([sys.executable, "-m", "pip", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("habana-torch-plugin "):
            try:
                return Version(line.split()[-1])
            except InvalidVersion:
                return None
    return None


if _pip_list_version() is None:
    # An editable install (make develop) ends the pip list line with its path, and
    # optimum-habana's import then fails in packaging.version; `make build` installs normally.
    pytest.skip("habana-torch-plugin is an editable install: optimum-habana cannot parse its version",
                allow_module_level=True)


def _run(mode: str, jobs: str) -> dict:
    env = dict(os.environ, PT_HPU_LAZY_MODE="1" if mode == "lazy" else "0", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    # As in an activated venv: optimum-habana runs `pip` by name.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    r = subprocess.run([sys.executable, os.path.join(HERE, "clients_optimum_worker.py"), jobs],
                       capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout[-3000:] + r.stderr[-6000:]
    res = json.loads(lines[-1][len("RESULT "):])
    assert res["lazy"] == (mode == "lazy")
    # optimum-habana's own reading of `pip list` at import.
    assert res["plugin_version"] == importlib.metadata.version("habana-torch-plugin")
    return res


def _check_training(train: dict) -> None:
    for family, runs in train.items():
        cpu = runs["cpu"]
        assert len(cpu) == len(runs["hpu"]) == len(runs["hpu_fused_bf16"]) == 6, (family, runs)
        # Same weights and batches: the first step's loss agrees to the logged 4 decimals;
        # later steps drift by rounding differences compounded by the updates.
        assert abs(runs["hpu"][0] - cpu[0]) <= 2e-4, (family, runs)
        assert max(abs(a - b) for a, b in zip(runs["hpu"], cpu)) <= 5e-3, (family, runs)
        assert max(abs(a - b) for a, b in zip(runs["hpu_fused_bf16"], cpu)) <= 3e-2, (family, runs)
        plain, fused = runs["hpu_setup"], runs["hpu_fused_bf16_setup"]
        assert plain["device"].startswith("hpu") and fused["device"].startswith("hpu")
        assert plain["optimizer"] == "torch.optim.adamw.AdamW" and not plain["hpu_amp"]
        assert fused["optimizer"].endswith("FusedAdamW") and "hpex" in fused["optimizer"], fused
        assert fused["clip_norm"] == "FusedClipNorm" and fused["hpu_amp"], fused


def _check_generation(gen: dict, expect_graphs: bool) -> None:
    for family, runs in gen.items():
        assert runs["hpu"] == runs["cpu"], (family, runs)
        assert len(runs["cpu"][0]) == 5 + 8
        if expect_graphs:
            assert runs["hpu_graphs"] == runs["cpu"], (family, runs)


def test_optimum_habana_eager_trains_and_generates_like_cpu():
    res = _run("eager", "train:gpt2,train:bert,generate:llama")
    _check_training(res["train"])
    _check_generation(res["generate"], expect_graphs=False)


def test_optimum_habana_lazy_trains_and_generates_like_cpu_with_hpu_graphs():
    res = _run("lazy", "train:llama,generate:gpt2,generate:llama")
    _check_training(res["train"])
    _check_generation(res["generate"], expect_graphs=True)
