"""One BLAS thread while the interpreter evaluates (a leaf: the only code that talks to the BLAS
library numpy was built with).

numpy's matmul calls OpenBLAS, which splits every product of more than a few thousand
multiply-adds over all cores. When the cores are busy (a CI runner, a shared machine) those
threads spin waiting for each other: a batch of sixteen [256,64] x [64,256] products took 0.25 s
of CPU instead of 2 ms. One thread also makes each dot's summation order independent of the
machine's core count, which is why the corpus tier runs XLA:CPU single-threaded too.

`single_threaded()` sets OpenBLAS to one thread for the duration of a `with` block and restores
the previous count. It finds OpenBLAS among the libraries the process has loaded (numpy's own
`scipy_openblas` build or a system `libopenblas`); with any other BLAS, or off Linux, it does
nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Iterator

# (get, set) symbol pairs: numpy's bundled scipy-openblas (64-bit ints), then a plain OpenBLAS.
_SYMBOLS = (
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
)
_controls: tuple | None = None
_looked = False
_lock = threading.Lock()
_depth = 0  # blocks inside single_threaded() now, on any thread
_before = 1  # the thread count the outermost block found


def _openblas_libraries() -> list[ctypes.CDLL]:
    """The OpenBLAS libraries this process has loaded (numpy's first)."""
    import numpy  # noqa: F401  (loads the BLAS library numpy links)

    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line})
    except OSError:
        return []
    libs = []
    for path in paths:
        try:
            libs.append(ctypes.CDLL(path))
        except OSError:
            continue
    return libs


def core_name() -> str:
    """The CPU kernel set OpenBLAS chose (e.g. "Haswell", "SkylakeX"; OPENBLAS_CORETYPE sets it when
    the library starts), or "" when numpy's BLAS is not OpenBLAS."""
    for lib in _openblas_libraries():
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                     "openblas_get_corename64_", "openblas_get_corename"):
            if hasattr(lib, name):
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = ctypes.c_char_p, []
                return fn().decode()
    return ""


def _find_controls() -> tuple | None:
    """(get, set) ctypes functions of the loaded OpenBLAS, or None."""
    for lib in _openblas_libraries():
        for get_name, set_name in _SYMBOLS:
            if hasattr(lib, get_name) and hasattr(lib, set_name):
                get, put = getattr(lib, get_name), getattr(lib, set_name)
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return get, put
    return None


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run the block with one OpenBLAS thread (a no-op when OpenBLAS cannot be found). The count is
    process-wide, so nested and concurrent blocks (the N-device runtime evaluates each device on its
    own thread) share one setting: the first to enter sets it, the last to leave restores it."""
    global _controls, _looked, _depth, _before
    with _lock:
        if not _looked:
            _controls, _looked = _find_controls(), True
        if _controls is None:
            entered = False
        else:
            entered = True
            if _depth == 0:
                _before = _controls[0]()
                if _before != 1:
                    _controls[1](1)
            _depth += 1
    try:
        yield
    finally:
        if entered:
            with _lock:
                _depth -= 1
                if _depth == 0 and _before != 1:
                    _controls[1](_before)
