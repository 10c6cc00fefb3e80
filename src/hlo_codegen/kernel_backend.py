"""The kernel backend of hlo-codegen: a fusion -> emitted, lowered, checked kernels.

Where it sits: between the thunk emitter (which decides that a fusion needs kernels and which
buffer slices they take) and the emitters / lowerings (`hlo_codegen.emitters`,
`hlo_codegen.llvm`, `hlo_codegen.ptx`). For each fusion it asks the emitter for a `Kernel`
(kernel IR), lowers it for the target (`cuda`: NVPTX -> PTX, validated into a cubin with
nvJitLink; `host`: LLVM IR of `void @name(ptr %args, i64 %block_begin, i64 %block_end)`), and
returns `CompiledKernel`s for the manifest plus the dump artifacts (kernel IR text, `.ll`,
`.ptx`). A kernel that fails to emit, lower or link is an HloError naming the kernel and the
fusion.
"""

from __future__ import annotations

from hlo_common.errors import HloError
from hlo_common.ir import HloInstruction

from hlo_codegen.thunk_emitter import CompiledKernel, KernelArgumentSpec


class KernelEmissionError(HloError):
    """A kernel that could not be emitted, lowered or linked (names the kernel and the fusion)."""


class EmitterBackend:
    """The project's emitters and lowerings for one target."""

    def __init__(self, target: str, arch: str = "sm_90"):
        self.target = target
        self.arch = arch

    def compile(self, fusion: HloInstruction, name: str,
                args: list[KernelArgumentSpec]) -> list[CompiledKernel]:
        raise KernelEmissionError(f"kernel {name} (fusion %{fusion.name}): kernel emission is not available "
                                  "yet (hlo_codegen.emitters has not landed)")
