"""spmd-partitioning of convolution over batch and feature dims (`hlo_opt.spmd.conv_handlers`;
XLA's xla/service/spmd/convolution_handler.cc and the batch / feature cases of
spmd_partitioner_test.cc): the collectives, the per-device result shape and the numbers on N
interpreter devices against the unpartitioned module."""

from __future__ import annotations

import numpy as np
import pytest
from spmd_testlib import check_partitioned


CASES = {
    # batch split, kernel replicated: local, as XLA
    "ConvBatchPartitioned": (2, """HloModule module
ENTRY entry {
  %lhs = f32[4,6,6,3] parameter(0), sharding={devices=[2,1,1,1]0,1}
  %rhs = f32[3,3,3,5] parameter(1), sharding={replicated}
  ROOT %conv = f32[4,6,6,5] convolution(%lhs, %rhs), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, sharding={devices=[2,1,1,1]0,1}
}""", "f32[2,6,6,5]", []),
    # kernel split by output feature: local, the result split by feature
    "ConvOutputFeaturePartitioned": (4, """HloModule module
ENTRY entry {
  %lhs = f32[2,6,6,3] parameter(0), sharding={replicated}
  %rhs = f32[3,3,3,8] parameter(1), sharding={devices=[1,1,1,4]<=[4]}
  ROOT %conv = f32[2,4,4,8] convolution(%lhs, %rhs), window={size=3x3}, dim_labels=b01f_01io->b01f, sharding={devices=[1,1,1,4]<=[4]}
}""", "f32[2,4,4,2]", []),
    # input and kernel split along the input feature: partial sums, one all-reduce (XLA: the same)
    "ConvInputFeaturePartitioned": (2, """HloModule module
ENTRY entry {
  %lhs = f32[2,5,5,4] parameter(0), sharding={devices=[1,1,1,2]0,1}
  %rhs = f32[3,3,4,3] parameter(1), sharding={devices=[1,1,2,1]0,1}
  ROOT %conv = f32[2,3,3,3] convolution(%lhs, %rhs), window={size=3x3}, dim_labels=b01f_01io->b01f, sharding={replicated}
}""", "f32[2,3,3,3]", ["all-reduce"]),
    # XLA's ConvolutionLhsTiledRhsReplicated: rows split, each device fetches the one-row halos
    # from both neighbours (two collective-permutes), the local convolution runs unpadded
    "ConvSpatialHalo": (4, """HloModule module
ENTRY entry {
  %lhs = f32[2,16,6,3] parameter(0), sharding={devices=[1,4,1,1]<=[4]}
  %rhs = f32[3,3,3,2] parameter(1), sharding={replicated}
  ROOT %conv = f32[2,16,6,2] convolution(%lhs, %rhs), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, sharding={devices=[1,4,1,1]<=[4]}
}""", "f32[2,4,6,2]", ["collective-permute", "collective-permute"]),
    # strided and dilated: windows of (o - 1) * 2 + 5 rows from c * o * 2 - 2
    "ConvSpatialHaloStridedDilated": (2, """HloModule module
ENTRY entry {
  %lhs = f32[1,16,5,2] parameter(0), sharding={devices=[1,2,1,1]0,1}
  %rhs = f32[3,3,2,2] parameter(1), sharding={replicated}
  ROOT %conv = f32[1,8,3,2] convolution(%lhs, %rhs), window={size=3x3 stride=2x2 pad=2_1x1_1 rhs_dilate=2x1}, dim_labels=b01f_01io->b01f, sharding={devices=[1,2,1,1]0,1}
}""", "f32[1,4,3,2]", ["collective-permute"]),
    # rows split, the result wanted split by batch: the halo, then the (smaller) result moved
    # to the batch split by one all-to-all
    "ConvSpatialThenBatch": (2, """HloModule module
ENTRY entry {
  %lhs = f32[2,8,6,3] parameter(0), sharding={devices=[1,2,1,1]0,1}
  %rhs = f32[3,3,3,2] parameter(1), sharding={replicated}
  ROOT %conv = f32[2,8,6,2] convolution(%lhs, %rhs), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, sharding={devices=[2,1,1,1]0,1}
}""", "f32[1,8,6,2]", ["all-to-all", "collective-permute"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_partitioned_collectives_shape_and_numbers(name):
    n, text, local, collectives = CASES[name]
    rng = np.random.default_rng(17)

    def args_for(params):
        return [np.asarray(rng.standard_normal(p.shape.dims), np.float32) for p in params]

    check_partitioned(text, n, name, local, collectives, args_for, 1e-5)
