"""ReductionSplitter ("reduction-splitter"): non-contiguous multi-dim reductions split in two."""

from layout_testlib import run_layout_pass
from pass_testlib import check_unchanged
from reduction_cases import ADD


def test_the_largest_reduced_dim_is_reduced_first():
    run_layout_pass("reduction-splitter", ADD + """
ENTRY e {
  p = f32[16,8,64,32] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[8,32] reduce(p, z), dimensions={0,2}, to_apply=add
}
// CHECK: %[[PRE:.*]] = f32[16,8,32]{2,1,0} reduce(%p, %z), dimensions={2}, to_apply=%add
// CHECK: ROOT %r{{.*}} = f32[8,32]{1,0} reduce(%[[PRE]], %z), dimensions={0}, to_apply=%add
""")


def test_small_dims_contiguous_reductions_and_single_dims_are_left_alone():
    check_unchanged("reduction-splitter", ADD + """
ENTRY e {
  p = f32[8,8,4,32] parameter(0)
  z = f32[] constant(0)
  small = f32[8,32] reduce(p, z), dimensions={0,2}, to_apply=add
  q = f32[16,64,32] parameter(1)
  row = f32[64] reduce(q, z), dimensions={0,2}, to_apply=add
  one = f32[16,32] reduce(q, z), dimensions={1}, to_apply=add
  ROOT t = (f32[8,32], f32[64], f32[16,32]) tuple(small, row, one)
}
""")


def test_without_ignore_small_dims_small_reductions_split_too():
    run_layout_pass("reduction-splitter", ADD + """
ENTRY e {
  p = f32[8,8,4,32] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[8,32] reduce(p, z), dimensions={0,2}, to_apply=add
}
// CHECK: f32[8,4,32]{2,1,0} reduce(%p, %z), dimensions={0}
""", ignore_small_dims=False)
