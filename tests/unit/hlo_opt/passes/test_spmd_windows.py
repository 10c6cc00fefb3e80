"""spmd-partitioning of slice, pad, concatenate, dynamic-slice, dynamic-update-slice and iota
(`hlo_opt.spmd.window_handlers`): cases after XLA's xla/service/spmd/spmd_partitioner_test.cc
(SliceAlongPartitionedDimension, PadAlongPartitionedDimension, ConcatenateAlongPartitionedDimension,
DynamicSliceAlongNonPartitionedDimension, DynamicUpdateSliceAlongNonPartitionedDimension,
PartitionIota...), with even shapes where XLA's use uneven ones. Each checks the collectives the
partitioned program holds and the per-device result shape, and runs it: on N interpreter devices
from random global arguments it must give what the unpartitioned module gives on one device."""

from __future__ import annotations

import numpy as np
import pytest
from spmd_testlib import check_partitioned, collective_opcodes, partition, run_global

from hlo_common.hlo.parser import parse_module

MAX = """max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] maximum(x, y)
}
"""

# name: (devices, module, the root's per-device shape, the collectives (sorted))
CASES = {
    # XLA: slice(dynamic-slice(concatenate(slice(p), collective-permute(slice(p))))): one halo
    "SliceAlongPartitionedDimension": (2, """HloModule module
ENTRY entry {
  %param0 = f32[16,6,20] parameter(0), sharding={devices=[1,1,2]0,1}
  ROOT %slice = f32[7,6,14] slice(%param0), slice={[2:16:2], [0:6:1], [5:19:1]}, sharding={devices=[1,1,2]0,1}
}""", "f32[7,6,7]", ["collective-permute"]),
    "SliceAlongNonPartitionedDimension": (2, """HloModule module
ENTRY entry {
  %param0 = f32[16,14,20] parameter(0), sharding={devices=[1,1,2]0,1}
  ROOT %slice = f32[16,11,20] slice(%param0), slice={[0:16], [2:13], [0:20]}, sharding={devices=[1,1,2]0,1}
}""", "f32[16,11,10]", []),
    "SliceWindowSpansTwoNeighbours": (4, """HloModule module
ENTRY entry {
  %p = f32[16,3] parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT %s = f32[4,3] slice(%p), slice={[10:14], [0:3]}, sharding={devices=[4,1]<=[4]}
}""", "f32[1,3]", ["collective-permute", "collective-permute"]),
    # each device's window lies within its own tile plus the padding: no halo at all
    "PadAlongPartitionedDimension": (2, """HloModule module
ENTRY entry {
  %param0 = f32[14,256] parameter(0), sharding={devices=[1,2]0,1}
  %const = f32[] constant(0)
  ROOT %pad = f32[14,260] pad(%param0, %const), padding=0_0x2_2, sharding={devices=[1,2]0,1}
}""", "f32[14,130]", []),
    "PadWithNonZeroValueOnFourDevices": (4, """HloModule module
ENTRY entry {
  %p = f32[8,5] parameter(0), sharding={devices=[4,1]<=[4]}
  %v = f32[] constant(-3)
  ROOT %pad = f32[12,7] pad(%p, %v), padding=3_1x1_1, sharding={devices=[4,1]<=[4]}
}""", "f32[3,7]", ["collective-permute"]),
    "NegativePadAlongPartitionedDimension": (2, """HloModule module
ENTRY entry {
  %p = f32[12,4] parameter(0), sharding={devices=[2,1]0,1}
  %v = f32[] constant(1)
  ROOT %pad = f32[8,4] pad(%p, %v), padding=-1_-3x0_0, sharding={devices=[2,1]0,1}
}""", "f32[4,4]", ["collective-permute"]),
    "ConcatenateAlongPartitionedDimension": (2, """HloModule module
ENTRY entry {
  %param0 = f32[14,256] parameter(0), sharding={devices=[1,2]0,1}
  %param1 = f32[14,128] parameter(1), sharding={devices=[1,2]0,1}
  ROOT %concatenate = f32[14,384] concatenate(%param0, %param1), dimensions={1}, sharding={devices=[1,2]0,1}
}""", "f32[14,192]", ["collective-permute", "collective-permute"]),
    "ConcatenateAlongNonPartitionedDimension": (2, """HloModule module
ENTRY entry {
  %param0 = f32[14,257] parameter(0), sharding={devices=[2,1]0,1}
  %param1 = f32[14,116] parameter(1), sharding={devices=[2,1]0,1}
  ROOT %concatenate = f32[14,373] concatenate(%param0, %param1), dimensions={1}, sharding={devices=[2,1]0,1}
}""", "f32[7,373]", []),
    "ConcatenateThreeOnFourDevices": (4, """HloModule module
ENTRY entry {
  %a = f32[8,2] parameter(0), sharding={devices=[4,1]<=[4]}
  %b = f32[4,2] parameter(1), sharding={devices=[4,1]<=[4]}
  %c = f32[4,2] parameter(2), sharding={devices=[4,1]<=[4]}
  ROOT %cat = f32[16,2] concatenate(%a, %b, %c), dimensions={0}, sharding={devices=[4,1]<=[4]}
}""", "f32[4,2]", ["collective-permute"] * 8),  # halos of 4+2+1+3 rows; XLA all-reduces all 16
    # jnp.roll: a concatenate of two slices of one array, read from the array itself: every device
    # receives the 3 rows it lacks in one collective-permute (XLA: one collective-permute)
    "RotateIsOneCollectivePermute": (4, """HloModule module
ENTRY entry {
  %a = f32[32,4] parameter(0), sharding={devices=[4,1]<=[4]}
  %lo = f32[3,4] slice(%a), slice={[29:32], [0:4]}
  %hi = f32[29,4] slice(%a), slice={[0:29], [0:4]}
  ROOT %cat = f32[32,4] concatenate(%lo, %hi), dimensions={0}, sharding={devices=[4,1]<=[4]}
}""", "f32[8,4]", ["collective-permute"]),
    # XLA: the dynamic-slice on the whole dims stays local, no collective
    "DynamicSliceAlongNonPartitionedDimension": (2, """HloModule module
ENTRY entry {
  %input = s32[128,64] parameter(0), sharding={devices=[2,1]0,1}
  %index = s32[] parameter(1)
  %trivial_index = s32[] parameter(2)
  ROOT %dynamic-slice = s32[128,2] dynamic-slice(%input, %trivial_index, %index), dynamic_slice_sizes={128,2}, sharding={devices=[2,1]0,1}
}""", "s32[64,2]", []),
    "DynamicUpdateSliceAlongNonPartitionedDimension": (2, """HloModule module
ENTRY entry {
  %input = s32[128,64] parameter(0), sharding={devices=[2,1]0,1}
  %index = s32[] parameter(1)
  %update = s32[128,2] parameter(2), sharding={devices=[2,1]0,1}
  %trivial_index = s32[] parameter(3)
  ROOT %dynamic-update-slice = s32[128,64] dynamic-update-slice(%input, %update, %trivial_index, %index), sharding={devices=[2,1]0,1}
}""", "s32[64,64]", []),
    # the sliced dim is tiled and the slice half of it: made whole (all-gather), sliced, and cut
    # back to the tile locally (as cheap as summing the pieces, which is not taken on a tie)
    "DynamicSliceAlongPartitionedDimension": (2, """HloModule module
ENTRY entry {
  %input = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}
  %index = s32[] parameter(1)
  %zero = s32[] constant(0)
  ROOT %ds = f32[4,4] dynamic-slice(%input, %index, %zero), dynamic_slice_sizes={4,4}, sharding={devices=[2,1]0,1}
}""", "f32[2,4]", ["all-gather"]),
    # a KV cache split along the sequence, one position written at a run-time offset: each
    # device writes the part of the update that lands in its tile, no communication
    "DynamicUpdateSliceAlongPartitionedDimension": (4, """HloModule module
ENTRY entry {
  %cache = f32[2,16,3] parameter(0), sharding={devices=[1,4,1]<=[4]}
  %update = f32[2,3,3] parameter(1), sharding={replicated}
  %pos = s32[] parameter(2)
  %zero = s32[] constant(0)
  ROOT %dus = f32[2,16,3] dynamic-update-slice(%cache, %update, %zero, %pos, %zero), sharding={devices=[1,4,1]<=[4]}
}""", "f32[2,4,3]", []),
    # reading 2 positions out of a sequence split 4 ways: each device cuts what it holds (zeros
    # elsewhere), one all-reduce of the small slice instead of gathering the cache
    "DynamicSliceSmallOfPartitionedDimension": (4, """HloModule module
ENTRY entry {
  %cache = f32[2,32,3] parameter(0), sharding={devices=[1,4,1]<=[4]}
  %pos = s32[] parameter(1)
  %zero = s32[] constant(0)
  ROOT %ds = f32[2,2,3] dynamic-slice(%cache, %zero, %pos, %zero), dynamic_slice_sizes={2,2,3}
}""", "f32[2,2,3]", ["all-reduce"]),
    # XLA: iota(), the local iota plus the partition's offset
    "PartitionIota": (4, """HloModule module
ENTRY entry {
  ROOT %iota = s32[16,3] iota(), iota_dimension=0, sharding={devices=[4,1]<=[4]}
}""", "s32[4,3]", []),
    "IotaFloatOnTheOtherDim": (2, """HloModule module
ENTRY entry {
  ROOT %iota = f32[4,6] iota(), iota_dimension=1, sharding={devices=[1,2]0,1}
}""", "f32[4,3]", []),
    # XLA's ReduceWindowTiled...: max-pooling 3 wide, stride 2, on split rows: each device's
    # window needs one row from its left neighbour (the padding is the init value)
    "ReduceWindowPartitionedRows": (4, "HloModule module\n" + MAX + """ENTRY entry {
  %p = f32[16,6] parameter(0), sharding={devices=[4,1]<=[4]}
  %init = f32[] constant(-inf)
  ROOT %rw = f32[8,6] reduce-window(%p, %init), window={size=3x1 stride=2x1 pad=1_1x0_0}, to_apply=max, sharding={devices=[4,1]<=[4]}
}""", "f32[2,6]", ["collective-permute"]),
    "ReduceWindowTrivialOnSplitDim": (2, "HloModule module\n" + MAX + """ENTRY entry {
  %p = f32[8,6] parameter(0), sharding={devices=[2,1]0,1}
  %init = f32[] constant(0)
  ROOT %rw = f32[8,5] reduce-window(%p, %init), window={size=1x2}, to_apply=max, sharding={devices=[2,1]0,1}
}""", "f32[4,5]", []),
    # propagation carries the tiling through slice and pad: no all-gather in between
    "SlicePadChainPropagated": (2, """HloModule module
ENTRY entry {
  %p = f32[16,4] parameter(0), sharding={devices=[2,1]0,1}
  %s = f32[12,4] slice(%p), slice={[1:13], [0:4]}
  %e = f32[12,4] exponential(%s)
  %z = f32[] constant(0)
  ROOT %pad = f32[16,4] pad(%e, %z), padding=2_2x0_0, sharding={devices=[2,1]0,1}
}""", "f32[8,4]", ["collective-permute"]),  # the slice's one-row halo; the pad's windows are local
}


