"""A native thread team for host launches: the blocks of a JIT-compiled function handed out to
threads that never take Python's GIL.

Where it sits: `host_kernel.HostKernel.launch` and the host BLAS's jobs (`host_blas`: the GEMM's
units, B's packing, the convolution's rows) run their block ranges here when the function is
native (`fn(ctx, lo, hi)`, as every host kernel is);
`host_kernel.run_ranges` stays for Python callables. With Python threads each launch cost the
second thread's wake-up and a GIL hand-off before it ran anything (40-80 us on the bench machine,
while the caller ran ranges alone), and each range a few microseconds of Python: the transformer
layer lost 1.2 ms of its 12 to its 22 launches. Here the caller publishes a job in shared memory;
team threads, each parked in one ctypes call (`@team_worker`, GIL released) for the life of the
process, spin for about a millisecond after their last job (a module's next launch comes a few
tens of microseconds later) and then sleep on a futex, which the next job wakes.

A job is one launch: `fn`, `ctx`, `total` blocks; threads take ranges with a compare-and-swap on
`next`, each range at most 1 / (2 x threads) of the blocks left and within [min_chunk, max_chunk]
blocks (the caller times its first block, then sets both from RANGE_SECONDS and
MIN_RANGE_SECONDS as `run_ranges` does). The caller runs ranges too, returning to Python every
BUDGET_NS so that Ctrl-C stops a long launch between ranges (`stop`); it then waits until no range
is running. Blocks are independent (a kernel's blocks write disjoint outputs), so the split changes
no result. One job at a time: a launch from a second Python thread while the team is busy, a CPU
this module does not know the futex call of, or a forked child falls back to `run_ranges`.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time

import numpy as np

# job slots (i64): the function, its context, blocks, the next block, ranges running, chunk bounds,
# stop, quit, threads taking part, the futex word (generation, low 32 bits), sleepers, nap (sleep
# now: Python threads want the cores, `nap`)
FN, CTX, TOTAL, NEXT, RUNNING, MIN_CHUNK, MAX_CHUNK, STOP, QUIT, THREADS, GEN, SLEEPERS, NAP = range(13)
SLOTS = 16
CLOSED = 1 << 62  # `next` between jobs: a thread still looking for ranges finds none
SPINS = 20000  # pause instructions a team thread spins through before it sleeps (about 1 ms)
BUDGET_NS = 20_000_000  # the caller's time in native code between two looks at Ctrl-C
_FUTEX = {"x86_64": 202, "aarch64": 98}  # SYS_futex
_FUTEX_WAIT, _FUTEX_WAKE = 128, 129  # the private forms

_I64 = ctypes.c_int64
_P = ctypes.c_void_p


def _slot(i: int) -> str:
    return f"  %s{i} = getelementptr i64, ptr %job, i64 {i}"


def team_module(arch: str, spins: int = SPINS) -> str:
    """The team's LLVM IR for `arch` (its futex system call number and spin hint); team threads spin
    through `spins` pauses before they sleep."""
    sys_futex = _FUTEX[arch]
    x86 = arch == "x86_64"
    pause = "  call void @llvm.x86.sse2.pause()" if x86 else "  call void @llvm.aarch64.hint(i32 1)"
    decl = "declare void @llvm.x86.sse2.pause()" if x86 else "declare void @llvm.aarch64.hint(i32)"
    slots = [_slot(i) for i in range(SLOTS)]
    return "\n".join([
        decl, "declare i64 @syscall(i64, ...)", "declare i32 @clock_gettime(i32, ptr)",
        *_grab(slots), *_worker(slots, sys_futex, pause, spins), *_begin(slots, sys_futex), *_help(slots),
        *_idle(slots, pause), ""])


def _grab(slots: list[str]) -> list[str]:
    """`i1 @grab(job)`: take and run one range; false when none is left (or the job stopped)."""
    return [
        "define internal i1 @grab(ptr %job) {", "entry:", *slots, "  br label %try",
        "try:",
        "  atomicrmw add ptr %s4, i64 1 seq_cst",  # running, before looking (see `_idle`)
        "  %stop = load atomic i64, ptr %s7 acquire, align 8", "  %stopped = icmp ne i64 %stop, 0",
        "  %lo = load atomic i64, ptr %s3 acquire, align 8",
        "  %total = load atomic i64, ptr %s2 acquire, align 8",
        "  %left = sub i64 %total, %lo", "  %none = icmp sle i64 %left, 0", "  %out = or i1 %stopped, %none",
        "  br i1 %out, label %leave, label %size",
        "size:",
        "  %thr = load atomic i64, ptr %s9 acquire, align 8", "  %thr2 = shl i64 %thr, 1",
        "  %guided = udiv i64 %left, %thr2",
        "  %mn = load atomic i64, ptr %s5 acquire, align 8",
        "  %mx = load atomic i64, ptr %s6 acquire, align 8",
        "  %lt = icmp ult i64 %guided, %mn", "  %c1 = select i1 %lt, i64 %mn, i64 %guided",
        "  %gt = icmp ugt i64 %c1, %mx", "  %c2 = select i1 %gt, i64 %mx, i64 %c1",
        "  %big = icmp ugt i64 %c2, %left", "  %c3 = select i1 %big, i64 %left, i64 %c2",
        "  %pos = icmp ult i64 %c3, 1", "  %c = select i1 %pos, i64 1, i64 %c3",
        "  %hi = add i64 %lo, %c",
        "  %cas = cmpxchg ptr %s3, i64 %lo, i64 %hi seq_cst seq_cst",
        "  %won = extractvalue { i64, i1 } %cas, 1",
        "  br i1 %won, label %run, label %retry",
        "retry:", "  atomicrmw sub ptr %s4, i64 1 seq_cst", "  br label %try",
        "run:",
        "  %fnb = load i64, ptr %s0", "  %fn = inttoptr i64 %fnb to ptr",
        "  %ctxb = load i64, ptr %s1", "  %ctx = inttoptr i64 %ctxb to ptr",
        "  call void %fn(ptr %ctx, i64 %lo, i64 %hi)",
        "  atomicrmw sub ptr %s4, i64 1 seq_cst", "  ret i1 true",
        "leave:", "  atomicrmw sub ptr %s4, i64 1 seq_cst", "  ret i1 false", "}",
    ]


def _worker(slots: list[str], sys_futex: int, pause: str, spins: int) -> list[str]:
    """`@team_worker(job, index)`: a team thread's life: wait for a new generation (spinning, then
    on the futex), take part in the job when `index` < threads - 1, until `quit`."""
    return [
        "define void @team_worker(ptr %job, i64 %index) {", "entry:", *slots,
        "  %g0 = load atomic i32, ptr %s10 acquire, align 8", "  br label %wait",
        "wait:",
        "  %seen = phi i32 [%g0, %entry], [%seen, %spin], [%seen, %slept], [%g, %done]",
        "  %n = phi i64 [0, %entry], [%n1, %spin], [0, %slept], [0, %done]",
        "  %q = load atomic i64, ptr %s8 acquire, align 8", "  %quit = icmp ne i64 %q, 0",
        "  br i1 %quit, label %exit, label %look",
        "look:",
        "  %g = load atomic i32, ptr %s10 acquire, align 8", "  %new = icmp ne i32 %g, %seen",
        "  br i1 %new, label %job_, label %idle",
        "job_:",
        "  %thr = load atomic i64, ptr %s9 acquire, align 8", "  %me = add i64 %index, 1",
        "  %takes = icmp slt i64 %me, %thr", "  br i1 %takes, label %work, label %done",
        "work:", "  %more = call i1 @grab(ptr %job)", "  br i1 %more, label %work, label %done",
        "done:", "  br label %wait",
        "idle:", f"  %long = icmp sge i64 %n, {spins}", "  %nap = load atomic i64, ptr %s12 acquire, align 8",
        "  %napping = icmp ne i64 %nap, 0", "  %rest = or i1 %long, %napping",
        "  br i1 %rest, label %sleep, label %spin",
        "spin:", pause, "  %n1 = add i64 %n, 1", "  br label %wait",
        "sleep:",
        "  atomicrmw add ptr %s11, i64 1 seq_cst", "  %seen64 = zext i32 %seen to i64",
        f"  call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %s10, i64 {_FUTEX_WAIT}, i64 %seen64, "
        "ptr null)",
        "  atomicrmw sub ptr %s11, i64 1 seq_cst", "  br label %slept",
        "slept:", "  br label %wait",
        "exit:", "  ret void", "}",
    ]


def _begin(slots: list[str], sys_futex: int) -> list[str]:
    """`@team_begin(job)`: publish the job the caller filled in (`next` from CLOSED to 0, a new
    generation) and wake the sleepers; `@team_quit(job)`: end every team thread."""
    wake = f"  call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %s10, i64 {_FUTEX_WAKE}, i64 2147483647)"
    return [
        "define void @team_begin(ptr %job) {", "entry:", *slots,
        "  store atomic i64 0, ptr %s3 release, align 8",  # the fields written before are seen with it
        "  atomicrmw add ptr %s10, i32 1 seq_cst",
        "  %sl = load atomic i64, ptr %s11 acquire, align 8", "  %any = icmp ne i64 %sl, 0",
        "  br i1 %any, label %wake, label %out", "wake:", wake, "  br label %out", "out:", "  ret void", "}",
        "define void @team_quit(ptr %job) {", "entry:", *slots,
        "  store atomic i64 1, ptr %s8 release, align 8", "  atomicrmw add ptr %s10, i32 1 seq_cst", wake,
        "  ret void", "}",
    ]


def _help(slots: list[str]) -> list[str]:
    """`i64 @team_help(job, budget_ns)`: the caller's share: ranges until none is left or the budget
    is spent; the ranges it ran (0: none was left)."""
    return [
        "define i64 @team_help(ptr %job, i64 %budget) {", "entry:", *slots,
        "  %ts = alloca [2 x i64], align 8", "  %t0 = call i64 @now(ptr %ts)", "  br label %loop",
        "loop:", "  %k = phi i64 [0, %entry], [%k1, %more]",
        "  %ran = call i1 @grab(ptr %job)", "  br i1 %ran, label %more, label %out",
        "more:", "  %k1 = add i64 %k, 1", "  %t = call i64 @now(ptr %ts)", "  %dt = sub i64 %t, %t0",
        "  %spent = icmp sge i64 %dt, %budget", "  br i1 %spent, label %out2, label %loop",
        "out2:", "  ret i64 %k1", "out:", "  ret i64 %k", "}",
        "define internal i64 @now(ptr %ts) {", "entry:",
        "  call i32 @clock_gettime(i32 1, ptr %ts)", "  %s = load i64, ptr %ts",
        "  %np = getelementptr i64, ptr %ts, i64 1", "  %ns = load i64, ptr %np",
        "  %sn = mul i64 %s, 1000000000", "  %t = add i64 %sn, %ns", "  ret i64 %t", "}",
    ]


def _idle(slots: list[str], pause: str) -> list[str]:
    """`@team_wait(job)`: spin until no range is running. Every thread counts itself in `running`
    before it looks at `next`, so once `next` has passed the end (or `stop` is set) and `running` is
    0, no range of the job is left to start."""
    return [
        "define void @team_wait(ptr %job) {", "entry:", *slots, "  br label %loop",
        "loop:", "  %r = load atomic i64, ptr %s4 acquire, align 8", "  %busy = icmp ne i64 %r, 0",
        "  br i1 %busy, label %spin, label %out", "spin:", pause, "  br label %loop",
        "out:", "  ret void", "}",
    ]


class _Team:
    """The process's team: a job buffer, its compiled functions and `workers` threads."""

    def __init__(self, workers: int):
        from hlo_run.host_kernel import compile_host_module

        from hlo_run.mpi_launch import under_mpi

        # one MPI rank of several shares the cores with the others: its team sleeps right away
        compiled = compile_host_module(team_module(os.uname().machine, 0 if under_mpi() else SPINS), 2)
        address = compiled.engine.get_function_address
        self.compiled = compiled
        self.begin = ctypes.CFUNCTYPE(None, _P)(address("team_begin"))
        self.help = ctypes.CFUNCTYPE(_I64, _P, _I64)(address("team_help"))
        self.wait = ctypes.CFUNCTYPE(None, _P)(address("team_wait"))
        self.quit = ctypes.CFUNCTYPE(None, _P)(address("team_quit"))
        worker = ctypes.CFUNCTYPE(None, _P, _I64)(address("team_worker"))
        self.job = np.zeros(SLOTS, np.int64)
        self.job[NEXT] = CLOSED
        self.address = self.job.ctypes.data
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.workers = workers
        self.threads = [threading.Thread(target=worker, args=(self.address, i), daemon=True,
                                         name=f"host-team-{i}") for i in range(workers)]
        for t in self.threads:
            t.start()
        atexit.register(lambda: os.getpid() == self.pid and self.close())  # not in a forked child

    def close(self) -> None:
        self.quit(self.address)
        for t in self.threads:
            t.join(timeout=1.0)


