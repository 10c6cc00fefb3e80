"""HloDCE ("dce"): removes dead instructions and unreachable computations.

Runs in many places of the GPU pipeline (after sharding removal, at the end of every
`simplification` round, after fusion and multi-output fusion, before copy insertion).

    %a = f32[4] add(%p, %p)          <- no users, not the root: removed, and so are its
    ROOT %n = f32[4] negate(%p)          operands if they become dead

Declines to remove: parameters (that would renumber the others), the root, instructions with
control dependencies, and anything with a side effect (send/recv, infeed/outfeed, rng,
collectives, custom calls with `custom_call_has_side_effect=true`, and calls/loops/conditionals
whose computations contain one). Multi-output fusions whose outputs are only read through
`get-tuple-element` lose the outputs nobody reads (XLA's RemoveMultiOutputFusionsUnusedOutputs).
Computations no longer reachable from the entry are removed last.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_utils import (
    computation_callers,
    fusion_instruction_of,
    has_control_dependencies,
    has_side_effect,
    is_dead,
    is_safely_removable,
    remove_instruction_and_unused_operands,
    replace_instruction,
)
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def can_remove(instr: HloInstruction) -> bool:
    return instr.parent is not None and is_dead(instr) and is_safely_removable(instr) \
        and not has_side_effect(instr)


def remove_dead_roots(comp: HloComputation) -> bool:
    """Remove every dead instruction of `comp` (users first, so whole dead chains go)."""
    changed = False
    for instr in reversed(comp.post_order()):
        if instr.parent is comp and can_remove(instr):
            remove_instruction_and_unused_operands(comp, instr)
            changed = True
    return changed


def remove_unused_fusion_outputs(comp: HloComputation, fusion: HloInstruction) -> bool:
    """Drop tuple outputs of a multi-output fusion that no get-tuple-element reads."""
    root = comp.root
    if root.opcode != "tuple" or root.sharding is not None or fusion.is_root \
            or has_control_dependencies(fusion) or fusion.attrs.get("kind") == "kCustom" \
            or "output_to_operand_aliasing" in fusion.attrs or not fusion.users:
        return False
    if any(u.opcode != "get-tuple-element" for u in fusion.users):
        return False
    used = {u.attrs["index"] for u in fusion.users}
    used |= {i for i, op in enumerate(root.operands) if has_side_effect(op)}
    if len(used) == len(root.operands):
        return False
    kept = sorted(used)
    shapes = [fusion.shape.tuple_shapes[i] for i in kept]
    if len(kept) == 1:
        fusion.shape = shapes[0]
        for gte in list(fusion.users):
            replace_instruction(gte, fusion)
        comp.root = root.operands[kept[0]]
    else:
        fusion.shape = Shape.tuple_of(shapes)
        for gte in fusion.users:
            gte.attrs["index"] = kept.index(gte.attrs["index"])
        new_root = HloInstruction(root.name, "tuple", fusion.shape, [root.operands[i] for i in kept])
        root.name = comp.unique_name(root.name + ".old")
        comp.add_instruction(new_root)
        comp.root = new_root
    remove_instruction_and_unused_operands(comp, root)
    return True


@register_pass
@dataclass
class HloDCE(HloPass):
    """Removes dead instructions (never side-effecting ones) and unreachable computations."""

    name = "dce"

    def run(self, module: HloModule) -> bool:
        changed = False
        callers = computation_callers(module)
        # Callers before callees, so dead get-tuple-elements of a fusion go before its outputs.
        for comp in reversed(module.computation_post_order()):
            fusion = fusion_instruction_of(comp, callers)
            if fusion is not None and fusion.parent is not None:
                changed |= remove_unused_fusion_outputs(comp, fusion)
            changed |= remove_dead_roots(comp)
        changed |= module.remove_unreachable_computations()
        return changed
