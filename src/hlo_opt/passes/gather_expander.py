"""GatherExpander ("gather_expander"), in XLA:GPU's kEliminateSimpleGathers mode: gathers that read
one slice become a dynamic-slice, gathers whose slice is the whole operand a broadcast.

Runs in every `simplification` round, after gather_simplifier:

    %g = f32[1,3] gather(f32[8,3] %x, s32[1,1] %i), offset_dims={1}, collapsed_slice_dims={0},
         start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
      =>  %g = f32[1,3] reshape(f32[3] reshape(f32[1,3] dynamic-slice(%x, %i0, %zero), ...))

XLA builds a one-trip while loop here that simplify-while-loops then inlines; this pass writes
the loop body directly (the induction variable is 0), which is what the pipeline ends up with.
The start index of each operand dimension is the mapped component of the index vector (0 for
unmapped dimensions); dynamic-slice clamps out-of-range starts exactly as gather does. Declines:
gathers with more than one index (unless the slice is the whole operand), zero-element results,
batching dimensions, fusion computations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.gather_scatter_utils import (
    batch_and_offset_permutation, elide_degenerate_dims, index_vector, start_scalars,
)
from hlo_common.hlo.hlo_creation_utils import make_broadcast, make_constant, make_reshape, make_transpose
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass


def gather_loop_trip_count(gather: HloInstruction) -> int:
    dims = gather.operands[1].shape.dims
    count = 1
    for i, d in enumerate(dims):
        if i != gather.attrs["index_vector_dim"]:
            count *= d
    return count


def gather_is_broadcast(gather: HloInstruction) -> bool:
    return tuple(gather.attrs["slice_sizes"]) == gather.operands[0].shape.dims


def permute_batch_and_offset_dims(result: HloInstruction, offset_dims, output_rank: int) -> HloInstruction:
    return make_transpose(result, batch_and_offset_permutation(offset_dims, output_rank))


@register_pass
@dataclass
class GatherExpander(OpExpanderPass):
    """Turns single-index gathers into dynamic-slices and whole-operand gathers into broadcasts."""

    name = "gather_expander"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return instr.opcode == "gather" and instr.shape.num_elements != 0 \
            and not instr.attrs.get("operand_batching_dims") \
            and (gather_loop_trip_count(instr) == 1 or gather_is_broadcast(instr))

    def expand_instruction(self, gather: HloInstruction) -> HloInstruction:
        a = gather.attrs
        operand, indices = gather.operands
        collapsed = tuple(a.get("collapsed_slice_dims", ()))
        offset_dims = tuple(a.get("offset_dims", ()))
        if gather_is_broadcast(gather):
            if operand.shape.num_elements == 0:
                et = gather.shape.element_type
                zero = make_constant(gather.parent, np.zeros((), et.np_dtype), et)
                return make_broadcast(zero, gather.shape.dims)
            kept = [d for i, d in enumerate(operand.shape.dims) if i not in collapsed]
            return make_broadcast(make_reshape(operand, kept), gather.shape.dims, offset_dims)
        vector = index_vector(indices, a["index_vector_dim"])
        starts = start_scalars(vector, operand.shape.rank, a["start_index_map"])
        sizes = tuple(a["slice_sizes"])
        piece = gather.parent.add_new_instruction(
            "dynamic-slice", [operand] + starts, Shape.array(operand.shape.element_type, sizes),
            {"dynamic_slice_sizes": sizes})
        piece = elide_degenerate_dims(piece, collapsed)
        n_batch = indices.shape.rank - (0 if a["index_vector_dim"] == indices.shape.rank else 1)
        piece = make_reshape(piece, (1,) * n_batch + piece.shape.dims)
        return permute_batch_and_offset_dims(piece, offset_dims, gather.shape.rank)
