"""GatherExpander ("gather_expander", simple gathers only)."""

import numpy as np
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged, random_arguments

from hlo_common.hlo.parser import parse_module


def _args(text: str, seed: int, lo: int, hi: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = random_arguments(parse_module(text), seed)
    return [rng.integers(lo, hi, a.shape).astype(a.dtype) if a.dtype.kind == "i" else a for a in args]


def test_single_index_gather_becomes_dynamic_slice():
    text = """
HloModule m
ENTRY e {
  x = f32[8,3] parameter(0)
  i = s32[1,1] parameter(1)
  ROOT g = f32[1,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
      index_vector_dim=1, slice_sizes={1,3}
}
// CHECK:      dynamic-slice(%x, %{{.*}}, %{{.*}}), dynamic_slice_sizes={1,3}
// CHECK-NOT:  gather(
"""
    module = check_pass("gather_expander", text)
    for seed in range(4):  # out-of-range starts are clamped by both
        check_same_results(text, module, args=_args(text, seed, -3, 11))


def test_scalar_index_with_offset_dims_first_and_a_whole_operand_gather():
    text = """
HloModule m
ENTRY e {
  x = f32[5,6,4] parameter(0)
  i = s32[2] parameter(1)
  g = f32[2,4] gather(x, i), offset_dims={0,1}, collapsed_slice_dims={1}, start_index_map={1,0},
      index_vector_dim=0, slice_sizes={2,1,4}
  j = s32[3,2] parameter(2)
  b = f32[3,5,6,4] gather(x, j), offset_dims={1,2,3}, collapsed_slice_dims={}, start_index_map={0,1},
      index_vector_dim=1, slice_sizes={5,6,4}
  ROOT t = (f32[2,4], f32[3,5,6,4]) tuple(g, b)
}
// CHECK:      f32[3,5,6,4]{3,2,1,0} broadcast(%{{.*}}), dimensions={1,2,3}
"""
    module = check_pass("gather_expander", text)
    for seed in range(3):
        check_same_results(text, module, args=_args(text, seed, -1, 7))


def test_multi_index_gathers_stay():
    check_unchanged("gather_expander", """
HloModule m
ENTRY e {
  x = f32[8,3] parameter(0)
  i = s32[5,1] parameter(1)
  ROOT g = f32[5,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
      index_vector_dim=1, slice_sizes={1,3}
}
""")
