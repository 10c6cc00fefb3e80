"""`hlo_run.host_team`: the native thread team that runs host kernels' and the host GEMM's block
ranges. Every block runs exactly once whatever the split, a busy team leaves a second caller to
`run_ranges`, Ctrl-C stops a long launch between ranges, and a launch after the team has gone to
sleep on its futex wakes it."""

from __future__ import annotations

import _thread
import functools
import threading
import time

import numpy as np
import pytest

from hlo_run import host_team
from hlo_run.host_kernel import compile_host_module

# k(ctx, lo, hi): marks[b] += 1 and who[b] = the thread (pthread_self) for each block b of the
# range, sleeping ctx[1] microseconds a block; ctx = [marks, microseconds, who]
_IR = """
declare i32 @usleep(i32)
declare i64 @pthread_self()
define void @k(ptr %ctx, i64 %lo, i64 %hi) {
entry:
  %marks = load ptr, ptr %ctx
  %sp = getelementptr i64, ptr %ctx, i64 1
  %us = load i64, ptr %sp
  %wp = getelementptr i64, ptr %ctx, i64 2
  %who = load ptr, ptr %wp
  %me = call i64 @pthread_self()
  %us32 = trunc i64 %us to i32
  %nap = icmp ne i64 %us, 0
  br label %b
b:
  %i = phi i64 [%lo, %entry], [%i1, %after]
  %q = getelementptr i64, ptr %marks, i64 %i
  %v = load i64, ptr %q
  %v1 = add i64 %v, 1
  store i64 %v1, ptr %q
  %wq = getelementptr i64, ptr %who, i64 %i
  store i64 %me, ptr %wq
  br i1 %nap, label %sleep, label %after
sleep:
  call i32 @usleep(i32 %us32)
  br label %after
after:
  %i1 = add i64 %i, 1
  %c = icmp slt i64 %i1, %hi
  br i1 %c, label %b, label %d
d:
  ret void
}
"""


@functools.lru_cache(maxsize=None)
def _compiled():
    return compile_host_module(_IR)  # held here: the JIT's cache may drop it while a launch runs


def _kernel() -> int:
    return _compiled().engine.get_function_address("k")


def _launch(total: int, threads: int, sleep_us: int = 0,
            who: np.ndarray | None = None) -> tuple[bool, np.ndarray]:
    marks = np.zeros(total, np.int64)
    who = np.zeros(total, np.int64) if who is None else who
    ctx = np.array([marks.ctypes.data, sleep_us, who.ctypes.data], np.int64)
    return host_team.run_native(_kernel(), ctx.ctypes.data, total, threads), marks


pytestmark = pytest.mark.skipif(host_team.team(1) is None, reason="no futex call known for this CPU")


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("total", [2, 3, 97, 10_000, 1_000_003])
def test_every_block_runs_once(total, threads):
    ran, marks = _launch(total, threads)
    assert ran and (marks == 1).all()


def test_one_thread_or_one_block_is_left_to_run_ranges():
    assert not _launch(5, 1)[0]
    assert not _launch(1, 2)[0]


def test_a_busy_team_leaves_the_launch_to_run_ranges():
    t = host_team.team(1)
    assert t.lock.acquire()
    try:
        ran, marks = _launch(100, 2)
        assert not ran and (marks == 0).all()
    finally:
        t.lock.release()


def test_launches_from_two_threads_at_once_each_run_every_block_once():
    """One takes the team, the other falls back (its caller then runs `run_ranges`): both whole."""
    results = []

    def launch():
        for _ in range(20):
            results.append(_launch(5000, 2, sleep_us=1))

    workers = [threading.Thread(target=launch) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert all((marks == 1).all() for ran, marks in results if ran)
    assert any(ran for ran, _ in results)


def test_ctrl_c_stops_a_long_launch_between_ranges():
    """4 s of blocks at 2 ms each; Ctrl-C after 0.3 s stops it within a budget and a range or two,
    every range that started finished (its blocks marked once, none twice)."""
    timer = threading.Timer(0.3, _thread.interrupt_main)
    marks, who = np.zeros(2000, np.int64), np.zeros(2000, np.int64)
    ctx = np.array([marks.ctypes.data, 2000, who.ctypes.data], np.int64)
    start = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            host_team.run_native(_kernel(), ctx.ctypes.data, 2000, 2)
    finally:
        timer.cancel()
    elapsed = time.perf_counter() - start
    assert elapsed < 0.3 + host_team.BUDGET_NS / 1e9 + 1.0
    assert 0 < marks.sum() < 2000 and marks.max() == 1
    ran, after = _launch(300, 2)  # the team is whole again
    assert ran and (after == 1).all()


def test_a_launch_wakes_a_team_that_went_to_sleep():
    """The team thread sleeps on its futex long after its last launch; the next launch wakes it and
    it runs ranges (2000 blocks of 0.1 ms: both threads take part)."""
    _launch(10, 2)
    time.sleep(0.05)  # far past the spin
    who = np.zeros(2000, np.int64)
    ran, marks = _launch(2000, 2, sleep_us=100, who=who)
    assert ran and (marks == 1).all()
    assert len(set(who.tolist())) == 2


def test_threads_compiling_one_module_at_once_get_the_same_code():
    """Two threads that miss the JIT's cache on the same module both compile it; the second to
    finish gets the first one's (which that thread may already be running), and the code of the
    first is not freed under it: replacing the cache entry did, and two threads launching one
    kernel crashed."""
    ir = _IR.replace("define void @k(", "define void @k_twice(")
    barrier, got = threading.Barrier(2), []

    def compile_it():
        barrier.wait()
        got.append(compile_host_module(ir))

    workers = [threading.Thread(target=compile_it) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert got[0] is got[1]
