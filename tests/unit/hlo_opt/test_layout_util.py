"""Layout arithmetic (hlo_opt.layout_util) against brute force on small shapes: a reshape is a
bitcast exactly when it keeps every element's physical offset (checked on an iota)."""

import itertools

import numpy as np
import pytest

from hlo_common.hlo.shape import Shape
from hlo_opt.layout_util import (
    align_layouts, matrix_layout_ok, normalized, reshape_is_bitcast, transpose_is_bitcast,
)


def _physical(x: np.ndarray, shape: Shape) -> np.ndarray:
    return np.transpose(x, tuple(reversed(shape.minor_to_major))).reshape(-1)


def _is_bitcast_brute_force(src: Shape, dst: Shape) -> bool:
    x = np.arange(src.num_elements).reshape(src.dims)
    return np.array_equal(_physical(x, src), _physical(x.reshape(dst.dims), dst))


def _shapes(dims):
    return [Shape.array("f32", dims, m2m) for m2m in itertools.permutations(range(len(dims)))]


_DIM_PAIRS = [((2, 3), (6,)), ((2, 3, 4), (6, 4)), ((4, 6), (6, 4)), ((2, 1, 3), (3, 2)), ((1, 6), (2, 3)),
              ((2, 2, 3), (4, 3)), ((3, 4), (2, 6)), ((2, 3, 1), (2, 1, 3)), ((4,), (2, 1, 2))]


@pytest.mark.parametrize("src_dims,dst_dims", _DIM_PAIRS)
def test_reshape_is_bitcast_matches_brute_force(src_dims, dst_dims):
    for src in _shapes(src_dims):
        for dst in _shapes(dst_dims):
            assert reshape_is_bitcast(src, dst) == _is_bitcast_brute_force(src, dst), (src, dst)


@pytest.mark.parametrize("src_dims,dst_dims", _DIM_PAIRS)
def test_align_layouts_finds_a_bitcast_layout_when_one_exists(src_dims, dst_dims):
    for src in _shapes(src_dims):
        aligned = align_layouts(src, Shape.array("f32", dst_dims))
        exists = any(_is_bitcast_brute_force(src, dst) for dst in _shapes(dst_dims))
        assert (aligned is not None) == exists, src
        if aligned is not None:
            assert _is_bitcast_brute_force(src, aligned)


def test_normalized_shapes_hold_the_same_bytes():
    for shape in _shapes((2, 3, 4)):
        x = np.arange(24).reshape(2, 3, 4)
        norm = normalized(shape)
        assert norm.minor_to_major == (2, 1, 0)
        # normalized == transpose(x, physical order), laid out row-major: same bytes as x in `shape`
        assert np.array_equal(np.transpose(x, tuple(reversed(shape.minor_to_major))).reshape(-1),
                              _physical(x, shape))


def test_transpose_is_bitcast():
    src = Shape.array("f32", (4, 8), (1, 0))
    assert transpose_is_bitcast(src, Shape.array("f32", (8, 4), (0, 1)), (1, 0))
    assert not transpose_is_bitcast(src, Shape.array("f32", (8, 4), (1, 0)), (1, 0))


@pytest.mark.parametrize("m2m,ok", [((2, 1, 0), True), ((1, 2, 0), True), ((2, 0, 1), True),
                                    ((1, 0, 2), True), ((0, 2, 1), False), ((0, 1, 2), False)])
def test_matrix_layouts_follow_xla_matmul_utils(m2m, ok):
    # XLA's GetMatrixLayoutTest: batch 0, rows 1, cols 2; batch must not be the most minor dim.
    assert matrix_layout_ok(Shape.array("f32", (3, 4, 5), m2m), (0,), (1,), (2,)) is ok


def test_matrix_layout_groups_must_be_contiguous():
    shape = Shape.array("f32", (2, 3, 4, 5), (3, 1, 2, 0))  # rows {1,2} split by cols dim 3
    assert not matrix_layout_ok(shape, (0,), (1, 2), (3,))
    assert matrix_layout_ok(shape.with_layout((3, 2, 1, 0)), (0,), (1, 2), (3,))
