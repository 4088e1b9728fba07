"""Entry point of the `hl-smi` console script: exec the Go hl-smi program shipped in
habana_frameworks/torch/lib. It lives outside `habana_frameworks.torch` on purpose: importing
anything inside that package first imports torch and loads the bridge, seconds of start-up
(tens under load) for a command clients run at import time (lightning-habana runs
`hl-smi -v` in every process, DataLoader workers included)."""
import os
import sys

LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch", "lib")


def main() -> None:
    exe = os.path.join(LIB, "hl-smi")
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