def _random(rng, shape):
    if shape.element_type.name == "s32":
        return np.asarray(rng.integers(-5, 100, shape.dims), np.int32)
    return np.asarray(rng.standard_normal(shape.dims) * 4, shape.element_type.np_dtype)


@pytest.mark.parametrize("name", sorted(CASES))
def test_partitioned_collectives_shape_and_numbers(name):
    n, text, local, collectives = CASES[name]
    rng = np.random.default_rng(11)
    check_partitioned(text, n, name, local, collectives, lambda ps: [_random(rng, p.shape) for p in ps], 1e-6)


@pytest.mark.parametrize("name", ["DynamicUpdateSliceAlongPartitionedDimension", "DynamicSliceSmallOfPartitionedDimension"])
def test_run_time_offsets_across_tile_edges_and_clamped(name):
    """Offsets inside one tile, across a tile edge, at both ends and past them (clamped)."""
    from hlo_common.interpreter.evaluator import Evaluator

    n, text, _local, _collectives = CASES[name]
    module = partition(text, n, name)
    original = parse_module(text, "original")
    rng = np.random.default_rng(5)
    params = sorted(original.entry.parameters, key=lambda p: p.parameter_number)
    for pos in (-3, 0, 3, 5, 7, 13, 14, 30, 31, 40):
        args = [np.asarray(pos, np.int32) if p.shape.rank == 0 else _random(rng, p.shape) for p in params]
        expected = Evaluator().evaluate(original, list(args))
        (got,) = run_global(module, args, n)
        np.testing.assert_array_equal(got, expected, err_msg=f"pos={pos}")


SORT = """HloModule module
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY entry {
  %keys = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}
  %iota = s32[8,6] iota(), iota_dimension=1
  %sort = (f32[8,6], s32[8,6]) sort(%keys, %iota), dimensions={1}, to_apply=less
  %v = s32[8,6] get-tuple-element(%sort), index=1
  ROOT %r = s32[8,6] negate(%v), sharding={devices=[4,1]<=[4]}
}"""


def test_argsort_along_the_unsplit_dim_runs_on_row_tiles():
    """XLA's HandleSort: keys and values sorted per device along the whole dim, no collective;
    propagation gives the iota and the sort the rows' split."""
    from hlo_common.interpreter.evaluator import Evaluator

    module = partition(SORT, 4, "sort")
    sort = next(i for i in module.entry.instructions if i.opcode == "sort")
    assert sort.shape.to_string(print_layout=False) == "(f32[2,6], s32[2,6])"
    assert collective_opcodes(module) == []
    args = [np.asarray(np.random.default_rng(2).standard_normal((8, 6)), np.float32)]
    expected = Evaluator().evaluate(parse_module(SORT, "original"), list(args))
    (got,) = run_global(module, args, 4)
    np.testing.assert_array_equal(got, expected)
