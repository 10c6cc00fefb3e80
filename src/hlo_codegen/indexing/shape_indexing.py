"""Index maps between shapes: linearize/delinearize, reshape, transpose, layouts and bitcasts.

Where it sits: op_indexing.py builds the reshape, transpose and bitcast maps from these; the
loop emitter and buffer code use `linearize` / `physical_to_logical` to go from logical indices
to a flat buffer offset. Reshape maps follow XLA's `ComputeReshapeIndexingMap`: the two shapes
are cut into the shortest runs with equal element counts, and each run is mapped as unchanged,
expanded (linearize), collapsed (delinearize) or both, which keeps maps small
(`f32[4,8,12] -> f32[32,3,4]` is `(d0 floordiv 8, d0 mod 8, d1 * 4 + d2)`).

    >>> str(reshape_map((4, 8), (32,)))
    '(d0) -> (d0 floordiv 8, d0 mod 8), domain: d0 in [0, 31]'
"""

from __future__ import annotations

from typing import Sequence

from hlo_codegen.indexing.affine import AffineExpr, const, dim
from hlo_codegen.indexing.indexing_map import IndexingMap, compose_indexing_maps
from hlo_common.hlo.shape import Shape


def strides(dims: Sequence[int]) -> list[int]:
    """Row-major strides: `strides((2, 3, 4)) == [12, 4, 1]`."""
    out = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        out[i] = out[i + 1] * dims[i + 1]
    return out


def linearize(dims: Sequence[int], exprs: Sequence[AffineExpr]) -> AffineExpr:
    """Row-major linear index of the multi-index `exprs` in a tensor of shape `dims`."""
    linear = const(0)
    for stride, e in zip(strides(dims), exprs):
        linear = linear + e * stride
    return linear


def delinearize(dims: Sequence[int], linear: AffineExpr) -> list[AffineExpr]:
    """Multi-index of a row-major linear index (no bounds assumed: `floordiv` then `mod`)."""
    out, rest = [], linear
    for stride in strides(dims):
        out.append(rest.floordiv(stride))
        rest = rest % stride
    return out


def delinearize_in_bounds(dims: Sequence[int], linear: AffineExpr) -> list[AffineExpr]:
    """Like `delinearize`, for a linear index known to be in bounds (XLA's DelinearizeInBoundsIndex)."""
    if 0 in dims:
        return [const(0) for _ in dims]
    st = strides(dims)
    out = [linear.floordiv(s) % n for s, n in zip(st, dims)]
    for i, n in enumerate(dims):
        if n > 1:
            out[i] = linear.floordiv(st[i])
            break
    return out


def _minimal_reshape(in_dims: list[int], out_dims: list[int], out_exprs: list[AffineExpr]):
    if len(in_dims) == 1 and len(out_dims) == 1:
        return list(out_exprs)
    if len(in_dims) == 1:
        return [linearize(out_dims, out_exprs)]
    if len(out_dims) == 1:
        return delinearize(in_dims, out_exprs[0])
    return delinearize(in_dims, linearize(out_dims, out_exprs))


def reshape_exprs(input_dims: Sequence[int], output_dims: Sequence[int]) -> list[AffineExpr]:
    """Output-to-input expressions (over output dims d_i) of a reshape `input -> output`."""
    if any(d == 0 for d in input_dims):
        return [const(0) for _ in input_dims]
    exprs: list[AffineExpr] = []
    in_sub: list[int] = []
    out_sub: list[int] = []
    out_exprs: list[AffineExpr] = []
    in_n = out_n = 1
    i = o = 0
    while i < len(input_dims) or o < len(output_dims) or in_sub:
        if i < len(input_dims) and (not in_sub or in_n < out_n):
            in_n *= input_dims[i]
            in_sub.append(input_dims[i])
            i += 1
            continue
        if o < len(output_dims) and (not out_sub or out_n < in_n):
            out_n *= output_dims[o]
            out_sub.append(output_dims[o])
            out_exprs.append(dim(o))
            o += 1
            continue
        exprs.extend(_minimal_reshape(in_sub, out_sub, out_exprs))
        in_n = out_n = 1
        in_sub, out_sub, out_exprs = [], [], []
    return exprs


def reshape_map(input_dims: Sequence[int], output_dims: Sequence[int]) -> IndexingMap:
    """Output-to-input map of a reshape, simplified with point dimensions preserved (as XLA)."""
    m = IndexingMap.from_tensor_sizes(reshape_exprs(input_dims, output_dims), output_dims)
    return m.simplify(preserve_point_dims=True)


def transpose_map(permutation: Sequence[int], dims: Sequence[int]) -> IndexingMap:
    """`(d...) -> (d_{permutation[0]}, d_{permutation[1]}, ...)` over a tensor of shape `dims`."""
    return IndexingMap.from_tensor_sizes([dim(p) for p in permutation], dims)


def inverse_permutation(permutation: Sequence[int]) -> list[int]:
    inv = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inv[p] = i
    return inv


def major_to_minor(shape: Shape) -> list[int]:
    return list(reversed(shape.minor_to_major))


def physical_dims(shape: Shape) -> list[int]:
    """Dimensions in memory order, major to minor (XLA's descending-layout equivalent shape)."""
    return [shape.dims[d] for d in major_to_minor(shape)]


def logical_to_physical(shape: Shape) -> IndexingMap:
    """Logical multi-index of `shape` -> its index in the physical (major-to-minor) shape."""
    return transpose_map(major_to_minor(shape), shape.dims)


def physical_to_logical(shape: Shape) -> IndexingMap:
    """Physical (major-to-minor) multi-index -> logical multi-index of `shape`."""
    return transpose_map(inverse_permutation(major_to_minor(shape)), physical_dims(shape))


def logical_to_linear(shape: Shape) -> IndexingMap:
    """Logical multi-index -> element offset in the buffer (layout-aware, row-major physically)."""
    phys = physical_dims(shape)
    linear = IndexingMap.from_tensor_sizes([linearize(phys, [dim(i) for i in range(len(phys))])], phys)
    return compose_indexing_maps(logical_to_physical(shape), linear).simplify()


def bitcast_map(from_shape: Shape, to_shape: Shape) -> IndexingMap:
    """Map from indices of `from_shape` to the indices of `to_shape` holding the same bytes.

    A bitcast reinterprets the buffer, so the map goes through the physical layouts:
    logical(from) -> physical(from) -> reshape -> physical(to) -> logical(to). Pure transposes
    and pure reshapes come out as XLA's transpose / reshape maps. Undefined when the element
    counts differ."""
    if from_shape.num_elements != to_shape.num_elements:
        return IndexingMap.undefined()
    from_phys, to_phys = physical_dims(from_shape), physical_dims(to_shape)
    reshape = IndexingMap.from_tensor_sizes(reshape_exprs(to_phys, from_phys), from_phys)
    m = compose_indexing_maps(logical_to_physical(from_shape), reshape)
    m = compose_indexing_maps(m, physical_to_logical(to_shape))
    return m.simplify(preserve_point_dims=True)
