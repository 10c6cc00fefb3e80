"""NestedFusionInliner ("inline-nested-fusions"): a `fusion` instruction inside a fused computation
(or inside a computation a fused computation calls, such as a reducer) is replaced by its body.

Where it sits: hlo-codegen's prepare pipeline (`hlo_codegen.compiler.prepare_pipeline`), before
the lone instructions are wrapped. XLA's fusion emitters never see nested fusions except in
Triton fusions (nested operand fusions of a GEMM, a fused reducer); hlo-codegen emits a Triton
fusion with the ordinary emitters, which take one flat fused computation, so the nesting is
dissolved first:

    %add_computation { %p0 = f32[] parameter(0) %p1 = f32[] parameter(1)
                       ROOT %fusion = f32[] fusion(%p0, %p1), kind=kLoop, calls=%fusion_body }
      =>  %add_computation { %p0 = ... %p1 = ...
                             %convert0 = bf16[] convert(%p0) ... ROOT %output = f32[] convert(%add) }

The body's instructions are copied in front of the nested fusion with its parameters replaced by
the fusion's operands (names made unique module-wide), innermost fusions first; fused computations
no longer called afterwards are removed. The numbers do not change: a fusion computes exactly its
body.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.graph import depth_first
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.hlo_utils import NameUniquer, clone_instruction, replace_instruction
from hlo_common.passes._support import global_computations


def _fused_closure(module: HloModule, globals_: list[HloComputation]) -> list[HloComputation]:
    """Every computation reachable from a fusion of a global computation, callees first."""
    fused = [c for g in globals_ for i in g.instructions if i.opcode == "fusion"
             for c in i.called_computations()]
    # the global computations count as seen: the walk neither takes nor crosses them
    walk = depth_first(fused, lambda comp: [c for i in comp.instructions for c in i.called_computations()],
                       visited={id(c) for c in globals_})
    reachable = {id(c) for c in walk}
    return [c for c in module.computation_post_order() if id(c) in reachable]


def inline_fusion(fusion: HloInstruction, uniquer: NameUniquer) -> HloInstruction:
    """Copy the fused computation in front of `fusion`; its copied root replaces the fusion."""
    body = fusion.attrs["calls"]
    caller = fusion.parent
    mapping = {id(p): fusion.operands[p.parameter_number] for p in body.parameters}
    for instr in body.post_order():
        if instr.opcode == "parameter":
            continue
        new = clone_instruction(instr, uniquer.unique(instr.name), [mapping[id(o)] for o in instr.operands])
        caller.add_instruction(new, before=fusion)
        mapping[id(instr)] = new
    root = mapping[id(body.root)]
    replace_instruction(fusion, root, preserve_sharding=False)
    return root


def inline_nested_fusions(module: HloModule, globals_: list[HloComputation]) -> int:
    """Inline every fusion nested in a fusion (see the module docstring); returns how many."""
    closure = _fused_closure(module, globals_)
    uniquer = None
    count = 0
    for comp in closure:
        for instr in [i for i in comp.post_order() if i.opcode == "fusion"]:
            uniquer = uniquer or NameUniquer.for_module(module)
            inline_fusion(instr, uniquer)
            count += 1
    if count:
        _remove_uncalled(module, closure)
    return count


def _remove_uncalled(module: HloModule, candidates: list[HloComputation]) -> None:
    called = {id(c) for comp in module.computations for i in comp.instructions
              for c in i.called_computations()}
    dead = {id(c) for c in candidates if id(c) not in called and c is not module.entry}
    if dead:
        module.computations = [c for c in module.computations if id(c) not in dead]


@register_pass
@dataclass
class NestedFusionInliner(HloPass):
    """Fusions nested inside fused computations (and their reducers) are replaced by their bodies."""

    name = "inline-nested-fusions"

    def run(self, module: HloModule) -> bool:
        return inline_nested_fusions(module, global_computations(module)) > 0
