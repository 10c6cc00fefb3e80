"""The host kernel launcher: JIT-compile an LLVM IR module and run a kernel over host memory.

Where it sits: `hlo-codegen`'s host lowering (hlo_codegen.llvm.host) writes kernels with the
signature `void @name(ptr %args, i64 %block_begin, i64 %block_end)`: `args` points to one `ptr`
per kernel parameter, in order, and the function runs the thread blocks whose linear ids are in
[block_begin, block_end). The codegen tests and `hlo-run --platform host` load such modules here;
llvmlite is imported lazily, on the first compile.

    kernel = load_host_kernel(llvm_ir_text, "loop_add_fusion")
    kernel([x, y, out], num_blocks=4)             # numpy arrays; out is written in place
    kernel([x, y, out], num_blocks=4, threads=1)  # on one thread
    kernel.launch([x_addr, y_addr, out_addr], num_blocks=4, nbytes=3 * 2048)   # raw addresses

Speed:
- Compiled modules are cached by the hash of (optimization level, text): the same IR gives the
  same compiled function again at no cost, within one process.
- The codegen's target-dependent helpers get this CPU's bodies before compiling
  (`specialize_for_cpu`): exp's scaling by 2^k is one `vscalefps` with AVX-512.
- `opt_level_for(nbytes)` picks the optimization level from the bytes a kernel's launch spans
  (its arguments; a better measure of work than the GPU thread count, since a reduction's
  threads loop over whole rows): small kernels JIT with no IR passes and LLVM's fast instruction
  selection (about 7x less compile time, at most a fraction of a millisecond more run time),
  the rest with LLVM's O2 (the loop vectorizer turns the host lowering's parallel thread loops
  into SIMD code). Results are the same at every level: the IR has no fast-math flags and no
  undefined behaviour an optimizer could exploit.
- A launch runs its blocks in ranges of about RANGE_SECONDS, so Ctrl-C, SIGTERM and SIGHUP stop
  it between two ranges, split over one host thread per `BYTES_PER_THREAD` of its arguments, at
  most `DEFAULT_THREADS` (every core this process may use; the caller and the others):
  waking 16 threads for a 0.3 ms kernel costs more than it saves. A kernel's ranges go to the
  native team (`hlo_run.host_team`: threads that never take the GIL, so a launch costs ~5 us
  instead of a Python thread's wake-up and GIL hand-off, 40-80 us), Python callables' to a pool
  of Python threads (`run_ranges`; ctypes releases the GIL during each native call, so their
  ranges run in parallel too). Blocks are independent on a GPU, so the split changes no result.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import numpy as np

from hlo_common.errors import HloError

_KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_CACHE_SIZE = 256
SMALL_BYTES = 1 << 16  # kernels whose launches' arguments span at most this compile at level 0
BYTES_PER_THREAD = 1 << 19  # argument bytes of a launch per host thread it is split over
CHUNKS_PER_THREAD = 4
RANGE_SECONDS = 0.05  # a kernel call's block range takes about this long (Ctrl-C is handled between)
MIN_RANGE_SECONDS = 25e-6  # and at least this long where it has the blocks (a range costs ~4 us of Python)


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


DEFAULT_THREADS = _usable_cores()

_lock = threading.Lock()
_cache: OrderedDict[str, object] = OrderedDict()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_pid = 0  # a forked child must not use its parent's pool (its threads did not survive the fork)


class HostKernelError(HloError):
    """An LLVM module that does not compile, or a kernel call with bad arguments."""


@functools.lru_cache(maxsize=None)
def _llvm():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def _new_target_machine(opt_level: int = 2):
    llvm = _llvm()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(), opt=opt_level,
                                        codemodel="jitdefault")


@functools.lru_cache(maxsize=None)
def _target_machine():
    return _new_target_machine()


@functools.lru_cache(maxsize=None)
def has_avx512() -> bool:
    """Whether this CPU has AVX-512 (the host BLAS's tile and `specialize_for_cpu` ask)."""
    return "+avx512f" in _llvm().get_host_cpu_features().flatten().split(",")


_LDEXP_DEFINE = "define internal float @__hlo_ldexp_f32("
_LDEXP_AVX512 = """define internal float @__hlo_ldexp_f32(float %p, i32 %k) alwaysinline {
entry:
  %r = call float @llvm.ldexp.f32.i32(float %p, i32 %k)
  ret float %r
}

declare float @llvm.ldexp.f32.i32(float, i32)"""


def specialize_for_cpu(llvm_ir: str, avx512: bool) -> str:
    """The kernel IR with the codegen's target-dependent helpers given this CPU's body, as XLA:CPU
    defines its vector math runtime functions for the JIT's target: with AVX-512,
    `__hlo_ldexp_f32` (exp's scaling by 2^k, hlo_codegen.llvm.math_exp_f32) becomes llvm.ldexp,
    one `vscalefps`, where its portable body (two multiplications) is kept elsewhere (llvm.ldexp is
    a libm call there). Both give the same bits on every input exp hands it."""
    start = llvm_ir.find(_LDEXP_DEFINE)
    if not avx512 or start < 0:
        return llvm_ir
    end = llvm_ir.index("\n}", start) + 2
    return llvm_ir[:start] + _LDEXP_AVX512 + llvm_ir[end:]


def opt_level_for(nbytes: int | None) -> int:
    """The optimization level for a kernel whose launches span `nbytes` (None: unknown)."""
    return 0 if nbytes is not None and nbytes <= SMALL_BYTES else 2


def threads_for(nbytes: int | None) -> int:
    """How many host threads run a launch spanning `nbytes` (None: unknown, all of them)."""
    if nbytes is None:
        return DEFAULT_THREADS
    return max(1, min(DEFAULT_THREADS, nbytes // BYTES_PER_THREAD))


class _Compiled:
    def __init__(self, engine, module, key: str):
        self.engine = engine
        self.module = module  # the engine owns it; kept so it is not collected early
        self.key = key  # the cache key: equal keys, equal machine code


def compile_host_module(llvm_ir: str, opt_level: int = 2, specialize: bool = True) -> _Compiled:
    """Parse, verify, optimize and JIT `llvm_ir` (cached by optimization level and text), its
    target-dependent helpers given this CPU's bodies (`specialize_for_cpu`) unless `specialize`
    is False (the tests compare the two)."""
    key = hashlib.sha256(f"{opt_level}\0{int(specialize)}\0{llvm_ir}".encode()).hexdigest()
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    llvm = _llvm()
    try:
        module = llvm.parse_assembly(specialize_for_cpu(llvm_ir, specialize and has_avx512()))
        module.verify()
    except RuntimeError as err:
        raise HostKernelError(f"invalid LLVM IR for the host: {str(err).strip()}") from None
    tm = _target_machine()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(module, pb)
    # An MCJIT engine owns (and frees) its target machine: never hand it the shared one.
    engine = llvm.create_mcjit_compiler(module, _new_target_machine(opt_level))
    engine.finalize_object()
    compiled = _Compiled(engine, module, key)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            # Another thread compiled the same module meanwhile and may be running it: replacing
            # its entry freed that code under it (a crash of two threads launching one kernel).
            _cache.move_to_end(key)
            return hit
        _cache[key] = compiled
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


def clear_cache() -> None:
    """Forget every compiled module (benchmarks use it to time compilation)."""
    with _lock:
        _cache.clear()


def _thread_pool(workers: int) -> ThreadPoolExecutor:
    """The shared pool that runs block ranges (grown when more threads are asked for)."""
    global _pool, _pool_size, _pool_pid
    with _lock:
        if _pool is None or _pool_size < workers or _pool_pid != os.getpid():
            if _pool is not None and _pool_pid == os.getpid():
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="host-kernel")
            _pool_size, _pool_pid = workers, os.getpid()
        return _pool


class HostKernel:
    """A compiled kernel: call it with its buffers (numpy arrays, in parameter order), or
    `launch` it with their addresses."""

    def __init__(self, compiled: _Compiled, name: str):
        address = compiled.engine.get_function_address(name)
        if not address:
            raise HostKernelError(f"kernel @{name} is not defined in the module")
        self._compiled = compiled
        self.name = name
        self.address = address

    def __call__(self, buffers: Sequence[np.ndarray], num_blocks: int, threads: int | None = None) -> None:
        for i, b in enumerate(buffers):
            if not isinstance(b, np.ndarray) or not b.flags.c_contiguous:
                raise HostKernelError(f"kernel @{self.name}: argument {i} must be a C-contiguous numpy array")
        self.launch([b.ctypes.data for b in buffers], num_blocks, threads, sum(b.nbytes for b in buffers))

    def launch(self, pointers: Sequence[int], num_blocks: int, threads: int | None = None,
               nbytes: int | None = None) -> None:
        """Run blocks [0, num_blocks) on buffers at these addresses, on `threads` (default:
        `threads_for(nbytes)`, nbytes being the bytes the arguments span; see `run_ranges`)."""
        args = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        threads = threads_for(nbytes) if threads is None else threads
        run_function(f"kernel @{self.name}", self.address, ctypes.addressof(args), num_blocks, threads)


class _Ranges:
    """Hands out contiguous block ranges of [0, total): the first of one block, to time it, then
    ranges that take about RANGE_SECONDS, at most 1 / (threads x CHUNKS_PER_THREAD) of the whole
    and 1 / (2 x threads) of what is left: ranges shrink towards the end, so the threads finish
    within about one block of each other (with ranges of an eighth of the whole, the last could
    leave the other thread idle for as long). A signal is handled between two ranges, so a kernel of
    many blocks stops within about RANGE_SECONDS of Ctrl-C, whatever its length."""

    def __init__(self, total: int, threads: int):
        self.total = total
        self.cap = max(1, -(-total // (threads * CHUNKS_PER_THREAD)))
        self.tail = 2 * threads  # a range takes at most 1/tail of the blocks left: the last are small
        self.next = 0
        self.per_block: float | None = None
        self.lock = threading.Lock()

    def take(self) -> tuple[int, int] | None:
        with self.lock:
            lo = self.next
            if lo >= self.total:
                return None
            size = 1 if self.per_block is None else max(1, int(MIN_RANGE_SECONDS / self.per_block),
                                                        min(self.cap, int(RANGE_SECONDS / self.per_block),
                                                            (self.total - lo) // self.tail))
            self.next = hi = min(self.total, lo + size)
            return lo, hi

    def timed(self, blocks: int, seconds: float) -> None:
        with self.lock:
            per = max(seconds, 1e-9) / blocks
            self.per_block = per if self.per_block is None else (self.per_block + per) / 2


def run_ranges(what: str, call: Callable[[int, int], None], total: int, threads: int) -> None:
    """call(lo, hi) over contiguous ranges covering [0, total), on up to `threads` threads (the
    shared pool and this one), each thread taking the next range (`_Ranges`) in turn, so that a
    thread the OS holds back on a busy machine delays the whole less. The ranges are independent
    (a kernel's blocks write disjoint outputs), so their split changes no result. An exception in
    any range (e.g. Ctrl-C in this thread, between two ranges) stops the handing out of ranges; the
    ranges already running finish, then it is raised here, `what` naming the failed call."""
    threads = max(1, min(threads, total))
    if total <= 0:
        return
    if threads > 1:
        from hlo_run.host_team import nap

        nap()  # the native team's threads, spinning since their last launch, give up the cores
    ranges = _Ranges(total, threads)
    failed: list[BaseException] = []

    def work_off() -> None:
        while not failed:
            taken = ranges.take()
            if taken is None:
                return
            start = time.perf_counter()
            try:
                call(*taken)
            except BaseException as exc:  # noqa: BLE001 - recorded, raised in the caller
                failed.append(exc)
                return
            ranges.timed(taken[1] - taken[0], time.perf_counter() - start)

    futures = [_thread_pool(threads - 1).submit(work_off) for _ in range(threads - 1)]
    try:
        work_off()  # this thread takes ranges too
    except BaseException as exc:  # noqa: BLE001 - Ctrl-C between two ranges: stop the others
        failed.append(exc)
    while futures:  # wait even when interrupted: the other threads write into the caller's buffers
        try:
            futures[-1].result()
            futures.pop()
        except BaseException as exc:  # noqa: BLE001 - Ctrl-C while waiting: stop, keep waiting
            failed.append(exc)
    if failed:
        exc = failed[0]
        if isinstance(exc, (KeyboardInterrupt, HloError)):
            raise exc
        raise HostKernelError(f"{what} failed in a block range: {type(exc).__name__}: {exc}") from exc


def run_function(what: str, address: int, ctx: int, total: int, threads: int) -> None:
    """The native function at `address` (`void fn(ptr ctx, i64 lo, i64 hi)`: a host kernel, a host
    BLAS job) over ranges covering [0, total) on `threads` threads: the native team
    (`hlo_run.host_team`), else Python threads calling it through ctypes (`run_ranges`, `what`
    naming the launch in its errors). The memory at `ctx` must outlive the call."""
    from hlo_run.host_team import run_native

    if not run_native(address, ctx, total, threads):
        fn = _KERNEL_TYPE(address)
        run_ranges(what, lambda lo, hi: fn(ctx, lo, hi), total, threads)


def load_host_kernel(llvm_ir: str, name: str, opt_level: int = 2) -> HostKernel:
    """The kernel `name` of the (cached) JIT-compiled module `llvm_ir`."""
    return HostKernel(compile_host_module(llvm_ir, opt_level), name)


def run_host_kernel(llvm_ir: str, name: str, buffers: Sequence[np.ndarray], num_blocks: int,
                    threads: int | None = None) -> None:
    """Compile (cached) and run kernel `name` over blocks [0, num_blocks)."""
    load_host_kernel(llvm_ir, name)(buffers, num_blocks, threads)
