"""Dot and einsum cases of XLA's xla/service/spmd/spmd_partitioner_test.cc (issue 17, item 6), as
tests/unit/hlo_opt/passes/test_spmd_xla_cases.py does for the other ops: each named after XLA's
TEST_F, with its HLO (big dims cut where noted, to keep the interpreter run small) and device
count, checking the root's per-device shape, the collectives and the dot's (or convolution's)
per-device operand shapes, and running the partitioned program on N interpreter devices against
the unpartitioned module. Where ours moves different data than XLA's, a comment says what XLA does
and why ours sends no more.

XLA cases covered here (18): TiledDot, TiledDotOutputTiled, BatchPartitionedConvolution,
DotOutputFeaturePartitioned, DotPartialDeviceOrder, EinsumBatchPartitioned,
EinsumLHSandOutputBatchPartitioned, EinsumRHSandOutputBatchPartitioned, EinsumOutputBatchPartitioned,
EinsumContractingDimsPartitioned, EinsumContractingDimsPartitionedResultPartiallySliced,
EinsumLHSNonContractingDimsPartitioned, EinsumRHSNonContractingDimsPartitioned,
EinsumOutputLHSNonContractingDimPartitioned, EinsumOutputRHSNonContractingDimPartitioned,
Dot2DPartitionedNonContractingAndContracting0, Dot2DPartitionedNonContractingAndContracting1,
Dot2DPartitionedNonContractingAndContracting2.
"""

from __future__ import annotations

import pytest
from spmd_testlib import check_xla_case

