"""hl-smi reachable as optimum-habana runs it: `subprocess.run("hl-smi", shell=True,
env={"ENABLE_CONSOLE": "true"})`, a shell with no PATH, which searches /bin/sh's default path.
`make build` links the venv's hl-smi into /usr/local/bin (Makefile, target system-hl-smi), as a
Gaudi machine has hl-smi among its system programs."""
import importlib.util
import os
import subprocess
import sys

import pytest

_LINK = "/usr/local/bin/hl-smi"


def _needs_link():
    if not os.path.lexists(_LINK) and not os.access("/usr/local/bin", os.W_OK):
        pytest.skip("/usr/local/bin is not writable here, so `make build` cannot link hl-smi there")
    assert os.path.exists(_LINK), "run `make system-hl-smi` (part of `make build`)"


def test_pathless_shell_finds_hl_smi():
    _needs_link()
    out = subprocess.run("hl-smi -v", shell=True, text=True, capture_output=True, env={}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "hl-smi/hlml version hl-1.22" in out.stdout


def test_optimum_habana_reads_the_driver_version():
    _needs_link()
    spec = importlib.util.find_spec("optimum.habana")
    if spec is None:
        pytest.skip("optimum-habana is not installed")
    # optimum.habana's package __init__ patches transformers (tens of seconds of imports); its
    # utils.misc, which holds the hl-smi call, needs only the package's path.
    code = (
        "import sys, types\n"
        "pkg = types.ModuleType('optimum.habana')\n"
        f"pkg.__path__ = {list(spec.submodule_search_locations)!r}\n"
        "sys.modules['optimum.habana'] = pkg\n"
        "import optimum.habana.utils.misc as m\n"
        "print('DRIVER', m.get_driver_version())\n"
    )
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = subprocess.run([sys.executable, "-c", code], text=True, capture_output=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "DRIVER 1.22.0" in out.stdout, out.stdout  # None when optimum cannot run hl-smi
