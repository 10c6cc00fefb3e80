"""The kernel backend of hlo-codegen: a fusion -> emitted, lowered, checked kernels.

Where it sits: between the thunk emitter (which decides that a fusion needs kernels and which
buffer slices they take) and the emitters / lowerings (`hlo_codegen.emitters`,
`hlo_codegen.llvm`, `hlo_codegen.ptx`). For each fusion it asks the emitter chosen for it for a
kernel-IR `Kernel`, passing one argument id (the buffer slice) per operand and output so that
arguments in the same slice become one parameter; it then lowers the kernel for the target:

    cuda   lower_to_nvptx -> compile_to_ptx(arch) -> validate_ptx(arch)   (nvJitLink at -O0)
    host   lower_to_host: `void @name(ptr %args, i64 %block_begin, i64 %block_end)`

and returns `CompiledKernel`s for the manifest with the dump artifacts (`kernel_ir.txt`, `ll`,
`ptx`). Every failure is a KernelEmissionError naming the kernel and the fusion.

With `jobs` > 1 (what hlo-codegen runs with: one per CPU), the native half of a cuda kernel (LLVM's
PTX generation and nvJitLink, which release the GIL) runs on a pool of threads while the next
fusions are emitted, as XLA compiles kernels in parallel; `compile` then hands back kernels
whose PTX is filled in by `finish`, which `compile_module` calls before it writes the manifest
and before it reports any other error. nvJitLink checks the PTX of `_BATCH` kernels in one link
(`ptx.validate_ptx_batch`: a link has a fixed cost of about 3 ms, a third of a small kernel's
check): a pool thread that finishes a kernel's PTX checks the batch it completes, or what is
ready when no PTX task waits, and `finish` the rest, split over the pool. The PTX is the same either way, and so is the error: the first
failing kernel in module order.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from hlo_common.errors import HloError
from hlo_common.gpu.device import H100, DeviceDescription, device_for_arch
from hlo_common.hlo.ir import HloInstruction
from hlo_common.manifest.manifest import ManifestKernel

from hlo_codegen.thunk_emitter import CompiledKernel, KernelArgumentSpec, KernelNamer


class KernelEmissionError(HloError):
    """A kernel that could not be emitted, lowered or linked (names the kernel and the fusion)."""


def fusion_emitter(fusion: HloInstruction, device: DeviceDescription = H100):
    """The emitter for `fusion` on `device` (XLA's GetFusionEmitter)."""
    from hlo_codegen.emitters import get_fusion_emitter

    return get_fusion_emitter(fusion, device)


def argument_ids(fusion: HloInstruction, args: list[KernelArgumentSpec]) -> list[int]:
    """One id per fusion operand, then per output leaf: the number of its deduplicated argument."""
    by_operand = {k: i for i, a in enumerate(args) for k in a.operands}
    by_output = {idx: i for i, a in enumerate(args) for idx in a.outputs}
    return ([by_operand[k] for k in range(len(fusion.operands))]
            + [by_output[idx] for idx, s in fusion.shape.leaf_shapes() if s.is_array])


def default_jobs() -> int:
    """The CPUs this process may run on (at most 8: kernels are short)."""
    try:
        return max(1, min(8, len(os.sched_getaffinity(0))))
    except (AttributeError, OSError):
        return max(1, min(8, os.cpu_count() or 1))


def _named(label: str, fusion_name: str, exc: BaseException) -> KernelEmissionError:
    if isinstance(exc, HloError):
        return KernelEmissionError(f"kernel {label} (fusion %{fusion_name}): {exc.one_line()}")
    return KernelEmissionError(f"kernel {label} (fusion %{fusion_name}): internal error: "
                               f"{type(exc).__name__}: {exc}")


def _ptx_text(llvm_ir: str, arch: str) -> str:
    from hlo_codegen.ptx import compile_to_ptx

    return compile_to_ptx(llvm_ir, arch)


def _validate(ptxs: list[str], arch: str) -> list[BaseException | None]:
    """nvJitLink's check of each PTX (one link for all: `ptx.validate_ptx_batch`)."""
    from hlo_codegen.ptx import validate_ptx_batch

    return validate_ptx_batch(ptxs, arch)


def _ptx(llvm_ir: str, arch: str) -> str:
    ptx = _ptx_text(llvm_ir, arch)
    (error,) = _validate([ptx], arch)
    if error is not None:
        raise error
    return ptx


_BATCH = 8  # kernels per nvJitLink check on the pool (fewer links; enough batches to share out)


class _Checks:
    """The nvJitLink checks of the kernels compiled on the pool, in batches: `errors[i]` is the
    check's error of kernel i (None: it passed; absent: not checked yet)."""

    def __init__(self, arch: str):
        self.arch = arch
        self.errors: dict[int, BaseException | None] = {}
        self._ready: list[tuple[int, str]] = []
        self._queued = 0  # PTX tasks submitted and not started
        self._lock = threading.Lock()

    def submitted(self) -> None:
        """A PTX task was queued (`ptx` counts it off when it starts)."""
        with self._lock:
            self._queued += 1

    def ptx(self, index: int, llvm_ir: str) -> str:
        """Kernel `index`'s PTX (a pool task). The PTX made but not checked yet is checked here
        when it fills a batch, or when no PTX task is waiting (the pool would idle otherwise:
        emission is slower than the pool, as with few kernels)."""
        with self._lock:
            self._queued -= 1
        ptx = _ptx_text(llvm_ir, self.arch)
        with self._lock:
            self._ready.append((index, ptx))
            batch = self._ready if len(self._ready) >= _BATCH or self._queued == 0 else None
            if batch is not None:
                self._ready = []
        if batch is not None:
            self.check(batch)
        return ptx

    def check(self, batch: list[tuple[int, str]]) -> None:
        try:
            errors: list = _validate([ptx for _, ptx in batch], self.arch)
        except Exception as exc:  # noqa: BLE001 - nvJitLink missing or failing: each kernel says so
            errors = [exc] * len(batch)
        with self._lock:
            self.errors.update((index, err) for (index, _), err in zip(batch, errors))

    def rest(self, pool: ThreadPoolExecutor, jobs: int) -> None:
        """Check the kernels no batch took, split over the pool (after every PTX task is done) in
        parts of about equal PTX length (a check's time grows with it)."""
        ready, self._ready = self._ready, []
        parts: list[list[tuple[int, str]]] = [[] for _ in range(min(jobs, len(ready)))]
        sizes = [0] * len(parts)
        for item in sorted(ready, key=lambda item: -len(item[1])):
            k = sizes.index(min(sizes))
            parts[k].append(item)
            sizes[k] += len(item[1])
        for future in [pool.submit(self.check, part) for part in parts]:
            future.result()


def _preferred_name(fusion: HloInstruction, emitter) -> str:
    from hlo_codegen.emitters.base import kernel_name

    return kernel_name(fusion, getattr(emitter, "kind", "loop"))


class EmitterBackend:
    """The project's emitters and lowerings for one target. `arch` names the PTX target and the
    device the emitters size launches for (`device_for_arch`: sm_90 the H100, sm_80 the A100)."""

    def __init__(self, target: str, arch: str = "sm_90", jobs: int = 1):
        self.target = target
        self.arch = arch
        self.device = device_for_arch(arch)
        self.jobs = jobs
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[tuple[CompiledKernel, Future, str, str]] = []
        self._checks = _Checks(arch)

    def compile(self, fusion: HloInstruction, args: list[KernelArgumentSpec],
                unique_name: KernelNamer) -> list[CompiledKernel]:
        label = fusion.name
        try:
            emitter = fusion_emitter(fusion, self.device)
            if self.target == "host" and hasattr(emitter, "for_host"):
                emitter = emitter.for_host()
            label = _preferred_name(fusion, emitter)
            kernel = emitter.emit(argument_ids(fusion, args))
            kernel.name = label = unique_name(kernel.name)
            if len(kernel.params) != len(args):
                raise HloError(f"the kernel takes {len(kernel.params)} parameters, the thunk passes "
                               f"{len(args)}")
            compiled, future = self._lower(kernel, len(args))
        except Exception as exc:  # noqa: BLE001 - a bug below is still named by kernel
            raise _named(label, fusion.name, exc) from exc
        if future is not None:
            self._pending.append((compiled, future, label, fusion.name))
        return [compiled]

    def finish(self) -> None:
        """Wait for the kernels compiling on the pool and fill in their PTX; raise the first
        failure in the order the kernels were asked for."""
        pending, self._pending = self._pending, []
        checks, self._checks = self._checks, _Checks(self.arch)
        try:
            for _, future, _, _ in pending:
                future.exception()  # wait: every PTX task and the batches they check are done
            if self._pool is not None:
                checks.rest(self._pool, self.jobs)
            for index, (compiled, future, label, fusion_name) in enumerate(pending):
                try:
                    ptx = future.result()
                    error = checks.errors.get(index)
                    if error is not None:
                        raise error
                except Exception as exc:  # noqa: BLE001 - named by kernel, as without the pool
                    raise _named(label, fusion_name, exc) from exc
                compiled.kernel = replace(compiled.kernel, ptx=ptx)
                compiled.artifacts["ptx"] = ptx
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None

    def _lower(self, kernel, num_args: int) -> tuple[CompiledKernel, Future | None]:
        from hlo_codegen.kernel_ir import print_kernel

        artifacts = {"kernel_ir.txt": print_kernel(kernel)}
        ptx = llvm_ir = future = None
        if self.target == "cuda":
            from hlo_codegen.llvm import lower_to_nvptx

            artifacts["ll"] = lower_to_nvptx(kernel)
            if self.jobs > 1:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="ptx")
                self._checks.submitted()
                future = self._pool.submit(self._checks.ptx, len(self._pending), artifacts["ll"])
            else:
                ptx = artifacts["ptx"] = _ptx(artifacts["ll"], self.arch)
        else:
            from hlo_codegen.llvm import lower_to_host

            llvm_ir = artifacts["ll"] = lower_to_host(kernel)
        record = ManifestKernel(kernel.name, tuple(kernel.grid), tuple(kernel.block),
                                kernel.shared_memory_bytes, num_args, ptx=ptx, llvm_ir=llvm_ir)
        return CompiledKernel(record, tuple(range(num_args)), artifacts), future