_team: _Team | None = None
_team_lock = threading.Lock()


def team(workers: int) -> _Team | None:
    """The process's team with at least `workers` threads (started on first use with one thread per
    core but the caller's, so that it is not replaced while a launch from another Python thread
    uses it), or None where it cannot run (a CPU without a known futex call; a bigger team wanted
    while this one is busy). A forked child gets its own."""
    from hlo_run.host_kernel import DEFAULT_THREADS

    global _team
    if os.uname().machine not in _FUTEX or workers < 1:
        return None
    with _team_lock:
        if _team is None or _team.pid != os.getpid():
            _team = _Team(max(workers, DEFAULT_THREADS - 1))
        elif _team.workers < workers:
            if not _team.lock.acquire(blocking=False):
                return None
            _team.close()
            _team = _Team(workers)
        return _team


def nap() -> None:
    """Let the team's spinning threads sleep now: Python threads are about to run ranges
    (`host_kernel.run_ranges`), and a spinning team thread would take one of their cores."""
    t = _team
    if t is not None:
        t.job[NAP] = 1


def run_native(fn: int, ctx: int, total: int, threads: int) -> bool:
    """Run fn(ctx, lo, hi) over ranges covering [0, total) on `threads` threads (the caller and
    threads - 1 of the team); False when the team cannot take it (`host_kernel.run_function` then
    runs it through `run_ranges`). Ctrl-C stops the launch between ranges and is raised here."""
    from hlo_run.host_kernel import MIN_RANGE_SECONDS, RANGE_SECONDS

    threads = max(1, min(threads, total))
    t = team(threads - 1) if threads > 1 else None
    if t is None or not t.lock.acquire(blocking=False):
        return False
    job, address = t.job, t.address
    try:
        job[FN], job[CTX], job[STOP], job[THREADS], job[NAP] = fn, ctx, 0, threads, 0
        job[MIN_CHUNK], job[MAX_CHUNK], job[TOTAL] = 1, 1, total
        t.begin(address)  # the team takes single blocks until the caller has timed one
        try:
            start = time.perf_counter()
            if t.help(address, 0):
                per_block = max(time.perf_counter() - start, 1e-9)
                job[MIN_CHUNK] = max(1, int(MIN_RANGE_SECONDS / per_block))
                job[MAX_CHUNK] = max(1, int(RANGE_SECONDS / per_block))
            while t.help(address, BUDGET_NS):
                pass
        except BaseException:
            job[STOP] = 1
            raise
        finally:
            t.wait(address)
            job[NEXT] = CLOSED
    finally:
        t.lock.release()
    return True
