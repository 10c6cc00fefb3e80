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
"""

from __future__ import annotations

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


def _preferred_name(fusion: HloInstruction, emitter) -> str:
    from hlo_codegen.emitters.base import kernel_name

    return kernel_name(fusion, getattr(emitter, "kind", "loop"))


class EmitterBackend:
    """The project's emitters and lowerings for one target. `arch` names the PTX target and the
    device the emitters size launches for (`device_for_arch`: sm_90 the H100, sm_80 the A100)."""

    def __init__(self, target: str, arch: str = "sm_90"):
        self.target = target
        self.arch = arch
        self.device = device_for_arch(arch)

    def compile(self, fusion: HloInstruction, args: list[KernelArgumentSpec],
                unique_name: KernelNamer) -> list[CompiledKernel]:
        label = fusion.name
        try:
            emitter = fusion_emitter(fusion, self.device)
            label = _preferred_name(fusion, emitter)
            kernel = emitter.emit(argument_ids(fusion, args))
            kernel.name = label = unique_name(kernel.name)
            if len(kernel.params) != len(args):
                raise HloError(f"the kernel takes {len(kernel.params)} parameters, the thunk passes "
                               f"{len(args)}")
            return [self._lower(kernel, len(args))]
        except HloError as exc:
            raise KernelEmissionError(f"kernel {label} (fusion %{fusion.name}): {exc.one_line()}") from exc
        except Exception as exc:  # noqa: BLE001 - a bug below is still named by kernel
            raise KernelEmissionError(f"kernel {label} (fusion %{fusion.name}): internal error: "
                                      f"{type(exc).__name__}: {exc}") from exc

    def _lower(self, kernel, num_args: int) -> CompiledKernel:
        from hlo_codegen.kernel_ir import print_kernel

        artifacts = {"kernel_ir.txt": print_kernel(kernel)}
        ptx = llvm_ir = None
        if self.target == "cuda":
            from hlo_codegen.llvm import lower_to_nvptx
            from hlo_codegen.ptx import compile_to_ptx, validate_ptx

            artifacts["ll"] = lower_to_nvptx(kernel)
            ptx = artifacts["ptx"] = compile_to_ptx(artifacts["ll"], self.arch)
            validate_ptx(ptx, self.arch)
        else:
            from hlo_codegen.llvm import lower_to_host

            llvm_ir = artifacts["ll"] = lower_to_host(kernel)
        record = ManifestKernel(kernel.name, tuple(kernel.grid), tuple(kernel.block),
                                kernel.shared_memory_bytes, num_args, ptx=ptx, llvm_ir=llvm_ir)
        return CompiledKernel(record, tuple(range(num_args)), artifacts)
