"""SelectAndScatterExpander ("select-and-scatter-expander")."""

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

GE_ADD = """
HloModule m
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""

MAX_POOL_GRAD = GE_ADD + """
ENTRY e {
  operand = f32[4,6] parameter(0)
  source = f32[2,3] parameter(1)
  init = f32[] constant(0)
  ROOT s = f32[4,6] select-and-scatter(operand, source, init), window={size=2x2 stride=2x2}, select=ge,
      scatter=add
}
"""


def test_max_pool_gradient_becomes_reduce_window_and_scatter():
    module = check_pass("select-and-scatter-expander", MAX_POOL_GRAD + """
// CHECK:      %ge.reduce_window (operand_lhs: f32[], iota_lhs: s32[], iota_lhs.1: s32[], operand_rhs: f32[]
// CHECK:      ENTRY
// CHECK-DAG:  s32[4,6]{1,0} iota(), iota_dimension=0
// CHECK-DAG:  s32[4,6]{1,0} iota(), iota_dimension=1
// CHECK:      (f32[2,3]{1,0}, s32[2,3]{1,0}, s32[2,3]{1,0}) reduce-window(
// CHECK:      s32[2,3,2]{2,1,0} concatenate(
// CHECK:      ROOT %{{.*}} = f32[4,6]{1,0} scatter({{.*}}), update_window_dims={},
// CHECK-SAME: inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=2,
// CHECK-SAME: to_apply=%add
// CHECK-NOT:  select-and-scatter
""")
    for seed in range(3):
        check_same_results(MAX_POOL_GRAD, module, seed=seed)


def test_overlapping_padded_windows_in_3d():
    text = GE_ADD + """
ENTRY e {
  operand = f32[2,5,4] parameter(0)
  source = f32[2,3,2] parameter(1)
  init = f32[] constant(0)
  ROOT s = f32[2,5,4] select-and-scatter(operand, source, init),
      window={size=1x3x3 stride=1x2x2 pad=0_0x1_1x1_0}, select=ge, scatter=add
}
// CHECK-NOT: select-and-scatter(
"""
    module = check_pass("select-and-scatter-expander", text)
    for seed in range(3):
        check_same_results(text, module, seed=seed)


def test_nothing_to_expand():
    check_unchanged("select-and-scatter-expander", GE_ADD + """
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2] reduce-window(p, z), window={size=2 stride=2}, to_apply=add
}
""")
