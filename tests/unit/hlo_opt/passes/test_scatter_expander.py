"""ScatterExpander ("scatter_expander", simple scatters only)."""

import numpy as np
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged, random_arguments

from hlo_common.hlo.parser import parse_module

ADD = """
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _args(text: str, seed: int, lo: int, hi: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = random_arguments(parse_module(text), seed)
    return [rng.integers(lo, hi, a.shape).astype(a.dtype) if a.dtype.kind == "i" else a for a in args]


SINGLE = ADD + """
ENTRY e {
  x = f32[8,3] parameter(0)
  i = s32[1,1] parameter(1)
  u = f32[1,1,3] parameter(2)
  ROOT s = f32[8,3] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
"""


def test_single_index_scatter_becomes_slice_map_update():
    module = check_pass("scatter_expander", SINGLE + """
// CHECK:      %[[OLD:.*]] = f32[1,3]{1,0} dynamic-slice(%x, %{{.*}}, %{{.*}}), dynamic_slice_sizes={1,3}
// CHECK:      %[[NEW:.*]] = f32[1,3]{1,0} map(%[[OLD]], %{{.*}}), dimensions={0,1}, to_apply=%add
// CHECK:      select(%{{.*}}, %[[NEW]], %[[OLD]])
// CHECK:      ROOT %{{.*}} = f32[8,3]{1,0} dynamic-update-slice(%x,
"""
    )
    for seed in range(6):  # in range and out of range (skipped) windows
        check_same_results(SINGLE, module, args=_args(SINGLE, seed, -2, 10))


def test_empty_updates_leave_the_operand():
    check_pass("scatter_expander", ADD + """
ENTRY e {
  j = s32[1,1] parameter(0)
  v = f32[1,0] parameter(1)
  y = f32[4,0] parameter(2)
  ROOT empty = f32[4,0] scatter(y, j, v), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
// CHECK:      ENTRY
// CHECK-NEXT: %j = s32[1,1]{1,0} parameter(0)
// CHECK-NEXT: %v = f32[1,0]{1,0} parameter(1)
// CHECK-NEXT: ROOT %y = f32[4,0]{1,0} parameter(2)
""")


def test_scalar_index_with_an_inserted_dim():
    text = ADD + """
ENTRY e {
  x = f32[4,5] parameter(0)
  i = s32[2] parameter(1)
  u = f32[5] parameter(2)
  ROOT s = f32[4,5] scatter(x, i, u), update_window_dims={0}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0,1}, index_vector_dim=0, to_apply=add
}
// CHECK-NOT: scatter(
"""
    module = check_pass("scatter_expander", text)
    for seed in range(4):
        check_same_results(text, module, args=_args(text, seed, -1, 3))


def test_multi_index_scatters_stay():
    check_unchanged("scatter_expander", ADD + """
ENTRY e {
  x = f32[8,3] parameter(0)
  i = s32[2,1] parameter(1)
  u = f32[2,1,3] parameter(2)
  ROOT s = f32[8,3] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
""")
