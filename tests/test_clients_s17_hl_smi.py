"""hl-smi reachable as optimum-habana runs it: `subprocess.run("hl-smi", shell=True,
env={"ENABLE_CONSOLE": "true"})`, a shell with no PATH, which searches /bin/sh's default path.
`make build` links the venv's hl-smi into /usr/local/bin (Makefile, target system-hl-smi), as a
Gaudi machine has hl-smi among its system programs."""
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
    pytest.importorskip("optimum.habana")
    code = (
        "import optimum.habana.utils.misc as m\n"
        "v = m.get_driver_version()\n"
        "assert v is not None, 'optimum-habana could not run hl-smi'\n"
        "m.check_synapse_version()\n"
        "print('DRIVER', v)\n"
    )
    env = dict(os.environ, PT_HPU_LAZY_MODE="0")
    out = subprocess.run([sys.executable, "-c", code], text=True, capture_output=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "DRIVER 1.22.0" in out.stdout
    assert "Could not run `hl-smi`" not in out.stderr + out.stdout
