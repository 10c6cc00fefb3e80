"""`hlo_run.host_kernel.run_ranges`: how a host kernel's blocks are handed to threads. Every block
runs once, and Ctrl-C stops a long kernel between two ranges instead of after the whole launch
(issue 22: a host kernel can be stopped)."""

from __future__ import annotations

import _thread
import threading
import time

import pytest

from hlo_run.host_kernel import RANGE_SECONDS, HostKernelError, run_ranges


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("total", [1, 7, 1000])
def test_every_block_runs_once(threads, total):
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def call(lo, hi):
        with lock:
            seen.append((lo, hi))

    run_ranges("test", call, total, threads)
    blocks = sorted(b for lo, hi in seen for b in range(lo, hi))
    assert blocks == list(range(total))
    assert all(hi > lo for lo, hi in seen)


@pytest.mark.parametrize("threads", [1, 2])
def test_ctrl_c_stops_a_long_launch_between_ranges(threads):
    """10 s of blocks at 2 ms each; Ctrl-C after 0.3 s stops it within a range or two."""
    done = []

    def call(lo, hi):
        time.sleep(0.002 * (hi - lo))
        done.append(hi - lo)

    timer = threading.Timer(0.3, _thread.interrupt_main)
    start = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_ranges("test", call, 5000, threads)
    finally:
        timer.cancel()
    elapsed = time.perf_counter() - start
    assert elapsed < 0.3 + 10 * RANGE_SECONDS + 1.0  # generous on a loaded machine; the whole is 10 s
    assert sum(done) < 5000
    assert max(done) * 0.002 <= 3 * RANGE_SECONDS  # no range much longer than the target


def test_a_failing_range_is_one_error_naming_the_launch():
    def call(lo, hi):
        if lo <= 500 < hi:
            raise ValueError("bad block")

    with pytest.raises(HostKernelError, match=r"kernel @k failed in a block range: ValueError: bad block"):
        run_ranges("kernel @k", call, 1000, 2)


@pytest.mark.parametrize("total", [22, 8192])
def test_ranges_shrink_towards_the_end(total):
    """A GEMM of 22 row chunks, a loop kernel of 8192 blocks, each block 0.1 ms: once timed, no
    range takes more than 1 / (2 x threads) of the blocks left, so the last ranges are single
    blocks and the threads finish within about one block of each other (ranges of an eighth of
    the whole could leave one thread idle for an eighth of the kernel)."""
    from hlo_run.host_kernel import _Ranges

    ranges = _Ranges(total, 2)
    ranges.timed(1, 1e-4)  # blocks far shorter than RANGE_SECONDS: the caps decide
    taken = []
    while (r := ranges.take()) is not None:
        taken.append(r)
    assert [b for lo, hi in taken for b in range(lo, hi)] == list(range(total))
    for lo, hi in taken:
        assert hi - lo <= max(1, (total - lo) // 4)
    assert taken[-1][1] - taken[-1][0] == 1 and taken[-2][1] - taken[-2][0] == 1


def test_short_blocks_go_in_ranges_of_at_least_min_range_seconds():
    """Blocks of 1 us (a loop kernel of 8192 of them, 8 ms): the tail stops shrinking at about
    MIN_RANGE_SECONDS of blocks, as a range costs the launch ~4 us of Python."""
    from hlo_run.host_kernel import MIN_RANGE_SECONDS, _Ranges

    ranges = _Ranges(8192, 2)
    ranges.timed(1, 1e-6)
    floor = int(MIN_RANGE_SECONDS / 1e-6)
    taken = []
    while (r := ranges.take()) is not None:
        taken.append(r)
    assert [b for lo, hi in taken for b in range(lo, hi)] == list(range(8192))
    sizes = [hi - lo for lo, hi in taken]
    assert min(sizes[:-1]) >= floor  # only the very last may be cut short by the end
    assert len(taken) <= 24  # 34 without the floor
    for lo, hi in taken:
        assert hi - lo <= max(floor, (8192 - lo) // 4)
