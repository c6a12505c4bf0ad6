"""The package's PEP 517 build backend: maturin's, pointed at the installing environment's torch.

basin's extension links the libtorch inside the ``torch`` package it will run beside, so the
build must find that ``torch`` (2.11.0) in the environment ``pip`` installs into. Under pip's
build isolation the build's own ``sys.path`` hides it; the environment's interpreter, started
without pip's isolating variables, still sees it. Everything else is maturin's.

What the build needs, each named in a clear error when missing: torch 2.11.0 in the
environment, a Rust toolchain (``cargo``, 1.95 or newer), a C++ compiler (``c++``, or ``CXX``)
and the Python headers (``Python.h``: Debian's ``python3-dev``).
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import maturin
from maturin import (  # noqa: F401  (the hooks this backend leaves to maturin)
    build_sdist,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_wheel,
)

TORCH_VERSION = "2.11.0"

#: Variables by which pip's build isolation hides the environment's own packages.
_ISOLATION = ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH")

_PROBE = (
    "import os, torch; print(torch.__version__); print(os.path.dirname(torch.__file__)); "
    "print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
)


class BuildError(RuntimeError):
    """A build requirement is missing; the message says which and how to get it."""


def _environment_torch():
    """(version, directory, cxx11 abi) of the torch the installing environment imports."""
    env = {k: v for k, v in os.environ.items() if k not in _ISOLATION}
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise BuildError(
            f"basin builds against the torch of the environment it installs into, and "
            f"{sys.executable} cannot import torch. Install it first: "
            f"`python -m pip install torch=={TORCH_VERSION}`, then install basin again "
            f"(with uv, or a frontend whose isolated build runs another interpreter: add "
            f"--no-build-isolation).\n{done.stderr.strip()[-600:]}")
    version, folder, abi = done.stdout.split()[-3:]
    if not version.startswith(TORCH_VERSION):
        raise BuildError(
            f"basin links libtorch {TORCH_VERSION} (the tch crate it is built on pins it); the "
            f"environment has torch {version}. Install torch=={TORCH_VERSION} beside it.")
    return version, folder, abi


def _require_tools():
    """Puts rustup's cargo on PATH where it is installed but not found; names what is missing."""
    cargo_home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    if shutil.which("cargo") is None and os.path.exists(os.path.join(cargo_home, "bin", "cargo")):
        os.environ["PATH"] = os.path.join(cargo_home, "bin") + os.pathsep + os.environ["PATH"]
    if shutil.which("cargo") is None:
        raise BuildError("building basin needs a Rust toolchain (cargo 1.95 or newer): "
                         "https://rustup.rs, then install basin again")
    compiler = os.environ.get("CXX", "c++").split()[0]
    if shutil.which(compiler) is None:
        raise BuildError(f"building basin needs a C++ compiler ({compiler!r} not found; set CXX "
                         "or install one, e.g. Debian's build-essential)")
    headers = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(headers, "Python.h")):
        raise BuildError(f"building basin needs the Python headers ({headers}/Python.h not "
                         f"found; e.g. Debian's python3-dev)")


def _point_at_torch():
    """Sets the variables that make the tch crate's build link the environment's libtorch."""
    _require_tools()
    _, folder, abi = _environment_torch()
    os.environ["LIBTORCH"] = folder  # the torch package holds libtorch's include/ and lib/
    os.environ["LIBTORCH_CXX11_ABI"] = abi
    os.environ.pop("LIBTORCH_USE_PYTORCH", None)
    # The tch build asks `python3` for the Python headers: this interpreter, whatever PATH holds.
    shims = tempfile.mkdtemp(prefix="basin-build-")
    for name in ("python", "python3"):
        os.symlink(sys.executable, os.path.join(shims, name))
    os.environ["PATH"] = shims + os.pathsep + os.environ["PATH"]


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds the wheel against the environment's torch (maturin's hook, prepared)."""
    _point_at_torch()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """An editable install against the environment's torch (maturin's hook, prepared)."""
    _point_at_torch()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
