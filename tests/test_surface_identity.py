"""Identity and packaging as clients check them (version pair, pip list, hl-smi), and the
flags and fixes clients' test suites exercise (PT_ENABLE_INT64_SUPPORT, empty mse_loss)."""
import importlib.metadata
import json
import os
import re
import subprocess
import sys

import pytest
import torch
from packaging.version import Version

import habana_frameworks.torch as ht

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=180)


def test_version_pairs_with_torch_as_the_release_matrix():
    # Intel Gaudi 1.22 is the release that pairs with PyTorch 2.7.1.
    assert torch.__version__.split("+")[0] == "2.7.1"
    assert ht.__version__.startswith("1.22.")
    setup_py = open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read()
    assert re.search(r'^VERSION = "([^"]+)"', setup_py, re.M).group(1) == ht.__version__
    assert torch.hpu.get_device_capability().split("-")[0] == ".".join(ht.__version__.split(".")[:3])


def test_hl_smi_reachable_without_the_venv_on_path():
    # As optimum-habana and lightning-habana call it: by name, from a process whose PATH has
    # no virtualenv, after importing the bridge.
    code = ("import subprocess, habana_frameworks.torch as ht\n"
            "print(subprocess.run('hl-smi -v', shell=True, capture_output=True, text=True).stdout)\n"
            "print(ht.__version__)")
    r = _run(code, PATH="/usr/bin:/bin")
    assert r.returncode == 0, r.stderr
    hl = re.search(r"hl-([\d\.]+)-fw-([\d\.]+)", r.stdout)
    assert hl, r.stdout
    assert hl.group(1) == ".".join(r.stdout.split()[-1].split(".")[:3])


def _editable() -> bool:
    dist = importlib.metadata.distribution("habana-torch-plugin")
    text = dist.read_text("direct_url.json")
    return bool(text and json.loads(text).get("dir_info", {}).get("editable"))


def test_pip_list_shows_a_parseable_plugin_version():
    if _editable():
        pytest.skip("editable install (make develop): pip list ends the line with its path")
    # optimum-habana: `pip list | grep habana-torch-plugin`, last column, packaging.version.
    out = subprocess.run([sys.executable, "-m", "pip", "list"], capture_output=True, text=True).stdout
    line = [ln for ln in out.splitlines() if ln.startswith("habana-torch-plugin")]
    assert line, out
    v = Version(line[0].split()[-1])
    assert (v.major, v.minor) == (1, 22) and str(v) == importlib.metadata.version("habana-torch-plugin")


def test_int64_support_flag(monkeypatch):
    big = torch.iinfo(torch.int64).max
    monkeypatch.setenv("PT_ENABLE_INT64_SUPPORT", "False")
    with pytest.raises(RuntimeError, match="Error when trying to cast Long to Int"):
        torch.tensor(big, dtype=torch.int64, device="hpu")
    small = torch.tensor([-5, 2**31 - 1], dtype=torch.int64, device="hpu")
    assert small.cpu().tolist() == [-5, 2**31 - 1]
    monkeypatch.setenv("PT_ENABLE_INT64_SUPPORT", "True")
    assert torch.tensor(big, dtype=torch.int64, device="hpu").item() == big
    monkeypatch.delenv("PT_ENABLE_INT64_SUPPORT")
    assert torch.tensor(big, dtype=torch.int64, device="hpu").item() == big


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_on_empty_tensors_matches_cpu(reduction):
    results = {}
    for dev in ("cpu", "hpu"):
        x = torch.empty(0, 3, device=dev, requires_grad=True)
        loss = torch.nn.functional.mse_loss(x, torch.empty(0, 3, device=dev), reduction=reduction)
        assert type(loss.grad_fn).__name__ == "MseLossBackward0"
        loss.sum().backward()
        results[dev] = (loss.detach().cpu(), x.grad.cpu())
    torch.testing.assert_close(results["hpu"][0], results["cpu"][0], equal_nan=True)
    assert results["hpu"][1].shape == results["cpu"][1].shape == (0, 3)


def test_hl_smi_console_script_starts_without_torch():
    # The console script's entry point (setup.py) must not import torch or the bridge:
    # clients run `hl-smi -v` at import in every process (lightning-habana's DataLoader
    # workers included), where a torch import per call cost seconds to minutes.
    setup_py = open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read()
    entry = re.search(r'"hl-smi = ([\w.]+):(\w+)"', setup_py)
    assert entry, "hl-smi console script missing from setup.py"
    module, func = entry.groups()
    code = (f"import sys, {module} as m; assert 'torch' not in sys.modules, 'imports torch'; "
            f"sys.argv = ['hl-smi', '-v']; m.{func}()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert re.search(r"hl-smi/hlml version hl-\d+\.\d+\.\d+", r.stdout), r.stdout


def test_autoload_follows_pt_hpu_autoload():
    # torch's device-backend autoload imports the bridge at `import torch`: by default in
    # eager mode only; PT_HPU_AUTOLOAD=1/0 forces it on/off in either mode, as the bridge's
    # entry point decides.
    code = "import sys, torch; print('LOADED', 'habana_frameworks.torch' in sys.modules)"
    cases = {("0", None): True, ("0", "0"): False, ("1", None): False, ("1", "1"): True}
    procs = {}
    for (lazy, flag), _ in cases.items():
        env = {k: v for k, v in os.environ.items() if k not in ("PT_HPU_AUTOLOAD", "TORCH_DEVICE_BACKEND_AUTOLOAD")}
        env["PT_HPU_LAZY_MODE"] = lazy
        if flag is not None:
            env["PT_HPU_AUTOLOAD"] = flag
        procs[(lazy, flag)] = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)
    for key, p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert f"LOADED {cases[key]}" in out, (key, out, err)
