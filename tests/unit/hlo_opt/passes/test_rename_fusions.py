"""RenameFusions ("rename_fusions"): <kind>_<sorted hero opcodes>_fusion and fused_<heroes>, made
unique module-wide; kCustom fusions and fusions inside fusion bodies keep their names."""

from pass_testlib import check_numerics, check_pass, check_unchanged, run_pass

from hlo_common.hlo.printer import print_module

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
"""

LOOP_AND_INPUT = """
HloModule m
""" + ADD + """
fused_computation {
  p = f32[8,32] parameter(0)
  x = f32[8,32] add(p, p)
  e = f32[8,32] exponential(p)
  ROOT t = (f32[8,32], f32[8,32]) tuple(x, e)
}
fused_computation.1 {
  p = f32[8,32] parameter(0)
  z = f32[] constant(0)
  r = f32[8] reduce(p, z), dimensions={1}, to_apply=add
  ROOT n = f32[8] negate(r)
}
ENTRY e {
  p0 = f32[8,32] parameter(0)
  fusion = (f32[8,32], f32[8,32]) fusion(p0), kind=kLoop, calls=fused_computation
  g0 = f32[8,32] get-tuple-element(fusion), index=0
  fusion.1 = f32[8] fusion(g0), kind=kInput, calls=fused_computation.1
  g1 = f32[8,32] get-tuple-element(fusion), index=1
  ROOT t = (f32[8], f32[8,32]) tuple(fusion.1, g1)
}
// CHECK:     %fused_add_exponential (
// CHECK:     %fused_reduce (
// CHECK:       %r = f32[8]{0} reduce
// CHECK:     ENTRY %e
// CHECK:       %loop_add_exponential_fusion = {{.*}} fusion(%p0), kind=kLoop, calls=%fused_add_exponential
// CHECK:       %input_reduce_fusion = f32[8]{0} fusion(%g0), kind=kInput, calls=%fused_reduce
"""


def test_kind_and_sorted_hero_opcodes_name_fusion_and_computation():
    module = check_pass("rename_fusions", LOOP_AND_INPUT)
    check_numerics(LOOP_AND_INPUT, module)


def test_same_heroes_get_numbered_names_in_instruction_order():
    module = check_pass("rename_fusions", """
HloModule m
fa {
  p = f32[4] parameter(0)
  ROOT a = f32[4] add(p, p)
}
fb {
  p = f32[4] parameter(0)
  c = f32[4] convert(p)
  ROOT a = f32[4] add(c, p)
}
ENTRY e {
  p0 = f32[4] parameter(0)
  f1 = f32[4] fusion(p0), kind=kLoop, calls=fa
  f2 = f32[4] fusion(f1), kind=kLoop, calls=fb
  ROOT n = f32[4] negate(f2)
}
// CHECK: %fused_add (
// CHECK: %fused_add.1 (
// CHECK: %loop_add_fusion = f32[4]{0} fusion(%p0), kind=kLoop, calls=%fused_add
// CHECK: %loop_add_fusion.1 = f32[4]{0} fusion(%loop_add_fusion), kind=kLoop, calls=%fused_add.1
""")
    assert module.entry.root.operands[0].name == "loop_add_fusion.1"


def test_dashes_become_underscores_and_taken_names_are_skipped():
    check_pass("rename_fusions", """
HloModule m
fdus {
  p = f32[8] parameter(0)
  u = f32[2] parameter(1)
  i = s32[] parameter(2)
  ROOT d = f32[8] dynamic-update-slice(p, u, i)
}
ENTRY e {
  loop_dynamic_update_slice_fusion = f32[8] parameter(0)
  u0 = f32[2] parameter(1)
  i0 = s32[] parameter(2)
  ROOT f = f32[8] fusion(loop_dynamic_update_slice_fusion, u0, i0), kind=kLoop, calls=fdus
}
// CHECK: %fused_dynamic_update_slice (
// CHECK: ROOT %loop_dynamic_update_slice_fusion.1 = f32[8]{0} fusion(%loop_dynamic_update_slice_fusion,
""")


def test_reduction_with_epilogue_is_named_after_its_reduce_hero():
    check_pass("rename_fusions", """
HloModule m
""" + ADD + """
fr {
  p = f32[16,256] parameter(0)
  z = f32[] constant(0)
  r = f32[16] reduce(p, z), dimensions={1}, to_apply=add
  c = f16[16] convert(r)
  ROOT s = f16[16] sqrt(c)
}
ENTRY e {
  p0 = f32[16,256] parameter(0)
  ROOT f = f16[16] fusion(p0), kind=kInput, calls=fr
}
// CHECK: ROOT %input_reduce_fusion = f16[16]{0} fusion(%p0), kind=kInput, calls=%fused_reduce
""")


def test_tiled_transpose_hero():
    check_pass("rename_fusions", """
HloModule m
ft {
  p = f32[64,128] parameter(0)
  t = f32[128,64] transpose(p), dimensions={1,0}
  ROOT e = f32[128,64] exponential(t)
}
ENTRY e {
  p0 = f32[64,128] parameter(0)
  ROOT f = f32[128,64] fusion(p0), kind=kInput, calls=ft
}
// CHECK: ROOT %input_transpose_fusion = f32[128,64]{1,0} fusion(%p0), kind=kInput, calls=%fused_transpose
""")


def test_custom_fusions_keep_their_names():
    check_pass("rename_fusions", """
HloModule m
gemm {
  a = f32[4,4] parameter(0)
  ROOT d = f32[4,4] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
fn {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[4,4] parameter(1)
  custom = f32[4,4] fusion(p1), kind=kCustom, calls=gemm
  f = f32[4] fusion(p0), kind=kLoop, calls=fn
  ROOT t = (f32[4,4], f32[4]) tuple(custom, f)
}
// CHECK: %gemm (
// CHECK: %fused_negate (
// CHECK: %custom = f32[4,4]{1,0} fusion(%p1), kind=kCustom, calls=%gemm
// CHECK: %loop_negate_fusion = f32[4]{0} fusion(%p0), kind=kLoop, calls=%fused_negate
""")


def test_fusions_in_while_bodies_are_renamed():
    check_pass("rename_fusions", """
HloModule m
fm {
  p = f32[4] parameter(0)
  ROOT m = f32[4] multiply(p, p)
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[4] fusion(x), kind=kLoop, calls=fm
  ROOT r = (s32[], f32[4]) tuple(j, y)
}
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
ENTRY e {
  p0 = f32[4] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[4]) tuple(z, p0)
  ROOT w = (s32[], f32[4]) while(t), condition=cond, body=body
}
// CHECK: %fused_multiply (
// CHECK: %loop_multiply_fusion = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_multiply
""")


def test_second_run_changes_nothing():
    module, changed = run_pass("rename_fusions", LOOP_AND_INPUT)
    assert changed
    check_unchanged("rename_fusions", print_module(module))


def test_module_without_fusions_is_unchanged():
    check_unchanged("rename_fusions", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
""")
