"""Reduction geometry: a reduce as three numbers, row or column, and the bounds within which the
emitters need no atomics (XLA's `xla/service/gpu/reduction_utils.cc`).

Where it sits: the fusion analysis (`hlo_fusion_analysis`) decides reduction emitters by these
facts; hlo-opt's reduction passes and fusion rules and hlo-codegen's reduction emitters ask them
directly. Layouts are normalized on the fly: reductions are described in physical dimension
order, as XLA sees them after layout normalization.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.gpu.ir_emission_utils import physical_dims
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape

MIN_THREADS_X_ROW_REDUCTION = 1024
ROW_REDUCTION_TILE = (1, 1, 16)           # GetReductionTiling, row: 16 minor elements per thread
COLUMN_REDUCTION_TILE = (1, 128, 1)
BATCHED_REDUCTION_RACE_FREE_BOUND = 8


@dataclass(frozen=True)
class ReductionDimensions:
    """XLA's ReductionDimensions: row = [batch (major reduced), kept, minor reduced];
    column = [major kept, reduced, minor kept]."""

    is_row: bool
    dims: tuple[int, int, int]


def _dims_consecutive(shape: Shape, dims) -> bool:
    """LayoutUtil::AreDimensionsConsecutive: `dims` are adjacent in the layout."""
    dims = set(dims)
    positions = sorted(k for k, d in enumerate(physical_dims(shape)) if d in dims)
    return not positions or positions[-1] - positions[0] + 1 == len(positions)


def _partition_by_middle(shape: Shape, middle) -> tuple[int, int, int]:
    """PartitionShapeByMiddleDimensions: (product before, of, after) the middle dims, physically."""
    middle = set(middle)
    out = [1, 1, 1]
    seg = 0
    for d in physical_dims(shape):
        if d in middle:
            seg = 1
            out[1] *= shape.dims[d]
        else:
            out[2 if seg else 0] *= shape.dims[d]
    return out[0], out[1], out[2]


def reduction_dimensions(reduce: HloInstruction) -> ReductionDimensions:
    """XLA's GetReductionKindAndContiguousComponents."""
    shape = reduce.operands[0].shape
    reduced = set(reduce.attrs["dimensions"])
    kept = [d for d in range(shape.rank) if d not in reduced]
    if not kept or all(shape.dims[d] == 1 for d in kept):
        return ReductionDimensions(True, (1, 1, shape.num_elements))
    if _dims_consecutive(shape, kept):
        a, b, c = _partition_by_middle(shape, kept)
        if b == 1:
            return ReductionDimensions(True, (1, 1, a * c))
        if c == 1:
            return ReductionDimensions(False, (1, a, b))
        return ReductionDimensions(True, (a, b, c))
    a, b, c = _partition_by_middle(shape, reduced)
    if c == 1:
        return ReductionDimensions(True, (1, a, b))
    return ReductionDimensions(False, (a, b, c))


def is_unnested_reduction_faster_than_elemental(rd: ReductionDimensions, warp: int = 32) -> bool:
    if rd.is_row:
        return rd.dims[2] >= warp or warp % rd.dims[2] == 0
    major, minor = rd.dims[1], rd.dims[2]
    prefer_elemental = (major < warp or (major < 2 * warp and minor < warp)
                        or (major < 4 * warp and minor < 8) or (major < 8 * warp and minor < 3))
    return not prefer_elemental


def is_reduction_from_or_to_contiguous_dimensions(instr: HloInstruction, warp: int = 32) -> bool:
    if instr.opcode != "reduce":
        return False
    shape = instr.operands[0].shape
    reduced = list(instr.attrs["dimensions"])
    kept = [d for d in range(shape.rank) if d not in set(reduced)]
    if not (_dims_consecutive(shape, kept) or _dims_consecutive(shape, reduced)):
        return False
    return is_unnested_reduction_faster_than_elemental(reduction_dimensions(instr), warp)


def reduction_dimension_race_free_bound(rd: ReductionDimensions, warp: int = 32) -> int:
    """XLA's ReductionDimensionRaceFreeBound: the most reduced elements one kernel reduces without
    atomics (row: 1024 threads * 16 minor elements; column: a warp * 128 reduced rows)."""
    if rd.is_row:
        return MIN_THREADS_X_ROW_REDUCTION * ROW_REDUCTION_TILE[2]
    return warp * COLUMN_REDUCTION_TILE[1]


def reduction_is_race_free(rd: ReductionDimensions, warp: int = 32) -> bool:
    """XLA's ReductionIsRaceFree: the emitter needs no atomics (row: minor <= 1024 * 16 and batch
    <= 8; column: reduced <= 32 * 128)."""
    bound = reduction_dimension_race_free_bound(rd, warp)
    if rd.is_row:
        return rd.dims[2] <= bound and rd.dims[0] <= BATCHED_REDUCTION_RACE_FREE_BOUND
    return rd.dims[1] <= bound


def is_real_reduction_hero(root: HloInstruction, hero: HloInstruction, warp: int = 32) -> bool:
    """XLA's IsRealReductionHero: a contiguous reduce that the reduction emitter handles, and
    either the root itself or race-free (an epilogue needs the whole result in one block)."""
    if not is_reduction_from_or_to_contiguous_dimensions(hero, warp):
        return False
    return root is hero or reduction_is_race_free(reduction_dimensions(hero), warp)


def reduction_shared_memory_bytes(reduce: HloInstruction) -> int:
    """What XLA's SharedMemoryUsage budgets for one unnested reduce: 32 elements for a row
    reduction (one per warp), 4 x 32 x 33 for a column reduction (the tile at the widest vector),
    per input of a variadic reduce (their element sizes summed, as XLA)."""
    inputs = reduce.operands[:len(reduce.operands) // 2]
    size = sum(op.shape.element_type.byte_size for op in inputs)
    if reduction_dimensions(reduce).is_row:
        return 32 * size
    return 4 * 32 * 33 * size


__all__ = [
    "BATCHED_REDUCTION_RACE_FREE_BOUND", "ReductionDimensions", "is_real_reduction_hero",
    "is_reduction_from_or_to_contiguous_dimensions", "is_unnested_reduction_faster_than_elemental",
    "reduction_dimension_race_free_bound", "reduction_dimensions", "reduction_is_race_free",
    "reduction_shared_memory_bytes",
]
