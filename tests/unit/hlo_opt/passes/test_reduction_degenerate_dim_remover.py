"""ReductionDegenerateDimRemover ("reduction-degenerate-dim-remover"): size-1 dims leave reduces."""

from layout_testlib import run_layout_pass
from pass_testlib import check_unchanged
from reduction_cases import ADD, ARGMAX


def test_size_one_dims_are_dropped_around_the_reduce():
    run_layout_pass("reduction-degenerate-dim-remover", ADD + """
ENTRY e {
  p = f32[1,8,1,16] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[1,8] reduce(p, z), dimensions={2,3}, to_apply=add
}
// CHECK: %[[B:.*]] = f32[8,16]{1,0} bitcast(%p)
// CHECK: %[[R:.*]] = f32[8]{0} reduce(%[[B]], %z), dimensions={1}, to_apply=%add
// CHECK: ROOT %{{.*}} = f32[1,8]{1,0} bitcast(%[[R]])
""")


def test_a_reduce_over_size_one_dims_only_becomes_a_bitcast():
    run_layout_pass("reduction-degenerate-dim-remover", ADD + """
ENTRY e {
  p = f32[8,1] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(p, z), dimensions={1}, to_apply=add
}
// CHECK-NOT: reduce(
// CHECK:     ROOT %{{.*}} = f32[8]{0} bitcast(%p)
""")


def test_variadic_reduces_keep_their_outputs_paired():
    run_layout_pass("reduction-degenerate-dim-remover", ARGMAX + """
ENTRY e {
  v = f32[4,1,32]{2,1,0} parameter(0)
  i = s32[4,1,32]{2,1,0} iota(), iota_dimension=2
  z = f32[] constant(-inf)
  m = s32[] constant(0)
  ROOT r = (f32[4,1], s32[4,1]) reduce(v, i, z, m), dimensions={2}, to_apply=argmax
}
// CHECK: %[[R:.*]] = (f32[4]{0}, s32[4]{0}) reduce(
// CHECK: ROOT %{{.*}} = (f32[4,1]{1,0}, s32[4,1]{1,0}) tuple(
""")


def test_reduces_without_size_one_dims_are_unchanged():
    check_unchanged("reduction-degenerate-dim-remover", ADD + """
ENTRY e {
  p = f32[8,16] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(p, z), dimensions={1}, to_apply=add
}
""")
