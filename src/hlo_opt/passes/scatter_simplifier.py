"""ScatterSimplifier ("scatter_simplifier"): every scatter in the canonical form the GPU emitter
reads.

Runs in every `simplification` round and after layout normalization. Canonical: indices of
shape [N, k] with index_vector_dim=1, updates [N, window...] (at most one scatter dimension,
first), update_window_dims sorted and no inserted window dimensions. Any other scatter gets its
indices reshaped/transposed to [N, k] and its updates transposed (scatter dims first), collapsed
to one scatter dimension and given size-1 dimensions for the inserted window dims:

    %s = f32[8,3] scatter(%x, s32[5] %i, f32[5,3] %u), update_window_dims={1},
         inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1
      =>  scatter(%x, s32[5,1] reshape(%i), f32[5,1,3] reshape(%u)), update_window_dims={1,2},
          inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1

A scatter into a scalar with scalar updates becomes its combiner applied to (operand, update),
inlined. Variadic scatters transform every update. Declines: scatters with batching dimensions,
scatters into a scalar with scattered updates, canonical scatters, fusion computations.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.gather_scatter_utils import (
    collapse_first_n_dims, insert_degenerate_dims, transform_start_indices,
)
from hlo_common.hlo.hlo_creation_utils import make_transpose
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass
from hlo_opt.passes.select_and_scatter_expander import inline_into


def _parts(scatter: HloInstruction):
    n = (len(scatter.operands) - 1) // 2
    return scatter.operands[:n], scatter.operands[n], scatter.operands[n + 1:]


def is_simplified_scatter(scatter: HloInstruction) -> bool:
    a = scatter.attrs
    operands, indices, updates = _parts(scatter)
    if operands[0].shape.rank == 0:
        return False
    window = tuple(a.get("update_window_dims", ()))
    return a.get("index_vector_dim") + 1 == indices.shape.rank \
        and updates[0].shape.rank - len(window) <= 1 and 0 not in window \
        and list(window) == sorted(window) and not a.get("inserted_window_dims")


def flatten_and_transpose_updates(update: HloInstruction, window_dims, inserted) -> HloInstruction:
    rank = update.shape.rank
    scatter_dims = [i for i in range(rank) if i not in window_dims]
    update = make_transpose(update, scatter_dims + list(window_dims))
    if len(scatter_dims) > 1:
        update = collapse_first_n_dims(update, len(scatter_dims))
    elif not scatter_dims:
        update = insert_degenerate_dims(update, [0])
    if inserted:
        update = insert_degenerate_dims(update, [i + 1 for i in inserted])
    return update


@register_pass
@dataclass
class ScatterSimplifier(OpExpanderPass):
    """Rewrites scatters into the canonical [N, k]-indices, [N, window...]-updates form."""

    name = "scatter_simplifier"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        if instr.opcode != "scatter" or instr.attrs.get("input_batching_dims"):
            return False
        if is_simplified_scatter(instr):
            return False
        operands, _, updates = _parts(instr)
        return operands[0].shape.rank > 0 or all(u.shape.rank == 0 for u in updates)

    def expand_instruction(self, scatter: HloInstruction) -> HloInstruction:
        a = scatter.attrs
        comp = scatter.parent
        operands, indices, updates = _parts(scatter)
        combiner = a["to_apply"]
        rank = operands[0].shape.rank
        if rank == 0:
            result = inline_into(comp, combiner, list(operands) + list(updates))
            return result
        indices = transform_start_indices(indices, a["index_vector_dim"])
        window, inserted = tuple(a.get("update_window_dims", ())), tuple(a.get("inserted_window_dims", ()))
        new_updates = [flatten_and_transpose_updates(u, window, inserted) for u in updates]
        attrs = {"update_window_dims": tuple(range(1, rank + 1)), "inserted_window_dims": (),
                 "scatter_dims_to_operand_dims": tuple(a["scatter_dims_to_operand_dims"]),
                 "index_vector_dim": 1, "to_apply": combiner}
        for flag in ("indices_are_sorted", "unique_indices"):
            if a.get(flag):
                attrs[flag] = True
        shape = operands[0].shape if len(operands) == 1 else Shape.tuple_of([o.shape for o in operands])
        return comp.add_new_instruction("scatter", list(operands) + [indices] + new_updates, shape, attrs)
