"""Reduction helpers of the GPU reduction passes (splitter, tree-reduction-rewriter, layout
normalizer, degenerate-dim remover): reading a reduce's inputs and inits and building the reduces
that replace it.

The reduction geometry they decide by (XLA's `reduction_utils.cc`, xla-facts.md section c: a
reduce collapses into three numbers and is a *row* or a *column* reduction, race-free within
fixed bounds) is the one the fusion analysis and the emitters use, `hlo_common.gpu.reduction_utils`;
it is re-exported here for the passes.

    >>> reduction_dimensions(reduce)     # f32[64,1024]{1,0} reduce dims={1}
    ReductionDimensions(is_row=True, dims=(1, 64, 1024))
"""

from __future__ import annotations

from typing import Sequence

from hlo_common.gpu.reduction_utils import (  # noqa: F401  (re-exported for the passes)
    BATCHED_REDUCTION_RACE_FREE_BOUND, ReductionDimensions, is_reduction_from_or_to_contiguous_dimensions,
    reduction_dimension_race_free_bound, reduction_dimensions, reduction_is_race_free,
)
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape


def reduce_inputs(reduce: HloInstruction) -> list[HloInstruction]:
    return reduce.operands[:len(reduce.operands) // 2]


def reduce_inits(reduce: HloInstruction) -> list[HloInstruction]:
    return reduce.operands[len(reduce.operands) // 2:]


def reduce_output_shapes(reduce: HloInstruction) -> list[Shape]:
    return list(reduce.shape.tuple_shapes) if reduce.shape.is_tuple else [reduce.shape]


def make_reduce(before: HloInstruction, inputs: list[HloInstruction], inits: list[HloInstruction],
                dims: Sequence[int], reducer, out_shapes: list[Shape],
                name: str = "reduce") -> HloInstruction:
    """A (possibly variadic) reduce with the given result shapes, added before `before`."""
    shape = out_shapes[0] if len(out_shapes) == 1 else Shape.tuple_of(out_shapes)
    new = before.parent.add_new_instruction(
        "reduce", list(inputs) + list(inits), shape,
        {"dimensions": tuple(sorted(int(d) for d in dims)), "to_apply": reducer}, name=name, before=before)
    new.metadata = list(before.metadata)
    return new


def replace_reduce(reduce: HloInstruction, new: HloInstruction) -> None:
    """Replace `reduce` by `new` of the same shape (tuple outputs are read through GTEs by users)."""
    reduce.parent.replace_instruction(reduce, new)


def bitcast_outputs(new_reduce: HloInstruction, shapes: list[Shape],
                    before: HloInstruction) -> HloInstruction:
    """`new_reduce`'s result(s) bitcast to `shapes`: one bitcast, or a tuple of GTE + bitcast."""
    comp = new_reduce.parent
    if not new_reduce.shape.is_tuple:
        if new_reduce.shape == shapes[0]:
            return new_reduce
        return comp.add_new_instruction("bitcast", [new_reduce], shapes[0], before=before)
    parts = []
    for i, s in enumerate(shapes):
        gte = comp.add_new_instruction("get-tuple-element", [new_reduce], new_reduce.shape.tuple_shapes[i],
                                       {"index": i}, before=before)
        parts.append(comp.add_new_instruction("bitcast", [gte], s, before=before))
    return comp.add_new_instruction("tuple", parts, Shape.tuple_of(shapes), before=before)
