"""MoveCopyToUsers ("move_copy_to_users"): copies added by layout assignment sink below
layout-preserving users, and a reduce reads the copied value directly (XLA's rule)."""

from hlo_common.hlo.printer import print_module
from layout_testlib import opcodes, run_layout_pass, run_passes
from pass_testlib import check_unchanged

ADD = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""

# reduce_batch of the fusion bench: f32[64,512,128] summed over dim 1, the parameter fixed {2,1,0}.
REDUCE_OF_PARAMETER = """
HloModule m, entry_computation_layout={(f32[4,64,8]{2,1,0})->f32[4,8]{1,0}}
""" + ADD + """
ENTRY e {
  p = f32[4,64,8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4,8] reduce(p, z), dimensions={1}, to_apply=add
}
"""


def test_layout_assignment_copies_a_fixed_parameter_into_the_row_reduction_layout():
    # XLA does the same at this step: the reduce's wish is not mandatory, but the copy is made.
    run_layout_pass("layout-assignment", REDUCE_OF_PARAMETER + """
// CHECK: %[[C:.*]] = f32[4,64,8]{1,2,0} copy(%p)
// CHECK: ROOT %r = f32[4,8]{1,0} reduce(%[[C]], %z)
""")


def test_then_the_reduce_reads_the_parameter_as_it_is():
    module = run_passes(["layout-assignment"], REDUCE_OF_PARAMETER)
    module = run_layout_pass("move_copy_to_users", print_module(module) + """
// CHECK-NOT: copy
// CHECK: ROOT %r{{.*}} = f32[4,8]{1,0} reduce(%p, %z), dimensions={1}
""")
    assert sorted(opcodes(module)) == ["constant", "parameter", "reduce"]


def test_a_free_operand_still_takes_the_row_reduction_layout_and_keeps_it():
    text = """
HloModule m
""" + ADD + """
ENTRY e {
  q = f32[8,32] parameter(0)
  b = f32[8,64,32] broadcast(q), dimensions={0,2}
  z = f32[] constant(0)
  ROOT r = f32[8,32] reduce(b, z), dimensions={1}, to_apply=add
}
"""
    module = run_passes(["layout-assignment", "move_copy_to_users"], text)
    b = next(i for i in module.entry.instructions if i.opcode == "broadcast")
    assert b.shape.minor_to_major == (1, 2, 0)
    assert "copy" not in opcodes(module)


def test_a_copy_sinks_below_a_unary_op_and_then_the_reduce_drops_it():
    run_layout_pass("move_copy_to_users", """
HloModule m
""" + ADD + """
ENTRY e {
  p = f32[4,64,8]{2,1,0} parameter(0)
  c = f32[4,64,8]{1,2,0} copy(p)
  x = f32[4,64,8]{1,2,0} exponential(c)
  z = f32[] constant(0)
  ROOT r = f32[4,8]{1,0} reduce(x, z), dimensions={1}, to_apply=add
}
// CHECK-NOT: copy
// CHECK: %[[X:.*]] = f32[4,64,8]{2,1,0} exponential(%p)
// CHECK: ROOT %r{{.*}} = f32[4,8]{1,0} reduce(%[[X]], %z)
""")


def test_a_binary_op_moves_only_when_both_operands_are_copies_of_one_layout():
    run_layout_pass("move_copy_to_users", """
HloModule m
ENTRY e {
  p = f32[8,16]{1,0} parameter(0)
  q = f32[8,16]{1,0} parameter(1)
  a = f32[8,16]{0,1} copy(p)
  b = f32[8,16]{0,1} copy(q)
  ROOT m = f32[8,16]{0,1} multiply(a, b)
}
// CHECK: %[[M:.*]] = f32[8,16]{1,0} multiply(%p, %q)
// CHECK: ROOT %{{.*}} = f32[8,16]{0,1} copy(%[[M]])
""")
    check_unchanged("move_copy_to_users", """
HloModule m
ENTRY e {
  p = f32[8,16]{1,0} parameter(0)
  q = f32[8,16]{0,1} parameter(1)
  a = f32[8,16]{0,1} copy(p)
  ROOT m = f32[8,16]{0,1} multiply(a, q)
}
""")


def test_slice_and_concatenate_keep_the_copied_layout():
    run_layout_pass("move_copy_to_users", """
HloModule m
ENTRY e {
  p = f32[8,16]{1,0} parameter(0)
  q = f32[8,16]{1,0} parameter(1)
  a = f32[8,16]{0,1} copy(p)
  b = f32[8,16]{0,1} copy(q)
  c = f32[16,16]{0,1} concatenate(a, b), dimensions={0}
  ROOT s = f32[4,16]{0,1} slice(c), slice={[2:6], [0:16]}
}
// CHECK: %[[C:.*]] = f32[16,16]{1,0} concatenate(%p, %q), dimensions={0}
// CHECK: %[[S:.*]] = f32[4,16]{1,0} slice(%[[C]])
// CHECK: ROOT %{{.*}} = f32[4,16]{0,1} copy(%[[S]])
""")


def test_a_variadic_reduce_keeps_its_copy():
    check_unchanged("move_copy_to_users", """
HloModule m
add2 {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  s = f32[] add(a, c)
  t = s32[] add(b, d)
  ROOT r = (f32[], s32[]) tuple(s, t)
}
ENTRY e {
  p = f32[4,64]{1,0} parameter(0)
  i = s32[4,64]{0,1} parameter(1)
  c = f32[4,64]{0,1} copy(p)
  z = f32[] constant(0)
  y = s32[] constant(0)
  ROOT r = (f32[4]{0}, s32[4]{0}) reduce(c, i, z, y), dimensions={1}, to_apply=add2
}
""")
