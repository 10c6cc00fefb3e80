"""spmd-partitioning of gather and scatter (`hlo_opt.spmd.gather_handlers`), after XLA's
xla/service/spmd/spmd_partitioner_test.cc cases (GatherIndexOnlyPartitioned,
GatherPartitionedOnTrivialSliceDims, PassthroughGather, PassthroughScatter,
ScatterPartitionedOnTrivialSliceDims): the collectives, the per-device result shape, and the
numbers on N interpreter devices against the unpartitioned module (indices include negative and
out-of-range values, which gather clamps and scatter skips)."""

from __future__ import annotations

import numpy as np
import pytest
from spmd_testlib import check_partitioned


ADD = """add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""

CASES = {
    # XLA: the gather runs on the local indices, no collective
    "GatherIndexOnlyPartitioned": (4, """HloModule module
ENTRY entry {
  %input = f32[16,8] parameter(0), sharding={replicated}
  %indices = s32[8,1] parameter(1), sharding={devices=[4,1]<=[4]}
  ROOT %gather = f32[8,8] gather(%input, %indices), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}, sharding={devices=[4,1]<=[4]}
}""", "f32[2,8]", []),
    # XLA: indices shifted by the partition's first row, out-of-tile rows zeroed, all-reduce
    "GatherPartitionedOnTrivialSliceDims": (2, """HloModule module
ENTRY entry {
  %input = f32[64,4] parameter(0), sharding={devices=[2,1]0,1}
  %indices = s32[6] parameter(1), sharding={replicated}
  ROOT %gather = f32[6,4] gather(%input, %indices), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, sharding={replicated}
}""", "f32[6,4]", ["all-reduce"]),
    # a 2-D mesh: indices split by batch over one axis, the table by rows over the other; each
    # device looks up its batch slice in its rows and one all-reduce per batch tile sums them
    "GatherBatchSplitTrivialSliceSplit": (4, """HloModule module
ENTRY entry {
  %input = f32[32,4] parameter(0), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  %indices = s32[8,1] parameter(1), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
  ROOT %gather = f32[8,4] gather(%input, %indices), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
}""", "f32[4,4]", ["all-reduce"]),
    # a two-component index vector, the operand split along the first indexed dim
    "GatherTrivialSliceDimOfTwoIndexed": (2, """HloModule module
ENTRY entry {
  %input = f32[8,6] parameter(0), sharding={devices=[2,1]0,1}
  %indices = s32[5,2] parameter(1), sharding={replicated}
  ROOT %gather = f32[5] gather(%input, %indices), offset_dims={}, collapsed_slice_dims={0,1},
    start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}, sharding={replicated}
}""", "f32[5]", ["all-reduce"]),
    # the table split by columns: each device gathers its columns
    "PassthroughGather": (2, """HloModule module
ENTRY entry {
  %input = f32[16,8] parameter(0), sharding={devices=[1,2]0,1}
  %indices = s32[6,1] parameter(1), sharding={replicated}
  ROOT %gather = f32[6,8] gather(%input, %indices), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}, sharding={devices=[1,2]0,1}
}""", "f32[6,4]", []),
    "PassthroughScatter": (2, "HloModule module\n" + ADD + """ENTRY entry {
  %input = f32[16,8] parameter(0), sharding={devices=[1,2]0,1}
  %indices = s32[6] parameter(1), sharding={replicated}
  %updates = f32[6,8] parameter(2), sharding={devices=[1,2]0,1}
  ROOT %scatter = f32[16,8] scatter(%input, %indices, %updates), update_window_dims={1},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add,
    sharding={devices=[1,2]0,1}
}""", "f32[16,4]", []),
    # updates split by batch into a small table (an embedding's gradient): each device scatters
    # its updates into zeros, one all-reduce of the table, the operand added (XLA: the same)
    "ScatterBatchSplitUpdates": (4, "HloModule module\n" + ADD + """ENTRY entry {
  %input = f32[4,3] parameter(0), sharding={replicated}
  %indices = s32[64,1] parameter(1), sharding={devices=[4,1]<=[4]}
  %updates = f32[64,3] parameter(2), sharding={devices=[4,1]<=[4]}
  ROOT %scatter = f32[4,3] scatter(%input, %indices, %updates), update_window_dims={1},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add,
    sharding={replicated}
}""", "f32[4,3]", ["all-reduce"]),
    # XLA: the updates' indices shifted per partition; updates outside the tile are skipped
    "ScatterPartitionedOnTrivialSliceDims": (4, "HloModule module\n" + ADD + """ENTRY entry {
  %input = f32[16,3] parameter(0), sharding={devices=[4,1]<=[4]}
  %indices = s32[6,1] parameter(1), sharding={replicated}
  %updates = f32[6,3] parameter(2), sharding={replicated}
  ROOT %scatter = f32[16,3] scatter(%input, %indices, %updates), update_window_dims={1},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add,
    sharding={devices=[4,1]<=[4]}
}""", "f32[4,3]", []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_partitioned_collectives_shape_and_numbers(name):
    n, text, local, collectives = CASES[name]
    rng = np.random.default_rng(13)

    def args_for(params):
        args = []
        for p in params:
            if p.shape.element_type.name == "s32":  # negative and out-of-range indices at both ends too
                rows = params[0].shape.dims[0]
                values = rng.integers(0, rows, p.shape.dims).reshape(-1)
                values[:3] = [-2, rows + 1, rows - 1]
                args.append(np.asarray(values.reshape(p.shape.dims), np.int32))
            else:
                args.append(np.asarray(rng.standard_normal(p.shape.dims), np.float32))
        return args

    check_partitioned(text, n, name, local, collectives, args_for, 1e-6)
