"""ZeroSizedHloElimination ("zero_sized_hlo_elimination"): zero-element arrays become constants."""

from pass_testlib import check_numerics, check_pass, check_unchanged

ZERO_SLICE = """
HloModule m
ENTRY e {
  p = f32[3,4] parameter(0)
  s = f32[0,4] slice(p), slice={[0:0], [0:4]}
  n = f32[0,4] negate(s)
  ROOT c = f32[3,4] concatenate(p, n), dimensions={0}
}
// CHECK:      %p = f32[3,4]{1,0} parameter(0)
// CHECK-NEXT: %n = f32[0,4]{1,0} constant({})
// CHECK-NEXT: ROOT %c = f32[3,4]{1,0} concatenate(%p, %n), dimensions={0}
"""


def test_zero_element_arrays_become_constants_and_their_operands_die():
    module = check_pass("zero_sized_hlo_elimination", ZERO_SLICE)
    check_numerics(ZERO_SLICE, module)


def test_keeps_the_layout_of_the_replaced_instruction():
    check_pass("zero_sized_hlo_elimination", """
HloModule m
ENTRY e {
  p = f32[4,3] parameter(0)
  t = f32[3,0]{0,1} slice(p), slice={[0:3], [0:0]}
  ROOT r = f32[3,0]{0,1} negate(t)
}
// CHECK-NOT: slice
// CHECK:     ROOT %r = f32[3,0]{0,1} constant({ {}, {}, {} })
""")


def test_declines_parameters_constants_and_side_effects():
    check_unchanged("zero_sized_hlo_elimination", """
HloModule m
ENTRY e {
  p = f32[0,4] parameter(0)
  k = f32[0] constant({})
  cc = f32[0,4] custom-call(p), custom_call_target="log_it", custom_call_has_side_effect=true
  ROOT t = (f32[0,4], f32[0], f32[0,4]) tuple(p, k, cc)
}
""")


def test_leaves_fusion_bodies_alone_but_replaces_a_zero_sized_fusion():
    check_pass("zero_sized_hlo_elimination", """
HloModule m
fused {
  a = f32[2] parameter(0)
  z = f32[0] slice(a), slice={[0:0]}
  zn = f32[0] negate(z)
  ROOT c = f32[2] concatenate(a, zn), dimensions={0}
}
empty {
  b = f32[2] parameter(0)
  ROOT bz = f32[0] slice(b), slice={[0:0]}
}
ENTRY e {
  p = f32[2] parameter(0)
  f = f32[2] fusion(p), kind=kLoop, calls=fused
  g = f32[0] fusion(p), kind=kLoop, calls=empty
  ROOT t = (f32[2], f32[0]) tuple(f, g)
}
// CHECK:      %fused
// CHECK:        %z = f32[0]{0} slice(%a)
// CHECK-NEXT:   %zn = f32[0]{0} negate(%z)
// CHECK:      ENTRY %e
// CHECK:        %f = f32[2]{0} fusion(%p), kind=kLoop, calls=%fused
// CHECK-NEXT:   %g = f32[0]{0} constant({})
""")


def test_nothing_zero_sized():
    check_unchanged("zero_sized_hlo_elimination", """
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT n = f32[2] negate(p)
}
""")
