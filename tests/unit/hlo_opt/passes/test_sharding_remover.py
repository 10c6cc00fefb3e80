"""ShardingRemover ("sharding-remover"): Sharding / SPMD shape-conversion custom calls -> operand."""

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

MARKERS = """
HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  s = f32[8] custom-call(p), custom_call_target="Sharding", sharding={replicated}
  f = f32[8] custom-call(s), custom_call_target="SPMDFullToShardShape", sharding={manual}
  n = f32[8] negate(f)
  ROOT b = f32[8] custom-call(n), custom_call_target="SPMDShardToFullShape", sharding={replicated}
}
// CHECK:      %p = f32[8]{0} parameter(0)
// CHECK-NEXT: ROOT %n = f32[8]{0} negate(%p)
// CHECK-NOT:  custom-call
"""


def test_markers_are_replaced_by_their_operand_even_at_the_root():
    module = check_pass("sharding-remover", MARKERS)
    check_same_results(MARKERS, module)


def test_shape_changing_marker_and_other_custom_calls_stay():
    check_unchanged("sharding-remover", """
HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  f = f32[4] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={manual}
  ROOT t = f32[4] custom-call(f), custom_call_target="TopK"
}
""")
