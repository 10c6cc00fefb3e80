"""Finding and linking NVIDIA's libdevice (the CUDA math library as LLVM bitcode).

Where it sits: nvptx.py calls `__nv_<fn>f` / `__nv_<fn>` for math ops when `find_libdevice()`
finds `libdevice.10.bc`; ptx.py links it into the module before generating PTX. Without it the
NVPTX lowering falls back to math.py (our own approximations, the host's functions), so a
machine without the CUDA toolkit still produces correct PTX.

Search order: `$HLO_LIBDEVICE` (a file), `$CUDA_HOME` / `$CUDA_PATH` (`nvvm/libdevice/`),
`/usr/local/cuda*/nvvm/libdevice/` (newest first), then the pip packages
`nvidia-cuda-nvcc` / `nvidia-cuda-nvvm` (`site-packages/nvidia/cuda_nvcc/nvvm/libdevice/`).
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
from pathlib import Path

# Kernel-IR math op -> libdevice base name (float versions add an `f`).
LIBDEVICE_FUNCTIONS = {
    "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "tanh": "tanh", "sin": "sin",
    "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh", "asin": "asin", "acos": "acos",
    "atan": "atan", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "erf": "erf", "cbrt": "cbrt",
    "powf": "pow", "atan2": "atan2", "remf": "fmod",
}
_NAME = "libdevice.10.bc"


def _candidates() -> list[Path]:
    out: list[Path] = []
    env = os.environ.get("HLO_LIBDEVICE")
    if env:
        out.append(Path(env))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            out.append(Path(root) / "nvvm" / "libdevice" / _NAME)
    roots = sorted(glob.glob("/usr/local/cuda*"), reverse=True)
    out.extend(Path(r) / "nvvm" / "libdevice" / _NAME for r in roots)
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        for pkg in ("cuda_nvcc", "cuda_nvvm", "cu13", "cu12"):
            out.extend(Path(p) for p in glob.glob(str(Path(base) / pkg / "**" / _NAME), recursive=True))
    return out


@functools.lru_cache(maxsize=None)
def find_libdevice() -> Path | None:
    """The libdevice bitcode file, or None when this machine has none."""
    for path in _candidates():
        if path.is_file():
            return path
    return None


@functools.lru_cache(maxsize=4)
def read_libdevice(path: str) -> bytes:
    return Path(path).read_bytes()
