"""torch.backends entry point: `import torch` alone makes `hpu` usable in eager mode.

As in the bridge, autoload is on by default in eager mode and off in lazy mode;
PT_HPU_AUTOLOAD=1 or 0 forces it either way.
"""
import os


def __autoload() -> None:
    # The bridge's rule: PT_HPU_AUTOLOAD=1 loads and =0 does not, in either mode; unset, it
    # loads in eager mode only.
    flag = os.getenv("PT_HPU_AUTOLOAD", "").strip().lower()
    if flag in ("0", "false", "no"):
        return
    lazy = os.getenv("PT_HPU_LAZY_MODE", "0") not in ("0", "")
    if lazy and flag not in ("1", "true", "yes"):
        return
    try:
        import habana_frameworks.torch  # noqa: F401
    except ImportError as e:
        # A broken install must not break `import torch` for every program in the env.
        import warnings
        warnings.warn(f"hpusim: hpu device not available: {e}")
