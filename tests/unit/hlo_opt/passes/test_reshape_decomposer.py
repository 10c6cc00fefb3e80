"""ReshapeDecomposer ("reshape-decomposer"): reshapes that are not bitcasts get physical copies."""

from hlo_opt.layout_util import reshape_is_bitcast
from layout_testlib import run_layout_pass
from pass_testlib import check_unchanged


def _all_reshapes_are_bitcasts(module) -> bool:
    return all(reshape_is_bitcast(i.operands[0].shape, i.shape)
               for c in module.computations for i in c.instructions if i.opcode == "reshape")


def test_the_operand_is_copied_into_a_layout_that_aligns_with_the_result():
    module = run_layout_pass("reshape-decomposer", """
HloModule m
ENTRY e {
  p = f32[4,6]{0,1} parameter(0)
  ROOT r = f32[24]{0} reshape(p)
}
// CHECK: %[[C:.*]] = f32[4,6]{1,0} copy(%p)
// CHECK: ROOT %r = f32[24]{0} reshape(%[[C]])
""")
    assert _all_reshapes_are_bitcasts(module)


def test_the_result_is_reshaped_in_an_aligned_layout_then_copied():
    module = run_layout_pass("reshape-decomposer", """
HloModule m
ENTRY e {
  p = f32[4,6]{1,0} parameter(0)
  ROOT r = f32[2,2,6]{0,1,2} reshape(p)
}
// CHECK: %[[R:.*]] = f32[2,2,6]{2,1,0} reshape(%p)
// CHECK: ROOT %{{.*}} = f32[2,2,6]{0,1,2} copy(%[[R]])
""")
    assert _all_reshapes_are_bitcasts(module)


def test_two_copies_when_neither_side_can_be_aligned():
    module = run_layout_pass("reshape-decomposer", """
HloModule m
ENTRY e {
  p = f32[4,6]{0,1} parameter(0)
  ROOT r = f32[6,4]{0,1} reshape(p)
}
// CHECK: %[[A:.*]] = f32[4,6]{1,0} copy(%p)
// CHECK: %[[R:.*]] = f32[6,4]{1,0} reshape(%[[A]])
// CHECK: ROOT %{{.*}} = f32[6,4]{0,1} copy(%[[R]])
""")
    assert _all_reshapes_are_bitcasts(module)


def test_size_one_dims_do_not_need_a_copy():
    check_unchanged("reshape-decomposer", """
HloModule m
ENTRY e {
  p = f32[4,1,6]{0,1,2} parameter(0)
  ROOT r = f32[4,6]{0,1} reshape(p)
}
""")


def test_bitcast_reshapes_are_unchanged():
    check_unchanged("reshape-decomposer", """
HloModule m
ENTRY e {
  p = f32[4,6,8] parameter(0)
  r = f32[24,8] reshape(p)
  q = f32[8,6]{0,1} parameter(1)
  ROOT s = f32[8,1,6]{0,1,2} reshape(q)
}
""")
