"""Triton GEMM fusions as kernel thunks on the cuda target (XLA's `TritonFusion::Emit`,
`xla/backends/gpu/codegen/triton/fusion.cc`): each `__triton_gemm` / `__triton_nested_gemm_fusion`
fusion the kernel writer takes becomes one Triton kernel, compiled for the target arch, launched
on XLA's grid (one program per output tile) with num_warps * 32 threads and Triton's shared memory.

Where it sits: hlo-codegen's thunk emitter asks `TritonGemmEmitter.plan` for each GEMM fusion as
it walks the module (a fusion the writer does not take, `Unsupported`, stays with the loop
emitter); `finish` then compiles every planned kernel in one Triton child process
(`compile.compile_kernels`) and fills in the kernels' code, metadata and launch dimensions. Equal
fusions (same tiled program and config) share one kernel, as XLA's kernel reuse does. Kernel
arguments follow the Triton signature: every fusion operand in order, then the output. A kernel
Triton refuses to compile is said once on stderr and its fusions keep the loop emitter.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace

from hlo_common.errors import HloError
from hlo_common.gpu.device import DeviceDescription
from hlo_common.hlo.ir import HloInstruction
from hlo_common.manifest.manifest import ManifestKernel
from hlo_common.manifest.thunks import (BufferSlice, ConditionalThunk, KernelArgument, KernelThunk, SequentialThunk,
                                        WhileThunk, walk)

from hlo_codegen.thunk_emitter import TritonRefusal
from hlo_codegen.triton_gemm.config import check_config, fusion_config
from hlo_codegen.triton_gemm.program import Unsupported, tiled_program
from hlo_codegen.triton_gemm.source import KernelSource, render, _signature, grid


@dataclass
class _Planned:
    source: KernelSource
    thunks: list[KernelThunk] = field(default_factory=list)


class TritonGemmEmitter:
    """Plans the Triton kernels of a module's GEMM fusions and compiles them together."""

    def __init__(self, arch: str, device: DeviceDescription, cache_dir: str | None = None):
        self.arch, self.device = arch, device
        self.cache_dir = cache_dir  # the kernel cache's directory (`compile.compile_kernels`), or None
        self._compiling = None  # `start`'s compile.PendingCompile until `finish` collects it
        self._planned: dict[tuple, _Planned] = {}  # (tiled program, config) -> kernel

    def rejects(self, fusion: HloInstruction) -> bool:
        """Whether the kernel writer does not take the fusion (it then falls back to cuBLAS plus
        kernels: `hlo_common.passes.triton_gemm_fallback`)."""
        try:
            program = tiled_program(fusion)
            _signature(program)
            render(program, fusion_config(fusion), "k")
        except (Unsupported, KeyError):
            return True
        return False

    def plan(self, fusion: HloInstruction, slice_of, unique_name) -> bool:
        """Plan the fusion's kernel thunk (completed by `finish`); False when the kernel writer
        does not take the fusion. A config the device cannot run is an HloError."""
        config = fusion_config(fusion)
        check_config(fusion, config, self.device)
        try:
            program = tiled_program(fusion)
            signature = _signature(program)
        except Unsupported:
            return False
        operands = [slice_of(o) for o in fusion.operands]
        output: BufferSlice = slice_of(fusion)
        if output in operands:  # other programs would still read what one has written
            return False
        key = (program, tuple(sorted(config.items())))
        planned = self._planned.get(key)
        if planned is None:
            name = unique_name(fusion.name)
            try:
                text = render(program, config, name)
            except KeyError as exc:  # a type or opcode without a Triton spelling
                del exc
                return False
            planned = self._planned[key] = _Planned(KernelSource(text, name, signature, grid(program, config),
                                                                 dict(config)))
        args = tuple(KernelArgument(s, o.shape.to_string(), False) for s, o in zip(operands, fusion.operands))
        args += (KernelArgument(output, fusion.shape.to_string(), True, ((),)),)
        block = (32 * config["num_warps"], 1, 1)
        thunk = KernelThunk(fusion.name, planned.source.name, args, planned.source.grid, block, 0)
        planned.thunks.append(thunk)
        return True

    def reset(self) -> None:
        """Forget the planned kernels (the thunk emitter plans the module again)."""
        self._planned, self._compiling = {}, None

    def start(self) -> None:
        """Start compiling the planned kernels (in the Triton child) for `finish` to collect."""
        from hlo_codegen.triton_gemm.compile import start_compile

        self._compiling = start_compile([p.source for p in self._planned.values()], self.arch, self.cache_dir)

    def cancel(self) -> None:
        """Stop what `start` began (the caller met an error before it needed the kernels)."""
        compiling, self._compiling = self._compiling, None
        if compiling is not None:
            compiling.cancel()

    def provisional_thunks(self) -> dict[str, KernelThunk]:
        """Each planned fusion's thunk (by name) before Triton says its block and shared memory."""
        return {t.profile_annotation: t for p in self._planned.values() for t in p.thunks}

    def finish(self, say_refusals: bool = True) -> tuple[dict[str, tuple[ManifestKernel, dict]],
                                                         dict[str, KernelThunk]]:
        """Compile the planned kernels (or collect what `start` began): the manifest's kernels by
        name with their dump texts (`triton.py`, the kernel's source; `ptx`), and the thunk of each
        planned fusion (by name) with Triton's launch dimensions and shared memory. A fusion
        whose kernel Triton refuses has no thunk (said on stderr with `say_refusals`)."""
        if self._compiling is None:
            self.start()
        compiling, self._compiling = self._compiling, None
        planned = list(self._planned.values())
        failures: dict[str, str] = {}
        compiled = compiling.result(failures)
        kernels: dict[str, tuple[ManifestKernel, dict]] = {}
        final: dict[str, KernelThunk] = {}
        for p, k in zip(planned, compiled):
            if k is None:  # its fusions keep the loop emitter (the thunk emitter's default)
                if say_refusals:
                    print(f"hlo-codegen: note: Triton could not compile {p.source.name} for {self.arch} "
                          f"({failures[p.source.name][:160]}); its fusion runs as a loop kernel",
                          file=sys.stderr)
                continue
            if tuple(k.cluster_dims) != (1, 1, 1):
                raise HloError(f"Triton kernel {k.name}: cluster dims {k.cluster_dims}; hlo-run launches "
                               "single-CTA kernels only")
            block = (32 * k.num_warps, 1, 1)
            kernel = ManifestKernel(k.name, k.grid, block, k.shared_bytes, len(p.source.signature), ptx=k.ptx,
                                    cubin=k.cubin, num_warps=k.num_warps, cluster_dims=tuple(k.cluster_dims),
                                    scratch_params=k.scratch_params)
            kernels[k.name] = (kernel, {"triton.py": p.source.text, "ptx": k.ptx})
            for t in p.thunks:
                final[t.profile_annotation] = replace(t, grid=k.grid, block=block,
                                                      shared_bytes=k.shared_bytes)
        return kernels, final