CASES = {
    # XLA: conv(f32[128,32], f32[32,256]) over the split contraction, then an all-reduce of the whole
    # f32[128,256] result (each device sends 32768 floats in a ring). Ours all-gathers the two operands
    # instead (4096 + 8192 floats sent per device, fewer bytes) and convolves them whole.
    "TiledDot": (2, """HloModule module

ENTRY entry {
  %lhs = f32[128,64] parameter(0)
  %lhs.copy = f32[128,64] copy(%lhs), sharding={devices=[1,2]0,1}
  %rhs = f32[64,256] parameter(1)
  %rhs.copy = f32[64,256] copy(%rhs), sharding={devices=[2,1]0,1}
  ROOT %conv = f32[128,256] convolution(%lhs.copy, %rhs.copy),
    dim_labels=bf_io->bf, sharding={replicated}
}""",
        "f32[128,256]", [('all-gather', 'f32[128,64]'), ('all-gather', 'f32[64,256]')]),
    # XLA: the same all-reduce of f32[128,256], then a dynamic-slice to f32[128,128]. Ours: the lhs
    # all-gathered (4096 floats) and the rhs moved to a column split by one all-to-all (4096 floats
    # sent per device) instead of 32768: fewer bytes, the same f32[128,128] result tile.
    "TiledDotOutputTiled": (2, """HloModule module

ENTRY entry {
  %lhs = f32[128,64] parameter(0)
  %lhs.copy = f32[128,64] copy(%lhs), sharding={devices=[1,2]0,1}
  %rhs = f32[64,256] parameter(1)
  %rhs.copy = f32[64,256] copy(%rhs), sharding={devices=[2,1]0,1}
  ROOT %conv = f32[128,256] convolution(%lhs.copy, %rhs.copy),
    dim_labels=bf_io->bf, sharding={devices=[1,2]0,1}
}""",
        "f32[128,128]", [('all-gather', 'f32[128,64]'), ('all-to-all', 'f32[2,32,128]')]),
    # XLA: conv(f32[128,128,256], f32[256,8,1]) -> f32[128,128,8], no collective; ours the same.
    "BatchPartitionedConvolution": (2, """HloModule module

ENTRY entry {
  %lhs = f32[128,256,256] parameter(0)
  %lhs.copy = f32[128,256,256] copy(%lhs), sharding={devices=[1,2,1]0,1}
  %rhs = f32[256,8,1] parameter(1)
  %rhs.copy = f32[256,8,1] copy(%rhs), sharding={replicated}
  ROOT %conv = f32[128,256,8] convolution(%lhs.copy, %rhs.copy),
    window={size=1}, dim_labels=0bf_io0->0bf, sharding={devices=[1,2,1]0,1}
}""",
        "f32[128,128,8]", []),
    # XLA: dot(f32[24,64], f32[19648,64]) -> f32[24,19648], no collective; ours the same.
    "DotOutputFeaturePartitioned": (2, """HloModule module

ENTRY entry {
  %lhs = f32[24,64] parameter(0)
  %lhs.copy = f32[24,64] copy(%lhs), sharding={replicated}
  %rhs = f32[39296,64] parameter(1)
  %rhs.copy = f32[39296,64] copy(%rhs), sharding={devices=[2,1]0,1}
  ROOT %dot = f32[24,39296] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={}, rhs_batch_dims={},
    lhs_contracting_dims={1}, rhs_contracting_dims={1},
    sharding={devices=[1,2]0,1}
}""",
        "f32[24,19648]", []),
    # XLA's f32[16,256,4096] x f32[4096,2048] cut to f32[16,256,64] x f32[64,32] (the same device
    # orders). XLA: all-reduce(dot(f32[16,256,2048], f32[2048,1024])); ours the same on the cut shapes.
    "DotPartialDeviceOrder": (4, """HloModule module

ENTRY entry {
  %lhs = f32[16,256,64] parameter(0), sharding={devices=[1,1,2,2]1,3,0,2 last_tile_dim_replicate}
  %rhs = f32[64,32] parameter(1), sharding={devices=[2,2]3,1,2,0}
  ROOT %dot = f32[16,256,32] dot(%lhs, %rhs),
    lhs_batch_dims={}, rhs_batch_dims={},
    lhs_contracting_dims={2}, rhs_contracting_dims={0},
    sharding={devices=[1,1,2,2]2,3,0,1 last_tile_dim_replicate}
}""",
        "f32[16,256,16]", [('all-reduce', 'f32[16,256,16]')]),
    # XLA's 39296 rows of the rhs cut to 96 here and below. XLA: dot of the batch halves; ours the same.
    "EinsumBatchPartitioned": (2, """HloModule module

ENTRY entry {
  %lhs = f32[32,24,64] parameter(0)
  %lhs.copy = f32[32,24,64] copy(%lhs), sharding={devices=[2,1,1]0,1}
  %rhs = f32[32,96,64] parameter(1)
  %rhs.copy = f32[32,96,64] copy(%rhs), sharding={devices=[2,1,1]0,1}
  ROOT %dot = f32[32,24,96] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={2},
    sharding={devices=[2,1,1]0,1}
}""",
        "f32[16,24,96]", []),
    # XLA: the replicated rhs sliced to the batch half, dot; ours the same.
    "EinsumLHSandOutputBatchPartitioned": (2, """HloModule module

ENTRY entry {
  %lhs = f32[32,24,64] parameter(0)
  %lhs.copy = f32[32,24,64] copy(%lhs), sharding={devices=[2,1,1]0,1}
  %rhs = f32[32,96,64] parameter(1)
  %rhs.copy = f32[32,96,64] copy(%rhs), sharding={replicated}
  ROOT %dot = f32[32,24,96] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={2},
    sharding={devices=[2,1,1]0,1}
}""",
        "f32[16,24,96]", []),
    # XLA: all-to-all of the lhs from its dim-1 split to the batch split, dot; ours the same.
    "EinsumRHSandOutputBatchPartitioned": (2, """HloModule module

ENTRY entry {
  %lhs = f32[32,24,64] parameter(0)
  %lhs.copy = f32[32,24,64] copy(%lhs), sharding={devices=[1,2,1]0,1}
  %rhs = f32[32,96,64] parameter(1)
  %rhs.copy = f32[32,96,64] copy(%rhs), sharding={devices=[2,1,1]0,1}
  ROOT %dot = f32[32,24,96] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={2},
    sharding={devices=[2,1,1]0,1}
}""",
        "f32[16,24,96]", [('all-to-all', 'f32[2,16,12,64]')]),
    # XLA: both replicated operands sliced to the batch half, dot; ours the same.
    "EinsumOutputBatchPartitioned": (2, """HloModule module

ENTRY entry {
  %lhs = f32[32,24,64] parameter(0)
  %lhs.copy = f32[32,24,64] copy(%lhs), sharding={replicated}
  %rhs = f32[32,96,64] parameter(1)
  %rhs.copy = f32[32,96,64] copy(%rhs), sharding={replicated}
  ROOT %dot = f32[32,24,96] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={2},
    sharding={devices=[2,1,1]0,1}
}""",
        "f32[16,24,96]", []),
    # XLA's 128 of the last contracting dim cut to 16 here and below. XLA: two all-reduces, one per
    # split contracting dim (each device sends the f32[32,24,39296] result twice over its pair); ours one
    # all-reduce over all four devices (3/2 of the result in a ring instead of 2: fewer bytes).
    "EinsumContractingDimsPartitioned": (4, """HloModule module

ENTRY entry {
  %lhs = f32[32,24,64,16] parameter(0)
  %lhs.copy = f32[32,24,64,16] copy(%lhs), sharding={devices=[1,1,2,2]0,1,2,3}
  %rhs = f32[32,96,64,16] parameter(1)
  %rhs.copy = f32[32,96,64,16] copy(%rhs), sharding={devices=[1,1,2,2]0,1,2,3}
  ROOT %dot = f32[32,24,96] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2,3}, rhs_contracting_dims={2,3},
    sharding={replicated}
}""",
        "f32[32,24,96]", [('all-reduce', 'f32[32,24,96]')]),
    # XLA: all-reduce(dynamic-slice(all-reduce(dot))) over the two halves of the contraction; ours one
    # all-reduce of f32[32,128] over the four devices, then the slice (in a ring the same bytes as
    # XLA's two, 2 * 3/4 * 4096 = 4096 + 2048 floats, one collective fewer).
    "EinsumContractingDimsPartitionedResultPartiallySliced": (4, """HloModule module

ENTRY entry {
  %lhs = f32[32,64] parameter(0), sharding={devices=[1,4]0,1,2,3}
  %rhs = f32[64,128] parameter(1), sharding={devices=[4,1]0,1,2,3}
  ROOT %dot = f32[32,128] dot(%lhs, %rhs),
    lhs_contracting_dims={1}, rhs_contracting_dims={0},
    sharding={devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}
}""",
        "f32[16,128]", [('all-reduce', 'f32[32,128]')]),
    # XLA: dot(f32[32,12,64,64], f32[32,39296,64]), no collective; ours the same on the cut shapes.
    "EinsumLHSNonContractingDimsPartitioned": (4, """HloModule module

ENTRY entry {
  %lhs = f32[32,24,64,16] parameter(0)
  %lhs.copy = f32[32,24,64,16] copy(%lhs), sharding={devices=[1,2,1,2]0,1,2,3}
  %rhs = f32[32,96,64] parameter(1)
  %rhs.copy = f32[32,96,64] copy(%rhs), sharding={replicated}
  ROOT %dot = f32[32,24,16,96] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={2},
    sharding={devices=[1,2,2,1]0,1,2,3}
}""",
        "f32[32,12,8,96]", []),
    # XLA: dot(f32[32,24,64], f32[32,19648,64,64]), no collective; ours the same on the cut shapes.
    "EinsumRHSNonContractingDimsPartitioned": (4, """HloModule module

ENTRY entry {
  %lhs = f32[32,24,64] parameter(0)
  %lhs.copy = f32[32,24,64] copy(%lhs), sharding={replicated}
  %rhs = f32[32,96,64,16] parameter(1)
  %rhs.copy = f32[32,96,64,16] copy(%rhs), sharding={devices=[1,2,1,2]0,1,2,3}
  ROOT %dot = f32[32,24,96,16] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={2},
    sharding={devices=[1,1,2,2]0,1,2,3}
}""",
        "f32[32,24,48,8]", []),
    # XLA: the replicated lhs sliced to f32[32,12,64,128], dot; ours the same on the cut shapes.
    "EinsumOutputLHSNonContractingDimPartitioned": (2, """HloModule module

ENTRY entry {
  %lhs = f32[32,24,64,16] parameter(0)
  %lhs.copy = f32[32,24,64,16] copy(%lhs), sharding={replicated}
  %rhs = f32[32,96,64,16] parameter(1)
  %rhs.copy = f32[32,96,64,16] copy(%rhs), sharding={replicated}
  ROOT %dot = f32[32,24,96] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2,3}, rhs_contracting_dims={2,3},
    sharding={devices=[1,2,1]0,1}
}""",
        "f32[32,12,96]", []),
    # XLA: the replicated rhs sliced to f32[32,19648,64,128], dot; ours the same on the cut shapes.
    "EinsumOutputRHSNonContractingDimPartitioned": (2, """HloModule module

ENTRY entry {
  %lhs = f32[32,24,64,16] parameter(0)
  %lhs.copy = f32[32,24,64,16] copy(%lhs), sharding={replicated}
  %rhs = f32[32,96,64,16] parameter(1)
  %rhs.copy = f32[32,96,64,16] copy(%rhs), sharding={replicated}
  ROOT %dot = f32[32,24,96] dot(%lhs.copy, %rhs.copy),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2,3}, rhs_contracting_dims={2,3},
    sharding={devices=[1,1,2]0,1}
}""",
        "f32[32,24,48]", []),
    # XLA: each operand made whole along the contraction by an all-reduce of a zero-padded buffer
    # (f32[24,12], f32[16,12]), then the local dot; ours: all-gathers of the same shapes (fewer bytes).
    "Dot2DPartitionedNonContractingAndContracting0": (4, """HloModule module

ENTRY entry {
  %lhs = f32[48,12] parameter(0), sharding={devices=[2,2]0,1,2,3}
  %rhs = f32[32,12] parameter(1), sharding={devices=[2,2]0,2,1,3}
  ROOT %dot = f32[48,32] dot(%lhs, %rhs),
    lhs_batch_dims={}, rhs_batch_dims={},
    lhs_contracting_dims={1}, rhs_contracting_dims={1},
    sharding={devices=[2,2]0,1,2,3}
}""",
        "f32[24,16]", [('all-gather', 'f32[16,12]'), ('all-gather', 'f32[24,12]')]),
    # XLA: the rhs made whole along its rows (f32[32,50]), dot to f32[24,32], all-reduce, dynamic-slice
    # to f32[24,16]; ours: the same rhs all-gather and dot, then one reduce-scatter straight into the
    # f32[24,16] tile (half the bytes of the all-reduce).
    "Dot2DPartitionedNonContractingAndContracting1": (4, """HloModule module

ENTRY entry {
  %lhs = f32[48,100] parameter(0), sharding={devices=[2,2]0,1,2,3}
  %rhs = f32[32,100] parameter(1), sharding={devices=[2,2]0,1,2,3}
  ROOT %dot = f32[48,32] dot(%lhs, %rhs),
    lhs_batch_dims={}, rhs_batch_dims={},
    lhs_contracting_dims={1}, rhs_contracting_dims={1},
    sharding={devices=[2,2]0,1,2,3}
}""",
        "f32[24,16]", [('all-gather', 'f32[32,50]'), ('reduce-scatter', 'f32[24,16]')]),
    # XLA: the lhs sliced to f32[24,100], the rhs made f32[16,100] by a collective-permute and an
    # all-reduce of a zero-padded buffer (about 2400 floats sent per device), dot. Ours: the lhs' column
    # half against the local rhs tile, the f32[48,16] partial sums all-reduced over the contraction pair
    # and moved to the wanted rows by an all-to-all (768 + 384 floats sent per device: fewer bytes).
    "Dot2DPartitionedNonContractingAndContracting2": (4, """HloModule module

ENTRY entry {
  %lhs = f32[48,100] parameter(0), sharding={replicated}
  %rhs = f32[32,100] parameter(1), sharding={devices=[2,2]0,1,2,3}
  ROOT %dot = f32[48,32] dot(%lhs, %rhs),
    lhs_batch_dims={}, rhs_batch_dims={},
    lhs_contracting_dims={1}, rhs_contracting_dims={1},
    sharding={devices=[2,2]0,1,2,3}
}""",
        "f32[24,16]", [('all-reduce', 'f32[48,16]'), ('all-to-all', 'f32[2,24,16]')]),
}

