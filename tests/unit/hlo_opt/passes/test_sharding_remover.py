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


def test_other_custom_calls_stay():
    check_unchanged("sharding-remover", """
HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  ROOT t = f32[8] custom-call(p), custom_call_target="TopK"
}
""")


MANUAL_REGION = """HloModule m
ENTRY e {
  p = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}
  m = f32[2,16] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={manual}
  n = f32[2,16] negate(m), sharding={manual}
  ROOT r = f32[8,16] custom-call(n), custom_call_target="SPMDShardToFullShape", sharding={devices=[4,1]<=[4]}
}
"""


def test_a_manual_region_without_num_partitions_is_an_error():
    """A full-to-shard conversion that changes the shape was written for several devices; with no
    num_partitions the program cannot run (issue 17 item 8; the CLI's line: tests/spmd)."""
    import pytest

    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
    from hlo_opt.spmd.errors import SpmdError

    with pytest.raises(SpmdError, match="SPMDFullToShardShape turns f32.8,16.* into f32.2,16.*"):
        PASS_REGISTRY["sharding-remover"]().run(parse_module(MANUAL_REGION))
