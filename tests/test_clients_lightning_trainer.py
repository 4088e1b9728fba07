"""Lightning with lightning_habana on hpusim, as a user's script runs it (one process per mode,
tests/clients_lightning_trainer_worker.py): fit/validate/test/predict with ModelCheckpoint and
EarlyStopping on accelerator="hpu", fp32 with the network compiled by hpu_backend (losses equal
to Lightning's CPU run), "bf16-mixed", and the best checkpoint reloaded on hpu."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

if importlib.util.find_spec("lightning_habana") is None:
    pytest.skip("lightning-habana is not installed (requirements.txt pins it)", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(jobs: str, lazy: bool) -> dict:
    env = dict(os.environ, PT_HPU_LAZY_MODE="1" if lazy else "0")
    r = subprocess.run([sys.executable, os.path.join(HERE, "clients_lightning_trainer_worker.py"), jobs],
                       capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout[-3000:] + r.stderr[-6000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_lightning_trainer_on_hpu_matches_cpu():
    # Eager only to keep the suite short: the lazy run is the same script with PT_HPU_LAZY_MODE=1.
    lazy = False
    jobs = ["cpu:32-true:plain", "hpu:32-true:compile", "hpu:bf16-mixed:plain"]
    res = _run(",".join(jobs), lazy)
    cpu, hpu, bf16 = (res[j] for j in jobs)
    assert cpu["device"] == "cpu" and hpu["device"] == "hpu:0" and bf16["device"] == "hpu:0"
    # fp32 on hpu (compiled network) trains like the CPU: same best score, losses, predictions.
    assert abs(hpu["best"] - cpu["best"]) < 1e-4 and abs(hpu["validate"] - cpu["validate"]) < 1e-4
    assert hpu["test_acc"] == cpu["test_acc"] and hpu["predict"] == cpu["predict"]
    # bf16-mixed learns the same task.
    assert bf16["test_acc"] > 0.9 and abs(bf16["validate"] - cpu["validate"]) < 2e-2
    for r in (hpu, bf16):
        assert r["reloaded_device"] == "hpu:0" and r["reloaded_predict"] == r["predict"]
