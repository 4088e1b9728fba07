"""Availability probes, as in the bridge: `is_habana_available()` asks hl-smi."""
from __future__ import annotations

import os
import subprocess


def is_habana_available() -> bool:
    env = dict(os.environ, ENABLE_CONSOLE="true")
    # The packaged hl-smi program itself when present: a virtualenv's `hl-smi` console script
    # first imports this whole package (torch included) only to exec it, which on a loaded
    # machine can outlast the timeout and report no device.
    from .hl_smi import _LIB

    packaged = os.path.join(_LIB, "hl-smi")
    exe = packaged if os.access(packaged, os.X_OK) else "hl-smi"
    try:
        out = subprocess.run([exe, "-v"], capture_output=True, text=True, env=env, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return "Habana" in out.stdout


def load_habana_module() -> None:
    """Kept for old scripts: the native modules load when habana_frameworks.torch is imported."""
    import habana_frameworks.torch  # noqa: F401