def settle_thunks(entry: SequentialThunk, provisional: dict[str, KernelThunk],
                  final: dict[str, KernelThunk]) -> SequentialThunk:
    """`entry` with every provisional Triton thunk (`provisional_thunks`) replaced by its final one
    (`finish`); TritonRefusal when a fusion has none (Triton refused its kernel) or a provisional
    thunk is left where this walk does not reach."""
    if set(final) != set(provisional):
        raise TritonRefusal(", ".join(sorted(set(provisional) - set(final))))
    by_id = {id(t): final[name] for name, t in provisional.items()}
    settled = _settle(entry, by_id)
    if any(id(t) in by_id for t in walk(settled)):
        raise TritonRefusal("a Triton thunk inside a thunk of another kind")
    return settled


def _settle(thunk, by_id: dict[int, KernelThunk]):
    if id(thunk) in by_id:
        return by_id[id(thunk)]
    if isinstance(thunk, SequentialThunk):
        return replace(thunk, thunks=tuple(_settle(t, by_id) for t in thunk.thunks))
    if isinstance(thunk, WhileThunk):
        return replace(thunk, condition=_settle(thunk.condition, by_id), body=_settle(thunk.body, by_id))
    if isinstance(thunk, ConditionalThunk):
        return replace(thunk, branches=tuple(_settle(b, by_id) for b in thunk.branches))
    return thunk


__all__ = ["TritonGemmEmitter", "settle_thunks"]
