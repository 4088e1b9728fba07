"""Packaging for hpusim's `habana-torch-plugin` distribution.

Building compiles the native parts against what is installed on this machine: the Go core
(`go build -buildmode=c-shared`), the C++ glue against the installed torch's headers and
ABI, and the `hl-smi` program.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Command, find_namespace_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
LIB = ROOT / "python" / "habana_frameworks" / "torch" / "lib"
# The glue proper and the fast kernels for the hot ops (hpu_fast_ops.cpp), one library.
GLUE_SRCS = sorted((ROOT / "python" / "habana_frameworks" / "torch" / "csrc").glob("*.cpp"))
VERSION = "1.22.0.1"


def _run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def build_native(force: bool = False) -> None:
    LIB.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CGO_ENABLED="1")
    _run(["go", "build", "-buildmode=c-shared", "-o", LIB / "libhpusim.so", "./capi"], cwd=ROOT, env=env)
    _run(["go", "build", "-o", LIB / "hl-smi", "./cmd/hl-smi"], cwd=ROOT, env=env)

    # Importing torch would autoload this very package, whose glue is what we are building.
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch
    from torch.utils import cpp_extension

    glue = LIB / "libhpu_glue.so"
    stamp = LIB / "libhpu_glue.torch-version"
    fresh = (glue.exists() and stamp.exists() and stamp.read_text() == torch.__version__
             and all(glue.stat().st_mtime > src.stat().st_mtime for src in GLUE_SRCS))
    if fresh and not force:
        return
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    flags = ["-O2", "-std=c++17", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-Wno-deprecated-declarations"]
    for inc in cpp_extension.include_paths():
        flags += ["-isystem", inc]
    # hpu_hccl.cpp is also a Python module (pybind11, as torch's own extensions): Python's
    # headers, and torch's pybind11 ABI tags so its classes are shared with torch._C.
    import sysconfig
    flags += ["-isystem", sysconfig.get_paths()["include"], *_pybind11_abi_flags(cpp_extension)]

    # One object per source, rebuilt only when its source (or torch, or the flags) changed, two
    # at a time: a one-file edit then recompiles one file instead of the whole glue.
    objdir = ROOT / "build" / "glue_obj"
    objdir.mkdir(parents=True, exist_ok=True)
    key = "\n".join([torch.__version__, *flags])
    keyfile = objdir / "flags"
    stale_all = force or not keyfile.exists() or keyfile.read_text() != key
    objs, todo = [], []
    for src in GLUE_SRCS:
        obj = objdir / (src.stem + ".o")
        objs.append(obj)
        if stale_all or not obj.exists() or obj.stat().st_mtime <= src.stat().st_mtime:
            todo.append(["g++", *flags, "-c", src, "-o", obj])
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(_run, todo))
    keyfile.write_text(key)

    cmd = ["g++", "-shared", *objs, "-o", glue, "-L", LIB, "-lhpusim"]
    for libdir in cpp_extension.library_paths():
        cmd += ["-L", libdir, f"-Wl,-rpath,{libdir}"]
    cmd += ["-lc10", "-ltorch_cpu", "-ltorch_python", "-Wl,-rpath,$ORIGIN"]
    _run(cmd)
    stamp.write_text(torch.__version__)


def _pybind11_abi_flags(cpp_extension) -> list[str]:
    """torch's pybind11 ABI defines, unquoted for a direct g++ call (torch quotes them for a shell)."""
    return [f.replace('\\"', '"') for f in cpp_extension._get_pybind11_abi_build_flags()]


class BuildNative(Command):
    description = "build the Go core, the C++ glue and hl-smi"
    user_options = [("force", "f", "rebuild the glue even if it looks fresh")]

    def initialize_options(self):
        self.force = False

    def finalize_options(self):
        pass

    def run(self):
        build_native(bool(self.force))


class BuildPy(build_py):
    def run(self):
        build_native()
        super().run()


setup(
    name="habana-torch-plugin",
    version=VERSION,
    description="hpusim: an emulation of Intel Gaudi's PyTorch bridge (habana_frameworks.torch) on any x86-64 Linux machine",
    package_dir={"": "python"},
    packages=find_namespace_packages(where="python", include=["habana_frameworks", "habana_frameworks.*",
                                                                  "hpusim_models", "hpusim_models.*",
                                                                  "habana_dataloader", "habana_dataloader.*"]),
    package_data={"habana_frameworks.torch": ["lib/*.so", "lib/hl-smi", "csrc/*.cpp"]},
    python_requires=">=3.10",
    install_requires=["torch"],
    entry_points={
        "torch.backends": ["device_backend = habana_frameworks.autoload:__autoload"],
        "console_scripts": ["hl-smi = habana_frameworks.hl_smi_launcher:main"],  # no torch import
    },
    cmdclass={"build_native": BuildNative, "build_py": BuildPy},
    zip_safe=False,
)
