"""SortSimplifier ("simplify-sorts"): a variadic sort drops the operands nobody reads.

Runs in every `simplification` round. A multi-operand sort whose results are read only through
get-tuple-element loses each operand whose result is never read and that the comparator does not
look at; the comparator is cloned without that operand's two parameters:

    %s = (f32[8], s32[8], u8[8]) sort(%k, %v, %w), dimensions={0}, to_apply=%lt   (lt reads k)
    %g = s32[8] get-tuple-element(%s), index=1
      =>
    %s.1 = (f32[8], s32[8]) sort(%k, %v), dimensions={0}, to_apply=%lt.clone

Declines: single-operand sorts, sorts that are the root or have a user that is not a
get-tuple-element, sorts whose every operand is used, sorts inside fusion computations. When one
operand survives, the new sort is not a tuple and replaces the get-tuple-element directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import add_embedded_computation, make_gte, non_fusion_computations
from hlo_opt.deferred_removal import DeferredRemoval
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def used_operand_indices(sort: HloInstruction) -> set[int] | None:
    """Operands whose results are read or whose values the comparator reads; None when unknown."""
    if not sort.shape.is_tuple or sort.is_root:
        return None
    if any(u.opcode != "get-tuple-element" for u in sort.users):
        return None
    used = {u.attrs["index"] for u in sort.users}
    for p in sort.attrs["to_apply"].parameters:
        if p.users or p.is_root:
            used.add(p.parameter_number // 2)
    return used


def comparator_without(comparator: HloComputation, keep: list[int], module: HloModule,
                       before: HloComputation) -> HloComputation:
    """A clone of the comparator taking only the parameter pairs of the operands in `keep`."""
    clone = comparator.clone(name=comparator.name + ".clone")
    params = clone.parameters
    dropped = [p for p in params if p.parameter_number // 2 not in keep]
    clone.remove_instructions(dropped)
    for p in clone.parameters:
        pair = keep.index(p.parameter_number // 2)
        side = "lhs" if p.parameter_number % 2 == 0 else "rhs"
        p.parameter_number = 2 * pair + p.parameter_number % 2
        p.name = clone.unique_name(f"p.{pair}.{side}")
    return add_embedded_computation(module, clone, before)


def remove_unused_operands(sort: HloInstruction, module: HloModule, removal: DeferredRemoval) -> bool:
    used = used_operand_indices(sort)
    if used is None or len(used) == len(sort.operands):
        return False
    comp = sort.parent
    keep = sorted(used)
    shapes = [sort.operands[i].shape for i in keep]
    shape = shapes[0] if len(keep) == 1 else Shape.tuple_of(shapes)
    new_sort = sort.clone_with_new_operands([sort.operands[i] for i in keep], shape=shape)
    new_sort.name = comp.unique_name(sort.name)
    new_sort.attrs["to_apply"] = comparator_without(sort.attrs["to_apply"], keep, module, comp)
    comp.add_instruction(new_sort)
    results = {keep[0]: new_sort} if len(keep) == 1 else \
        {old: make_gte(new_sort, new) for new, old in enumerate(keep)}
    for gte in list(sort.users):
        gte.replace_all_uses_with(results[gte.attrs["index"]])
        removal.forget(gte)
    return True


@register_pass
@dataclass
class SortSimplifier(HloPass):
    """Removes the operands of variadic sorts whose results are unused (and not compared)."""

    name = "simplify-sorts"

    def run(self, module: HloModule) -> bool:
        sorts = [i for c in non_fusion_computations(module) for i in c.instructions if i.opcode == "sort"]
        changed = False
        removal = DeferredRemoval()
        for sort in sorts:
            changed |= remove_unused_operands(sort, module, removal)
        removal.finish()
        return changed
