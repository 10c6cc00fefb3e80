"""Independent blocks of one large operation spread over the cores (the interpreter's thread pool).

XLA:CPU runs a large op on every core; the interpreter does the same for the work that splits
into independent blocks without changing a single value: the slabs of an elementwise region
(`regions.py`), the rows of a reduction (`reduction.py`), and the row blocks of a dot or a
convolution (`numeric.py`, `convolution.py`). numpy releases the GIL inside its loops and BLAS
calls, so threads run them side by side. Every block is computed exactly as it would be alone,
and where the blocks are is decided by the shapes only, never by the number of threads, so the
result is the same bit for bit on any machine and with any thread count (one thread: in order, in
the calling thread).

`HLO_INTERPRETER_THREADS=N` sets the thread count (default: the cores this process may run on, at
most `MAX_THREADS`). Blocks are handed out one at a time (the calling thread works too), so a busy
core slows the run down less than a fixed split would. Errors stop the remaining blocks and the
first one raised is raised again in the caller. A block that itself splits (a region evaluated
inside a worker) runs its parts in order.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

import numpy as np

ENV_THREADS = "HLO_INTERPRETER_THREADS"
MAX_THREADS = 8
T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_pid = 0  # a forked child must not use its parent's pool (its threads did not survive the fork)
_pool_lock = threading.Lock()
_local = threading.local()


def thread_count() -> int:
    """Threads a split operation uses (the environment variable, else the usable cores)."""
    value = os.environ.get(ENV_THREADS, "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_THREADS))


def _workers(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size, _pool_pid, _pool_lock
    if _pool_pid != os.getpid():
        _pool, _pool_size, _pool_pid, _pool_lock = None, 0, os.getpid(), threading.Lock()
    with _pool_lock:
        if _pool is None or _pool_size < n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(n, thread_name_prefix="hlo-interpreter")
            _pool_size = n
        return _pool


def for_each(fn: Callable[[T], None], items: Iterable[T]) -> None:
    """Call `fn(item)` for every item, on up to `thread_count()` threads; returns when all are done."""
    items = list(items)
    threads = min(thread_count(), len(items))
    if threads <= 1 or getattr(_local, "busy", False):
        for item in items:
            fn(item)
        return
    work = iter(items)  # next() on a list iterator is atomic under the GIL
    errors: list[BaseException] = []

    def worker() -> None:
        _local.busy = True
        try:
            with np.errstate(all="ignore"):  # the evaluator's rule, in every thread
                for item in work:
                    if errors:
                        return
                    fn(item)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            errors.append(exc)
        finally:
            _local.busy = False

    futures = [_workers(threads - 1).submit(worker) for _ in range(threads - 1)]
    worker()
    for f in futures:
        f.result()
    if errors:
        raise errors[0]
