"""Availability probes, as in the bridge: `is_habana_available()` asks hl-smi."""
from __future__ import annotations

import os
import subprocess


def is_habana_available() -> bool:
    env = dict(os.environ, ENABLE_CONSOLE="true")
    try:
        out = subprocess.run(["hl-smi", "-v"], capture_output=True, text=True, env=env, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return "Habana" in out.stdout


def load_habana_module() -> None:
    """Kept for old scripts: the native modules load when habana_frameworks.torch is imported."""
    import habana_frameworks.torch  # noqa: F401
