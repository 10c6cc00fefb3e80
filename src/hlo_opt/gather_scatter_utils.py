"""Reshape/transpose helpers shared by the gather and scatter passes (XLA's
`gather_scatter_utils.cc` and the dimension helpers of `hlo_creation_utils.cc`).

`gather_simplifier`, `scatter_simplifier` and the gather/scatter expanders bring start indices to
the two-dimensional [N, index vector] form and move window dimensions around with these; every
helper returns its operand unchanged when there is nothing to do.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.hlo_creation_utils import make_constant, make_reshape, make_slice, make_transpose


def insert_degenerate_dims(operand: HloInstruction, dims: Sequence[int]) -> HloInstruction:
    """Size-1 dimensions at the (output) positions `dims`."""
    new_dims = list(operand.shape.dims)
    for d in sorted(dims):
        new_dims.insert(d, 1)
    return make_reshape(operand, new_dims)


def elide_degenerate_dims(operand: HloInstruction, dims: Sequence[int]) -> HloInstruction:
    """Drop the size-1 dimensions `dims`."""
    return make_reshape(operand, [d for i, d in enumerate(operand.shape.dims) if i not in dims])


def collapse_first_n_dims(operand: HloInstruction, n: int) -> HloInstruction:
    dims = operand.shape.dims
    size = 1
    for d in dims[:n]:
        size *= d
    return make_reshape(operand, (size,) + tuple(dims[n:]))


def expand_first_dim_into_n_dims(operand: HloInstruction, expanded: Sequence[int]) -> HloInstruction:
    return make_reshape(operand, tuple(expanded) + tuple(operand.shape.dims[1:]))


def move_dimension_to_end(operand: HloInstruction, dimension: int) -> HloInstruction:
    rank = operand.shape.rank
    return make_transpose(operand, [i for i in range(rank) if i != dimension] + [dimension])


def transform_start_indices(indices: HloInstruction, index_vector_dim: int) -> HloInstruction:
    """Start indices as [N, index vector] (XLA's TransformStartIndices)."""
    rank = indices.shape.rank
    if index_vector_dim == rank:
        indices = insert_degenerate_dims(indices, [index_vector_dim])
        rank += 1
    elif index_vector_dim < rank - 1:
        indices = move_dimension_to_end(indices, index_vector_dim)
    if rank > 2:
        indices = collapse_first_n_dims(indices, rank - 1)
    elif rank == 1:
        indices = insert_degenerate_dims(indices, [0])
    return indices


def index_vector(indices: HloInstruction, index_vector_dim: int) -> HloInstruction:
    """The one index vector of a gather/scatter with a single index, as a rank-1 array [k]."""
    canonical = transform_start_indices(indices, index_vector_dim)
    return make_reshape(canonical, canonical.shape.dims[1:])


def start_scalars(vector: HloInstruction, operand_rank: int, dim_map: Sequence[int]) -> list[HloInstruction]:
    """One scalar start index per operand dimension: the mapped component of `vector`, else 0."""
    et = vector.shape.element_type
    zero = None
    starts = []
    for d in range(operand_rank):
        if d in dim_map:
            p = list(dim_map).index(d)
            starts.append(make_reshape(make_slice(vector, [p], [p + 1]), ()))
        else:
            zero = zero or make_constant(vector.parent, np.zeros((), et.np_dtype), et)
            starts.append(zero)
    return starts


def batch_and_offset_permutation(offset_dims: Sequence[int], output_rank: int) -> list[int]:
    """The transpose that takes a gather result laid out [batch dims..., offset dims...] to the
    gather's output order, where `offset_dims` are the offset dims' places."""
    perm, batch, offset = [], 0, output_rank - len(offset_dims)
    for i in range(output_rank):
        if i in offset_dims:
            perm.append(offset)
            offset += 1
        else:
            perm.append(batch)
            batch += 1
    return perm
