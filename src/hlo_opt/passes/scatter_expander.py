"""ScatterExpander ("scatter_expander"), in XLA:GPU's kEliminateSimpleScatters mode: a scatter with
a single index becomes a dynamic-slice, the combiner mapped over the window, and a
dynamic-update-slice.

Runs in every `simplification` round, after scatter_simplifier:

    %s = f32[8,3] scatter(%x, s32[1,1] %i, f32[1,1,3] %u), update_window_dims={1,2}, ...
      =>
    %old = f32[1,3] dynamic-slice(%x, %i0, %zero)
    %new = f32[1,3] map(%old, reshape(%u)), to_apply=%combiner
    %s = f32[8,3] dynamic-update-slice(%x, select(%in_bounds, %new, %old), %i0, %zero)

As in XLA's loop body (written here without the one-trip loop that simplify-while-loops would
inline): the window is applied only when every start index s satisfies 0 <= s <= dim - window,
since a scatter skips out-of-range windows while dynamic slices clamp. Scatters whose updates are
empty return their operand. Declines: scatters with more than one index, variadic scatters,
batching dimensions, fusion computations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.gather_scatter_utils import index_vector, insert_degenerate_dims, start_scalars
from hlo_common.hlo.hlo_creation_utils import (
    make_broadcast, make_compare, make_constant, make_reshape, make_transpose,
)
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass


def scatter_indices_count(scatter: HloInstruction) -> int:
    indices = scatter.operands[(len(scatter.operands) - 1) // 2]
    count = 1
    for i, d in enumerate(indices.shape.dims):
        if i != scatter.attrs["index_vector_dim"]:
            count *= d
    return count


def in_bounds(starts: list[HloInstruction], operand_dims, window) -> HloInstruction:
    """pred[] that every start lies in [0, dim - window]."""
    comp = starts[0].parent
    et = starts[0].shape.element_type
    ok = None
    for s, d, w in zip(starts, operand_dims, window):
        lo = make_compare("LE", make_constant(comp, np.zeros((), et.np_dtype), et), s)
        hi = make_compare("GE", make_constant(comp, np.asarray(d - w).astype(et.np_dtype), et), s)
        both = comp.add_new_instruction("and", [lo, hi])
        ok = both if ok is None else comp.add_new_instruction("and", [ok, both])
    return ok if ok is not None else make_constant(comp, np.bool_(True), "pred")


@register_pass
@dataclass
class ScatterExpander(OpExpanderPass):
    """Turns single-index scatters into dynamic-slice + map + dynamic-update-slice."""

    name = "scatter_expander"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return instr.opcode == "scatter" and len(instr.operands) == 3 \
            and not instr.attrs.get("input_batching_dims") and scatter_indices_count(instr) == 1

    def expand_instruction(self, scatter: HloInstruction) -> HloInstruction:
        a = scatter.attrs
        comp = scatter.parent
        operand, indices, update = scatter.operands
        if update.shape.num_elements == 0:
            return operand
        window_dims = tuple(a.get("update_window_dims", ()))
        scatter_dims = [i for i in range(update.shape.rank) if i not in window_dims]
        window = make_transpose(update, scatter_dims + list(window_dims))
        window = make_reshape(window, window.shape.dims[len(scatter_dims):])
        window = insert_degenerate_dims(window, sorted(a.get("inserted_window_dims", ())))
        sizes = window.shape.dims
        vector = index_vector(indices, a["index_vector_dim"])
        starts = start_scalars(vector, operand.shape.rank, a["scatter_dims_to_operand_dims"])
        slice_shape = Shape.array(operand.shape.element_type, sizes)
        old = comp.add_new_instruction("dynamic-slice", [operand] + starts, slice_shape,
                                       {"dynamic_slice_sizes": sizes})
        new = comp.add_new_instruction("map", [old, window], old.shape,
                                       {"dimensions": tuple(range(len(sizes))), "to_apply": a["to_apply"]})
        valid = make_broadcast(in_bounds(starts, operand.shape.dims, sizes), sizes)
        chosen = comp.add_new_instruction("select", [valid, new, old])
        return comp.add_new_instruction("dynamic-update-slice", [operand, chosen] + starts, operand.shape)
