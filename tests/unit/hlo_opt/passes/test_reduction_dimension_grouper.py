"""ReductionDimensionGrouper ("reduction-dimension-grouper"): adjacent reduced dims merge."""

from layout_testlib import run_layout_pass
from pass_testlib import check_unchanged
from reduction_cases import ADD


def test_adjacent_reduced_dims_become_one():
    run_layout_pass("reduction-dimension-grouper", ADD + """
ENTRY e {
  p = f32[4,8,16,2] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4,2] reduce(p, z), dimensions={1,2}, to_apply=add
}
// CHECK: %[[B:.*]] = f32[4,128,2]{2,1,0} bitcast(%p)
// CHECK: ROOT %r{{.*}} = f32[4,2]{1,0} reduce(%[[B]], %z), dimensions={1}, to_apply=%add
""")


def test_two_separate_runs_are_grouped_separately():
    run_layout_pass("reduction-dimension-grouper", ADD + """
ENTRY e {
  p = f32[2,3,4,5,6] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={0,1,3,4}, to_apply=add
}
// CHECK: %[[B:.*]] = f32[6,4,30]{2,1,0} bitcast(%p)
// CHECK: reduce(%[[B]], %z), dimensions={0,2}
""")


def test_non_adjacent_or_non_default_reduces_are_unchanged():
    check_unchanged("reduction-dimension-grouper", ADD + """
ENTRY e {
  p = f32[4,8,16] parameter(0)
  q = f32[4,8,16]{0,1,2} parameter(1)
  z = f32[] constant(0)
  a = f32[8] reduce(p, z), dimensions={0,2}, to_apply=add
  b = f32[4] reduce(q, z), dimensions={1,2}, to_apply=add
  ROOT t = (f32[8], f32[4]) tuple(a, b)
}
""")
