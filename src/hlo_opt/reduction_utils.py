"""Reduction geometry of the GPU backend (XLA's `xla/service/gpu/reduction_utils.cc`; xla-facts.md
section c): a reduce collapses into three numbers and is a *row* or a *column* reduction.

- row: `[batch (major reduced), kept, minor reduced]`; race-free when minor <= 1024 * 16 and
  batch <= 8;
- column: `[major kept, reduced, minor kept]`; race-free when reduced <= 32 * 128.

The reduction passes (splitter, tree-reduction-rewriter) use this to decide what to split, so
that the reduction emitters never need atomics.

    >>> reduction_kind_and_contiguous_components(reduce)     # f32[64,1024]{1,0} reduce dims={1}
    ReductionDimensions(is_row_reduction=True, dimensions=(1, 64, 1024))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hlo_common.ir import HloInstruction
from hlo_common.shape import Shape
from hlo_opt.layout_util import are_dimensions_consecutive

WARP_SIZE = 32
MIN_THREADS_X_ROW_REDUCTION = 1024
BATCHED_REDUCTION_RACE_FREE_BOUND = 8
ROW_TILE_X = 16  # minor elements per thread of a row reduction (reduction tiling {z, 1, 16})
COLUMN_TILE_Y = 128  # reduced elements per thread of a column reduction (tiling {1, 128, 1})


@dataclass(frozen=True)
class ReductionDimensions:
    is_row_reduction: bool
    dimensions: tuple[int, int, int]


def _partition_by_middle(shape: Shape, middle: Sequence[int]) -> tuple[int, int, int]:
    """(major, middle, minor) element counts around the consecutive dims `middle`."""
    values = [1, 1, 1]
    segment = 2
    wanted = set(middle)
    for d in shape.minor_to_major:
        if segment == 2 and d in wanted:
            segment = 1
        elif segment == 1 and d not in wanted:
            segment = 0
        values[segment] *= shape.dims[d]
    return values[0], values[1], values[2]


def reduction_kind_and_contiguous_components(reduce: HloInstruction) -> ReductionDimensions:
    """XLA's GetReductionKindAndContiguousComponents."""
    shape = reduce.operands[0].shape
    reduced = set(reduce.attrs.get("dimensions", ()))
    kept = [d for d in range(shape.rank) if d not in reduced]
    if not kept:
        return ReductionDimensions(True, (1, 1, shape.num_elements))
    if are_dimensions_consecutive(shape, kept):
        major, middle, minor = _partition_by_middle(shape, kept)
        if middle == 1:
            return ReductionDimensions(True, (1, 1, major * minor))
        if minor == 1:
            return ReductionDimensions(False, (1, major, middle))
        return ReductionDimensions(True, (major, middle, minor))
    major, middle, minor = _partition_by_middle(shape, sorted(reduced))
    if minor == 1:
        return ReductionDimensions(True, (1, major, middle))
    return ReductionDimensions(False, (major, middle, minor))


def reduction_dimension_race_free_bound(dims: ReductionDimensions) -> int:
    return MIN_THREADS_X_ROW_REDUCTION * ROW_TILE_X if dims.is_row_reduction else WARP_SIZE * COLUMN_TILE_Y


def reduction_is_race_free(dims: ReductionDimensions) -> bool:
    bound = reduction_dimension_race_free_bound(dims)
    if dims.is_row_reduction:
        return dims.dimensions[2] <= bound and dims.dimensions[0] <= BATCHED_REDUCTION_RACE_FREE_BOUND
    return dims.dimensions[1] <= bound


def is_unnested_reduction_faster_than_elemental(dims: ReductionDimensions) -> bool:
    if dims.is_row_reduction:
        minor = dims.dimensions[2]
        return minor >= WARP_SIZE or (minor > 0 and WARP_SIZE % minor == 0)
    major, minor = dims.dimensions[1], dims.dimensions[2]
    prefer_elemental = (major < WARP_SIZE or (major < 2 * WARP_SIZE and minor < WARP_SIZE)
                        or (major < 4 * WARP_SIZE and minor < 8) or (major < 8 * WARP_SIZE and minor < 3))
    return not prefer_elemental


def is_reduction_from_or_to_contiguous_dimensions(reduce: HloInstruction) -> bool:
    """XLA: a row (K, R), column (K, R, K) or batched row (R, K, R) reduction worth its emitter."""
    if reduce.opcode != "reduce":
        return False
    shape = reduce.operands[0].shape
    reduced = list(reduce.attrs.get("dimensions", ()))
    kept = [d for d in range(shape.rank) if d not in reduced]
    if not (are_dimensions_consecutive(shape, kept) or are_dimensions_consecutive(shape, reduced)):
        return False
    return is_unnested_reduction_faster_than_elemental(reduction_kind_and_contiguous_components(reduce))


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