# The dot's (convolution's) per-device signature, as XLA's matchers check it (on the cut shapes)
KEY = {
    "TiledDot": ("convolution", ["f32[128,64], f32[64,256] -> f32[128,256]"]),
    "TiledDotOutputTiled": ("convolution", ["f32[128,64], f32[64,128] -> f32[128,128]"]),
    "BatchPartitionedConvolution": ("convolution", ["f32[128,128,256], f32[256,8,1] -> f32[128,128,8]"]),
    "DotOutputFeaturePartitioned": ("dot", ["f32[24,64], f32[19648,64] -> f32[24,19648]"]),
    "DotPartialDeviceOrder": ("dot", ["f32[16,256,32], f32[32,16] -> f32[16,256,16]"]),
    "EinsumBatchPartitioned": ("dot", ["f32[16,24,64], f32[16,96,64] -> f32[16,24,96]"]),
    "EinsumLHSandOutputBatchPartitioned": ("dot", ["f32[16,24,64], f32[16,96,64] -> f32[16,24,96]"]),
    "EinsumRHSandOutputBatchPartitioned": ("dot", ["f32[16,24,64], f32[16,96,64] -> f32[16,24,96]"]),
    "EinsumOutputBatchPartitioned": ("dot", ["f32[16,24,64], f32[16,96,64] -> f32[16,24,96]"]),
    "EinsumContractingDimsPartitioned": ("dot", ["f32[32,24,32,8], f32[32,96,32,8] -> f32[32,24,96]"]),
    "EinsumContractingDimsPartitionedResultPartiallySliced":
        ("dot", ["f32[32,16], f32[16,128] -> f32[32,128]"]),
    "EinsumLHSNonContractingDimsPartitioned": ("dot", ["f32[32,12,64,8], f32[32,96,64] -> f32[32,12,8,96]"]),
    "EinsumRHSNonContractingDimsPartitioned": ("dot", ["f32[32,24,64], f32[32,48,64,8] -> f32[32,24,48,8]"]),
    "EinsumOutputLHSNonContractingDimPartitioned":
        ("dot", ["f32[32,12,64,16], f32[32,96,64,16] -> f32[32,12,96]"]),
    "EinsumOutputRHSNonContractingDimPartitioned":
        ("dot", ["f32[32,24,64,16], f32[32,48,64,16] -> f32[32,24,48]"]),
    "Dot2DPartitionedNonContractingAndContracting0": ("dot", ["f32[24,12], f32[16,12] -> f32[24,16]"]),
    "Dot2DPartitionedNonContractingAndContracting1": ("dot", ["f32[24,50], f32[32,50] -> f32[24,32]"]),
    "Dot2DPartitionedNonContractingAndContracting2": ("dot", ["f32[48,50], f32[16,50] -> f32[48,16]"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_xla_case(name):
    n, text, root, collectives = CASES[name]
    check_xla_case(text, n, root, collectives, KEY[name])
