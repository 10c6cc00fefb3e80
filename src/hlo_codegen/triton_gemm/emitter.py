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
from hlo_common.manifest.thunks import BufferSlice, KernelArgument, KernelThunk

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

    def finish(self) -> tuple[dict[str, tuple[ManifestKernel, dict]], dict[str, KernelThunk]]:
        """Compile the planned kernels: the manifest's kernels by name with their dump texts
        (`triton.py`, the kernel's source; `ptx`), and the thunk of each planned fusion (by name)
        with Triton's launch dimensions and shared memory."""
        from hlo_codegen.triton_gemm.compile import compile_kernels

        planned = list(self._planned.values())
        failures: dict[str, str] = {}
        compiled = compile_kernels([p.source for p in planned], self.arch, failures, self.cache_dir)
        kernels: dict[str, tuple[ManifestKernel, dict]] = {}
        final: dict[str, KernelThunk] = {}
        for p, k in zip(planned, compiled):
            if k is None:  # its fusions keep the loop emitter (the thunk emitter's default)
                print(f"hlo-codegen: note: Triton could not compile {p.source.name} for {self.arch} "
                      f"({failures[p.source.name][:160]}); its fusion runs as a loop kernel", file=sys.stderr)
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


__all__ = ["TritonGemmEmitter"]
