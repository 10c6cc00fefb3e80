"""Shape arithmetic the AlgebraicSimplifier needs (XLA's `CommonFactors` in util.cc and the reshape /
bitcast queries of `ShapeUtil`), on dimension tuples and `Shape`s with layouts.

    >>> common_factors((2, 3, 4), (6, 4))
    [(0, 0), (2, 1), (3, 2)]
    >>> dimensions_unmodified_by_reshape((2, 3, 4), (6, 4))
    [(2, 1)]
"""

from __future__ import annotations

import math

from hlo_common.hlo.shape import Shape


def common_factors(a: tuple[int, ...], b: tuple[int, ...]) -> list[tuple[int, int]]:
    """XLA's CommonFactors: the (i, j) bounds where prod(a[:i]) == prod(b[:j]), so the reshape from a
    to b splits into independent groups a[i_k:i_k+1] -> b[j_k:j_k+1]."""
    a, b = tuple(a), tuple(b)
    if a == b:
        return [(i, i) for i in range(len(a) + 1)]
    bounds: list[tuple[int, int]] = []
    i = j = 0
    prior_i = prior_j = -1
    while i < len(a) and j < len(b) and a[i] == b[j]:
        prior_i, prior_j = i, j
        bounds.append((i, j))
        i += 1
        j += 1
    if math.prod(a[i:]) != math.prod(b[j:]):
        return [(0, 0), (len(a), len(b))]
    if math.prod(a[i:]) == 0:
        return bounds + [(i, j), (len(a), len(b))]
    pa = pb = 1
    while True:
        if pa == pb and (i > prior_i or j > prior_j):
            prior_i, prior_j = i, j
            bounds.append((i, j))
            continue
        in_i, in_j = i < len(a), j < len(b)
        if not (in_i or in_j):
            break
        next_a = pa < pb or (in_i and (not in_j or (pa == pb and a[i] <= b[j])))
        next_b = pb < pa or (in_j and (not in_i or (pb == pa and b[j] <= a[i])))
        if next_a:
            pa *= a[i]
            i += 1
        if next_b:
            pb *= b[j]
            j += 1
    return bounds


def dimensions_unmodified_by_reshape(a: tuple[int, ...], b: tuple[int, ...]) -> list[tuple[int, int]]:
    """XLA's DimensionsUnmodifiedByReshape: (input dim, output dim) pairs the reshape passes through."""
    cf = common_factors(a, b)
    return [cf[k] for k in range(len(cf) - 1)
            if cf[k + 1][0] - cf[k][0] == 1 and cf[k + 1][1] - cf[k][1] == 1]


def inserted_or_deleted_1sized_dimensions(a: tuple[int, ...], b: tuple[int, ...]
                                          ) -> tuple[list[int], list[int]] | None:
    """XLA's InsertedOrDeleted1SizedDimensions: (deleted input dims, inserted output dims) when the
    reshape a -> b only removes and adds size-1 dimensions, else None."""
    deleted: list[int] = []
    inserted: list[int] = []
    pairs = dimensions_unmodified_by_reshape(a, b) + [(len(a), len(b))]
    prior = (-1, -1)
    for pair in pairs:
        for d in range(prior[0] + 1, pair[0]):
            if a[d] > 1:
                return None
            deleted.append(d)
        for d in range(prior[1] + 1, pair[1]):
            if b[d] > 1:
                return None
            inserted.append(d)
        prior = pair
    return deleted, inserted


def reshape_leaves_dimensions_unmodified(a: tuple[int, ...], b: tuple[int, ...],
                                         dims) -> list[int] | None:
    """Output positions of the input `dims` when the reshape leaves every one of them unmodified."""
    unmodified = dict(dimensions_unmodified_by_reshape(a, b))
    out = []
    for d in dims:
        if d not in unmodified:
            return None
        out.append(unmodified[d])
    return out


def _strides(shape: Shape) -> list[int]:
    strides = [0] * shape.rank
    step = 1
    for d in shape.minor_to_major:
        strides[d] = step
        step *= shape.dims[d]
    return strides


def _unravel_row_major(k: int, dims: tuple[int, ...]) -> list[int]:
    out = [0] * len(dims)
    for d in range(len(dims) - 1, -1, -1):
        if dims[d]:
            out[d] = k % dims[d]
            k //= dims[d]
    return out


def _unit_indices_agree(src: Shape, dst: Shape) -> bool:
    s_strides, d_strides = _strides(src), _strides(dst)
    for dim in range(src.rank):
        if src.dims[dim] <= 1:
            continue
        logical = math.prod(src.dims[dim + 1:])
        index = _unravel_row_major(logical, dst.dims)
        if s_strides[dim] != sum(i * s for i, s in zip(index, d_strides)):
            return False
    return True


def reshape_is_bitcast(src: Shape, dst: Shape) -> bool:
    """XLA's ShapeUtil::ReshapeIsBitcast: the reshape keeps every element at its physical offset
    (checked on the unit indices of both shapes, which is exact; see shape_util.cc)."""
    if src.element_type is not dst.element_type or src.num_elements != dst.num_elements:
        return False
    if _has_tiles(src) or _has_tiles(dst):
        return False
    if src.num_elements == 0:
        return True
    return _unit_indices_agree(src, dst) and _unit_indices_agree(dst, src)


def transpose_is_bitcast(src: Shape, dst: Shape, perm) -> bool:
    """XLA's ShapeUtil::TransposeIsBitcast: the permuted layout of the result is the operand's."""
    if src.element_type is not dst.element_type or _has_tiles(src) or _has_tiles(dst):
        return False
    return [perm[d] for d in dst.minor_to_major] == list(src.minor_to_major)


def _has_tiles(shape: Shape) -> bool:
    return shape.layout is not None and bool(shape.layout.extras)


def drop_degenerate(dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in dims if d != 1)


def delete_dimensions(dims: tuple[int, ...], remove) -> tuple[int, ...]:
    gone = set(remove)
    return tuple(d for k, d in enumerate(dims) if k not in gone)
