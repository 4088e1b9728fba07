"""The `hl-smi` command: runs the Go hl-smi program shipped in the package's lib/."""
import os
import shutil
import sys

_LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")


def main() -> None:
    exe = os.path.join(_LIB, "hl-smi")
    os.execv(exe, [exe, *sys.argv[1:]])


def ensure_on_path() -> None:
    """On Gaudi hl-smi is a system program (/usr/bin), and clients run it by name from
    processes whose PATH has no virtualenv (optimum-habana, lightning-habana version checks).
    If no hl-smi is reachable, append the directory of the packaged one to this process's
    PATH, which the clients' subprocesses inherit. An hl-smi already on PATH wins."""
    if shutil.which("hl-smi") is None and os.access(os.path.join(_LIB, "hl-smi"), os.X_OK):
        os.environ["PATH"] = os.environ.get("PATH", "") + os.pathsep + _LIB
