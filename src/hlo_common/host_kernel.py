"""The host kernel launcher: JIT-compile an LLVM IR module and run a kernel over numpy buffers.

Where it sits: `hlo-codegen`'s host lowering (hlo_codegen.llvm.host) writes kernels with the
signature `void @name(ptr %args, i64 %block_begin, i64 %block_end)`: `args` points to one `ptr`
per kernel parameter, in order, and the function runs the thread blocks whose linear ids are in
[block_begin, block_end). The codegen tests and `hlo-run --platform host` load such modules here;
llvmlite is imported lazily, on the first compile.

    kernel = load_host_kernel(llvm_ir_text, "loop_add_fusion")
    kernel([x, y, out], num_blocks=4)            # out is written in place
    kernel([x, y, out], num_blocks=4, threads=2)  # blocks split across 2 threads

Compiled modules are cached by the hash of their text, so running the same kernel again costs
nothing; ctypes releases the GIL during a call, so block ranges really run in parallel.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from hlo_common.errors import HloError

_KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_CACHE_SIZE = 128
_lock = threading.Lock()
_cache: OrderedDict[str, object] = OrderedDict()


class HostKernelError(HloError):
    """An LLVM module that does not compile, or a kernel call with bad arguments."""


@functools.lru_cache(maxsize=None)
def _llvm():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def _new_target_machine():
    llvm = _llvm()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(), opt=2,
                                        codemodel="jitdefault")


@functools.lru_cache(maxsize=None)
def _target_machine():
    return _new_target_machine()


class _Compiled:
    def __init__(self, engine, module):
        self.engine = engine
        self.module = module  # the engine owns it; kept so it is not collected early
        self.functions: dict[str, object] = {}


def compile_host_module(llvm_ir: str, opt_level: int = 2) -> _Compiled:
    """Parse, verify, optimize and JIT `llvm_ir` (cached by text)."""
    key = hashlib.sha256(f"{opt_level}\0{llvm_ir}".encode()).hexdigest()
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    llvm = _llvm()
    try:
        module = llvm.parse_assembly(llvm_ir)
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
    engine = llvm.create_mcjit_compiler(module, _new_target_machine())
    engine.finalize_object()
    compiled = _Compiled(engine, module)
    with _lock:
        _cache[key] = compiled
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


class HostKernel:
    """A compiled kernel: call it with the kernel's buffers (numpy arrays, in parameter order)."""

    def __init__(self, compiled: _Compiled, name: str):
        address = compiled.engine.get_function_address(name)
        if not address:
            raise HostKernelError(f"kernel @{name} is not defined in the module")
        self._compiled = compiled
        self.name = name
        self._fn = _KERNEL_TYPE(address)

    def __call__(self, buffers: Sequence[np.ndarray], num_blocks: int, threads: int = 1) -> None:
        for i, b in enumerate(buffers):
            if not isinstance(b, np.ndarray) or not b.flags.c_contiguous:
                raise HostKernelError(f"kernel @{self.name}: argument {i} must be a C-contiguous numpy array")
        args = (ctypes.c_void_p * max(1, len(buffers)))(*[b.ctypes.data for b in buffers])
        if threads <= 1 or num_blocks < 2:
            self._fn(args, 0, num_blocks)
            return
        threads = min(threads, num_blocks)
        bounds = [num_blocks * k // threads for k in range(threads + 1)]
        with ThreadPoolExecutor(threads) as pool:
            for f in [pool.submit(self._fn, args, lo, hi) for lo, hi in zip(bounds, bounds[1:])]:
                f.result()


def load_host_kernel(llvm_ir: str, name: str, opt_level: int = 2) -> HostKernel:
    """The kernel `name` of the (cached) JIT-compiled module `llvm_ir`."""
    return HostKernel(compile_host_module(llvm_ir, opt_level), name)


def run_host_kernel(llvm_ir: str, name: str, buffers: Sequence[np.ndarray], num_blocks: int,
                    threads: int = 1) -> None:
    """Compile (cached) and run kernel `name` over blocks [0, num_blocks)."""
    load_host_kernel(llvm_ir, name)(buffers, num_blocks, threads)
