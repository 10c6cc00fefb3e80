"""GatherSimplifier ("gather_simplifier"): gathers in canonical form."""

import numpy as np
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged, random_arguments

from hlo_common.hlo.parser import parse_module


def _args_in_range(text: str, seed: int, bound: int) -> list[np.ndarray]:
    args = random_arguments(parse_module(text), seed)
    return [np.abs(a) % bound if a.dtype.kind == "i" else a for a in args]


def test_row_gather_with_collapsed_dim():
    text = """
HloModule m
ENTRY e {
  x = f32[8,3] parameter(0)
  i = s32[5] parameter(1)
  ROOT g = f32[5,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
      index_vector_dim=1, slice_sizes={1,3}
}
// CHECK:      %[[I:.*]] = s32[5,1]{1,0} reshape(%i)
// CHECK-NEXT: %[[G:.*]] = f32[5,1,3]{2,1,0} gather(%x, %[[I]]), offset_dims={1,2}, collapsed_slice_dims={},
// CHECK-SAME: start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
// CHECK-NEXT: ROOT %{{.*}} = f32[5,3]{1,0} reshape(%[[G]])
"""
    module = check_pass("gather_simplifier", text)
    check_same_results(text, module, args=_args_in_range(text, 0, 8))


def test_batched_indices_with_leading_index_vector_and_moved_offsets():
    text = """
HloModule m
ENTRY e {
  x = f32[6,7,4] parameter(0)
  i = s32[2,3,2] parameter(1)
  ROOT g = f32[4,3,2] gather(x, i), offset_dims={0}, collapsed_slice_dims={0,1}, start_index_map={1,0},
      index_vector_dim=0, slice_sizes={1,1,4}
}
// CHECK:      transpose(%i), dimensions={1,2,0}
// CHECK:      gather({{.*}}), offset_dims={1,2,3}, collapsed_slice_dims={}, start_index_map={1,0},
// CHECK-SAME: index_vector_dim=1, slice_sizes={1,1,4}
// CHECK:      ROOT %{{.*}} = f32[4,3,2]{2,1,0} transpose(
"""
    module = check_pass("gather_simplifier", text)
    for seed in range(2):
        check_same_results(text, module, args=_args_in_range(text, seed, 6))


def test_scalar_index_and_zero_slice():
    text = """
HloModule m
ENTRY e {
  x = f32[5,4] parameter(0)
  i = s32[] parameter(1)
  g = f32[4] gather(x, i), offset_dims={0}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=0,
      slice_sizes={1,4}
  j = s32[3,1] parameter(2)
  z = f32[3,0] gather(x, j), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
      index_vector_dim=1, slice_sizes={1,0}
  ROOT t = (f32[4], f32[3,0]) tuple(g, z)
}
// CHECK:      f32[3,0]{1,0} broadcast(
"""
    module = check_pass("gather_simplifier", text)
    check_same_results(text, module, args=_args_in_range(text, 1, 5))


def test_canonical_gather_stays():
    check_unchanged("gather_simplifier", """
HloModule m
ENTRY e {
  x = f32[8,3] parameter(0)
  i = s32[5,1] parameter(1)
  ROOT g = f32[5,1,3] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0},
      index_vector_dim=1, slice_sizes={1,3}
}
""")
