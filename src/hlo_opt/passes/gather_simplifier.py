"""GatherSimplifier ("gather_simplifier"): every gather in the canonical form the GPU emitter reads.

Runs in every `simplification` round. Canonical: start indices of shape [N, k] with
index_vector_dim=1, no collapsed slice dimensions, and offset dims 1..rank (the result is
[N, slice sizes...]). Any other gather is rebuilt around a canonical one:

    %g = f32[5,3] gather(f32[8,3] %x, s32[5] %i), offset_dims={1}, collapsed_slice_dims={0},
         start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
      =>
    %c = f32[5,1,3] gather(%x, s32[5,1] reshape(%i)), offset_dims={1,2}, collapsed_slice_dims={},
         start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
    %g = f32[5,3] reshape(%c)

The indices are reshaped/transposed to [N, k]; afterwards the collapsed dimensions are removed,
the batch dimension is expanded back to the indices' shape (or dropped when there is none) and
the offset dimensions are transposed into their places. A gather with a zero slice size becomes a
broadcast of zero, one from a scalar a broadcast of it. Declines: gathers with batching dimensions
(BatchedGatherScatterNormalizer's job), canonical gathers, fusion computations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.gather_scatter_utils import (
    batch_and_offset_permutation, elide_degenerate_dims, expand_first_dim_into_n_dims,
    transform_start_indices,
)
from hlo_common.hlo.hlo_creation_utils import make_broadcast, make_constant, make_transpose
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass


def is_simplified_gather(gather: HloInstruction) -> bool:
    a = gather.attrs
    offset = tuple(a.get("offset_dims", ()))
    if len(offset) + len(a.get("collapsed_slice_dims", ())) == 0:
        return False
    return gather.operands[1].shape.rank == 2 and a.get("index_vector_dim") == 1 \
        and not a.get("collapsed_slice_dims") and offset[0] == 1 and offset[-1] == len(offset)


@register_pass
@dataclass
class GatherSimplifier(OpExpanderPass):
    """Rewrites gathers into the canonical [N, k]-indices form plus reshapes and a transpose."""

    name = "gather_simplifier"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return instr.opcode == "gather" and not instr.attrs.get("operand_batching_dims") \
            and not is_simplified_gather(instr)

    def expand_instruction(self, gather: HloInstruction) -> HloInstruction:
        a = gather.attrs
        comp = gather.parent
        et = gather.shape.element_type
        slice_sizes = tuple(a["slice_sizes"])
        if 0 in slice_sizes:
            return make_broadcast(make_constant(comp, np.zeros((), et.np_dtype), et), gather.shape.dims)
        offset_dims, collapsed = tuple(a.get("offset_dims", ())), tuple(a.get("collapsed_slice_dims", ()))
        operand, indices = gather.operands
        if len(offset_dims) + len(collapsed) == 0:
            return make_broadcast(operand, gather.shape.dims)
        indices = transform_start_indices(indices, a["index_vector_dim"])
        shape = Shape.array(et, (indices.shape.dims[0],) + slice_sizes)
        attrs = {"offset_dims": tuple(range(1, len(slice_sizes) + 1)), "collapsed_slice_dims": (),
                 "start_index_map": tuple(a["start_index_map"]), "index_vector_dim": 1,
                 "slice_sizes": slice_sizes}
        if a.get("indices_are_sorted"):
            attrs["indices_are_sorted"] = True
        result = comp.add_new_instruction("gather", [operand, indices], shape, attrs)
        if collapsed:
            result = elide_degenerate_dims(result, [d + 1 for d in collapsed])
        original = gather.operands[1].shape.dims
        batch_dims = [d for i, d in enumerate(original) if i != a["index_vector_dim"]]
        if len(batch_dims) > 1:
            result = expand_first_dim_into_n_dims(result, batch_dims)
        elif not batch_dims:
            result = elide_degenerate_dims(result, [0])
        rank = len(batch_dims) + len(offset_dims)
        return make_transpose(result, batch_and_offset_permutation(offset_dims, rank))
