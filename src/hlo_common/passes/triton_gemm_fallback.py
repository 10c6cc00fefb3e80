"""TritonGemmFallback ("triton-gemm-fallback"): Triton GEMM fusions (`__triton_gemm`,
`__triton_nested_gemm_fusion`, made by hlo-opt's triton-gemm-rewriter) that the cuda target will
not compile with Triton are dissolved into their instructions, so the dot becomes a cuBLAS call
(a GemmThunk) where cuBLAS takes it and the prologue and epilogue ops become kernels: what XLA:GPU
runs with `--xla_gpu_enable_triton_gemm=false`, one launch per op rather than one fused GEMM.

Where it sits: hlo-codegen's prepare pipeline (`hlo_codegen.compiler.prepare_pipeline`), after
`inline-nested-fusions` (the bodies are flat) and before the fusion wrapper, which wraps the
dissolved ops that need kernels. hlo-codegen adds it for the cuda target when the `triton`
package (the `.[triton]` extra) is missing, for every GEMM fusion, and otherwise for the fusions
its Triton kernel writer does not take (`dissolve` says which). The numbers do not change: a
fusion computes exactly its body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from hlo_common.hlo.hlo_utils import NameUniquer
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import HloPass
from hlo_common.passes._support import global_computations
from hlo_common.passes.nested_fusions import inline_fusion

TRITON_GEMM_KINDS = ("__triton_gemm", "__triton_nested_gemm_fusion")


def is_triton_gemm_fusion(fusion: HloInstruction) -> bool:
    """A kCustom fusion of kind __triton_gemm / __triton_nested_gemm_fusion."""
    if fusion.opcode != "fusion":
        return False
    cfg = fusion.backend_config_data
    cfg = cfg.get("fusion_backend_config") if isinstance(cfg, dict) else None
    return isinstance(cfg, dict) and cfg.get("kind") in TRITON_GEMM_KINDS


@dataclass
class TritonGemmFallback(HloPass):
    """Dissolves the GEMM fusions `dissolve` picks (all by default) into their instructions."""

    dissolve: Callable[[HloInstruction], bool] = lambda fusion: True
    name = "triton-gemm-fallback"

    def run(self, module: HloModule) -> bool:
        uniquer, bodies = None, []
        for comp in global_computations(module):
            for instr in list(comp.instructions):
                if is_triton_gemm_fusion(instr) and instr.shape.is_array and self.dissolve(instr):
                    uniquer = uniquer or NameUniquer.for_module(module)
                    bodies.append(instr.attrs["calls"])
                    inline_fusion(instr, uniquer)
        if not bodies:
            return False
        called = {id(c) for comp in module.computations for i in comp.instructions
                  for c in i.called_computations()}
        gone = {id(b) for b in bodies if id(b) not in called}
        module.computations = [c for c in module.computations if id(c) not in gone]
        return True


__all__ = ["TRITON_GEMM_KINDS", "TritonGemmFallback", "is_triton_gemm_fusion"]
