"""The `hl-smi` command: runs the Go hl-smi program shipped in the package's lib/."""
import os
import sys


def main() -> None:
    exe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib", "hl-smi")
    os.execv(exe, [exe, *sys.argv[1:]])
