"""Freed memory kept for reuse by the next run (the interpreter's allocator setting, glibc only).

The interpreter allocates every large value afresh (numpy arrays, one per instruction or
elementwise region output) and frees it after its last use. With glibc's default settings an
array of a few MiB is an mmap of its own, unmapped when freed, so every run of a module takes a
page fault per 4 KiB page of every large array it writes (about 3 ms of a 13 ms bf16 softmax of
4M elements: `bench/bench_interpreter.py`). XLA's runtime keeps its buffers in an allocator that
reuses them; here glibc's heap is told to do the same: arrays up to `MMAP_THRESHOLD` come from
the heap, and up to `TRIM_THRESHOLD` bytes freed at its top stay mapped for the next run.
Larger arrays are still mapped and unmapped one by one. Other C libraries (no `mallopt`) keep
their defaults.
"""

from __future__ import annotations

import ctypes
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h parameter numbers
MMAP_THRESHOLD = 32 << 20  # the largest glibc accepts (HEAP_MAX_SIZE / 2 on 64-bit hosts)
TRIM_THRESHOLD = 256 << 20
_set = False


def keep_freed_memory() -> None:
    """Set glibc's mmap and trim thresholds once per process (nothing elsewhere)."""
    global _set
    if _set:
        return
    _set = True
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
