"""FusionWrapper ("fusion-wrapper", `hlo_common.passes.fusion_wrapper`): XLA's names and kinds, the
ops it leaves alone (copy, fusions, parameters, tuples), while bodies, and no change on a module
that is already wrapped. The expected texts follow XLA's `fusion_wrapper_test.cc`."""

from pass_testlib import check_numerics, check_pass, check_unchanged

CONCAT = """
HloModule m
ENTRY e {
  p0 = f16[30,41] parameter(0)
  p1 = f16[30,41] parameter(1)
  ROOT result = f16[60,41] concatenate(p0, p1), dimensions={0}
}
// CHECK:      %wrapped_concatenate_computation (param_0: f16[30,41], param_1: f16[30,41]) -> f16[60,41] {
// CHECK-NEXT:   %param_0 = f16[30,41]{1,0} parameter(0)
// CHECK-NEXT:   %param_1 = f16[30,41]{1,0} parameter(1)
// CHECK-NEXT:   ROOT %result = f16[60,41]{1,0} concatenate(%param_0, %param_1), dimensions={0}
// CHECK:      ENTRY %e
// CHECK:        ROOT %wrapped_concatenate = f16[60,41]{1,0} fusion(%p0, %p1), kind=kLoop,
// CHECK-SAME:     calls=%wrapped_concatenate_computation
"""


def test_a_lone_op_gets_xla_names_and_the_same_numbers():
    module = check_pass("fusion-wrapper", CONCAT)
    check_numerics(CONCAT, module)


def test_scatter_and_reduce_are_input_fusions():
    check_pass("fusion-wrapper", """
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[8,16] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(p, z), dimensions={1}, to_apply=add
}
// CHECK: ROOT %wrapped_reduce = f32[8]{0} fusion(%p, %z), kind=kInput, calls=%wrapped_reduce_computation
""")


def test_copies_are_left_alone_and_while_bodies_are_wrapped():
    check_pass("fusion-wrapper", """
HloModule m
body {
  s = (f32[5]) parameter(0)
  c = f32[] constant(0)
  b = f32[5] broadcast(c), dimensions={}
  ROOT t = (f32[5]) tuple(b)
}
cond {
  s = (f32[5]) parameter(0)
  ROOT f = pred[] constant(false)
}
ENTRY e {
  p = f32[5] parameter(0)
  cp = f32[5] copy(p)
  t = (f32[5]) tuple(cp)
  ROOT w = (f32[5]) while(t), condition=cond, body=body
}
// CHECK:      %wrapped_broadcast_computation
// CHECK:      %body
// CHECK:        %wrapped_broadcast = f32[5]{0} fusion(%c), kind=kLoop, calls=%wrapped_broadcast_computation
// CHECK-NEXT:   ROOT %t = (f32[5]{0}) tuple(%wrapped_broadcast)
// CHECK:      ENTRY %e
// CHECK:        %cp = f32[5]{0} copy(%p)
""")


def test_names_are_unique_across_the_module_and_control_edges_move():
    check_pass("fusion-wrapper", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  a = f32[4] add(p, n)
  ROOT b = f32[4] add(a, a), control-predecessors={n}
}
// CHECK:      %wrapped_add_computation
// CHECK:      %wrapped_add_computation.1
// CHECK:      ENTRY %e
// CHECK:        %wrapped_negate = f32[4]{0} fusion(%p)
// CHECK-NEXT:   %wrapped_add = f32[4]{0} fusion(%p, %wrapped_negate)
// CHECK-NEXT:   ROOT %wrapped_add.1 = f32[4]{0} fusion(%wrapped_add, %wrapped_add)
// CHECK-SAME:     control-predecessors={%wrapped_negate}
""")


def test_a_wrapped_module_is_unchanged():
    check_unchanged("fusion-wrapper", """
HloModule m
wrapped_negate_computation {
  param_0 = f32[4] parameter(0)
  ROOT n = f32[4] negate(param_0)
}
ENTRY e {
  p = f32[4] parameter(0)
  cp = f32[4] copy(p)
  w = f32[4] fusion(cp), kind=kLoop, calls=wrapped_negate_computation
  ROOT t = (f32[4], f32[4]) tuple(w, p)
}
""")
