"""The loop emitter's thread-id -> output map: the seed's GELU example, XLA's loop test, and a
numeric check that every thread/unroll slot writes the element at its linear id."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_codegen.indexing import (
    IndexingMap, LaunchDimensions, compose, default_thread_id_indexing_map, dim, linearize,
)
from hlo_common.hlo.shape import Shape

GELU_MAP = ("(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
            "(bl_x mod 8) * 512 + th_x * 4 + vector_index), "
            "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]")
GELU_FLAT = ("(th_x, bl_x, vector_index) -> (th_x * 4 + bl_x * 512 + vector_index), "
             "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]")


def gelu_map() -> IndexingMap:
    # bf16[6,512,4096]: 12582912 elements, unroll 4, 128 threads per block -> 24576 blocks.
    return default_thread_id_indexing_map(LaunchDimensions((128,), (24576,)), 4, (6, 512, 4096))


def test_gelu_loop_map_matches_the_seed():
    m = gelu_map()
    assert [v.name for v in m.dim_vars] == ["th_x", "th_y", "th_z", "bl_x", "bl_y", "bl_z"]
    compact = m.remove_unused_vars().rename(range_vars=["vector_index"])
    assert str(compact) == GELU_MAP


def test_gelu_flattened_map_matches_the_seed():
    compact = gelu_map().remove_unused_vars().rename(range_vars=["vector_index"])
    flatten = IndexingMap.from_tensor_sizes([linearize((6, 512, 4096), [dim(0), dim(1), dim(2)])],
                                            (6, 512, 4096))
    flat = compose(compact, flatten).simplify().convert_symbols_to_dims()
    assert str(flat) == GELU_FLAT


def test_broadcast_loop_map_matches_xla():
    # XLA loop_test ThreadIdIndexing for f32[10,20,30]: 6000 elements, 47 blocks of 128.
    m = default_thread_id_indexing_map(LaunchDimensions((128,), (47,)), 1, (10, 20, 30))
    want = ("(th_x, th_y, th_z, bl_x, bl_y, bl_z)[chunk_id, unroll_id] -> ((bl_x * 128 + th_x) floordiv 600, "
            "((bl_x * 128 + th_x) floordiv 30) mod 20, (bl_x * 128 + th_x) mod 30), "
            "domain: th_x in [0, 127], "
            "th_y in [0, 0], th_z in [0, 0], bl_x in [0, 46], bl_y in [0, 0], bl_z in [0, 0], "
            "chunk_id in [0, 0], unroll_id in [0, 0], bl_x * 128 + th_x in [0, 5999]")
    assert str(m) == want


@pytest.mark.parametrize("dims,layout,threads,blocks,unroll", [
    ((5, 7, 3), None, (16,), (4,), 2),          # elements not divisible by the unroll factor
    ((4, 6), (0, 1), (8,), (3,), 1),            # column-major output layout
    ((3, 4, 8), (1, 2, 0), (8, 2), (2, 1), 2),  # 2-d blocks
    ((2, 3, 5), None, (4,), (2,), 3),           # several chunks per thread
    ((64,), None, (4, 2, 2), (2, 2, 1), 2),
])
def test_each_element_written_once_at_its_linear_id(dims, layout, threads, blocks, unroll):
    launch = LaunchDimensions(threads, blocks)
    shape = Shape.array("f32", dims, layout if layout is not None else "default")
    m = default_thread_id_indexing_map(launch, unroll, shape)
    d, s, r = m.evaluate_domain()
    tx, ty, tz = launch.threads_xyz()
    bx, by, bz = launch.blocks_xyz()
    sizes_x, sizes_y = tx * bx, ty * by
    x = d[:, 0] + d[:, 3] * tx
    y = d[:, 1] + d[:, 4] * ty
    z = d[:, 2] + d[:, 5] * tz
    thread = x + y * sizes_x + z * sizes_x * sizes_y
    linear = thread * unroll + s[:, 0] * unroll * launch.launch_bound + s[:, 1]
    n = int(np.prod(dims))
    assert sorted(linear.tolist()) == list(range(n))
    # linear ids follow the layout: unravel in physical (major-to-minor) order
    major_to_minor = list(reversed(shape.minor_to_major))
    phys = np.stack(np.unravel_index(linear, [dims[i] for i in major_to_minor]), axis=1)
    want = np.zeros_like(phys)
    want[:, major_to_minor] = phys
    np.testing.assert_array_equal(r, want)
