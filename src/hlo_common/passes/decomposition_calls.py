"""DecompositionCalls ("xla-builder-calls"): `xla_builder.*` custom calls become `call`s of their
decomposition.

Where it sits: first in hlo-codegen's prepare pipeline (`hlo_codegen.compiler.prepare_pipeline`),
so that flatten-call-graph and the fusion wrapper see ordinary HLO. hlo-opt expands the same calls
inline with its `test-only-xla-builder` pass; the reference interpreter evaluates them with the
same decompositions (`hlo_common.hlo.xla_builder_math`).

    %e = f32[8] custom-call(%x), custom_call_target="xla_builder.math.Erf"
      =>  %e = f32[8] call(%x), to_apply=%xla_builder.math.Erf

The called computation is the one the custom call carries or, for an `xla_builder.math.*` call
without one, the computation XLA's builder library would attach, cloned into the module just
before the caller. A call keeps the custom call's name and metadata. Only the entry and the
computations it runs as control flow are searched.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.passes._support import global_computations


def calls_for_decompositions(module: HloModule) -> int:
    """Rewrite every `xla_builder.*` custom call that has a decomposition; returns how many."""
    count = 0
    for comp in global_computations(module):
        for instr in list(comp.instructions):
            target = str(instr.attrs.get("custom_call_target", ""))
            if instr.opcode != "custom-call" or not target.startswith("xla_builder."):
                continue
            callees = instr.called_computations() or _library_decomposition(module, comp, instr)
            if len(callees) != 1:
                continue
            call = HloInstruction(instr.name, "call", instr.shape, list(instr.operands),
                                  {"to_apply": callees[0]})
            call.metadata = list(instr.metadata)
            comp.replace_instruction(instr, call, remove_dead_operands=False)
            call.name = instr.name  # free again now that the custom call is gone
            count += 1
    return count


def _library_decomposition(module: HloModule, comp: HloComputation, instr: HloInstruction) -> list:
    from hlo_common.hlo.xla_builder_math import decomposition_for

    shared = decomposition_for(instr)
    if shared is None:
        return []
    callee = shared.clone(name=module.unique_computation_name(str(instr.attrs["custom_call_target"])))
    module.computations.insert(module.computations.index(comp), callee)
    callee.parent = module
    return [callee]


@register_pass
@dataclass
class DecompositionCalls(HloPass):
    """xla_builder.* custom calls become calls of their decomposition computations."""

    name = "xla-builder-calls"

    def run(self, module: HloModule) -> bool:
        return calls_for_decompositions(module) > 0
