"""DotDimensionSorter ("dot_dimension_sorter"): contracting dimensions listed in ascending order.

Runs first in the `optimization` pipeline (XLA:GPU), so that a dot whose contracting dimensions
are consecutive but listed out of order (`lhs_contracting_dims={2,1}`) does not need a transpose
later: the lhs/rhs pairs are permuted together so that one side becomes sorted.

    %d = dot(%a, %b), lhs_contracting_dims={2,1}, rhs_contracting_dims={1,2}
      =>  %d = dot(%a, %b), lhs_contracting_dims={1,2}, rhs_contracting_dims={2,1}

A dot is rewritten when the side to sort holds distinct consecutive numbers and is not sorted,
and the other side is not consecutive or also unsorted (so it is not made worse). Declines: dots
with an operand whose layout is not the default (dim 0 major), dots without contracting
dimensions, fusion and composite computations.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.deferred_removal import DeferredRemoval
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def consecutive_if_sorted(dims) -> bool:
    """XLA's DistinctNumbersAreConsecutiveIfSorted."""
    return len(set(dims)) == len(dims) and (not dims or max(dims) - min(dims) + 1 == len(dims))


def _default_layout(instr: HloInstruction) -> bool:
    layout = instr.shape.layout
    return layout is None or layout.is_default()


def needs_sorting(dot: HloInstruction) -> bool:
    if not all(_default_layout(op) for op in dot.operands[:2]):
        return False
    lhs, rhs = dot.attrs.get("lhs_contracting_dims", ()), dot.attrs.get("rhs_contracting_dims", ())
    if not lhs:
        return False
    cons_l, cons_r = consecutive_if_sorted(lhs), consecutive_if_sorted(rhs)
    sorted_l, sorted_r = list(lhs) == sorted(lhs), list(rhs) == sorted(rhs)
    return (cons_l and not sorted_l and not cons_r) or (cons_r and not sorted_r and not cons_l) \
        or (cons_l and not sorted_l and cons_r and not sorted_r)


def sort_dot_dimensions(dot: HloInstruction, removal: DeferredRemoval) -> None:
    lhs, rhs = tuple(dot.attrs["lhs_contracting_dims"]), tuple(dot.attrs["rhs_contracting_dims"])
    key = lhs if consecutive_if_sorted(lhs) else rhs
    low = min(key)
    new_lhs, new_rhs = [0] * len(lhs), [0] * len(rhs)
    for i, k in enumerate(key):  # XLA's Permute: output[permutation[i]] = input[i]
        new_lhs[k - low], new_rhs[k - low] = lhs[i], rhs[i]
    new = dot.clone_with_new_operands(dot.operands)
    new.attrs["lhs_contracting_dims"], new.attrs["rhs_contracting_dims"] = tuple(new_lhs), tuple(new_rhs)
    new.name = dot.parent.unique_name(dot.name)
    dot.parent.add_instruction(new)
    removal.replace(dot, new)


@register_pass
@dataclass
class DotDimensionSorter(HloPass):
    """Sorts the contracting dimensions of dots (keeping lhs/rhs pairs together)."""

    name = "dot_dimension_sorter"

    def run(self, module: HloModule) -> bool:
        dots = [i for c in non_fusion_computations(module) for i in c.instructions
                if i.opcode == "dot" and needs_sorting(i)]
        removal = DeferredRemoval()
        for dot in dots:
            sort_dot_dimensions(dot, removal)
        removal.finish()
        return bool(dots)
