"""HloDCE ("dce"): dead instructions and unreachable computations go; side effects stay."""

from pass_testlib import check_numerics, check_pass, check_unchanged

DEAD_CHAIN = """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] add(p, p)
  b = f32[4] multiply(a, a)
  ROOT n = f32[4] negate(p)
}
// CHECK:      ENTRY %e
// CHECK-NEXT:   %p = f32[4]{0} parameter(0)
// CHECK-NEXT:   ROOT %n = f32[4]{0} negate(%p)
// CHECK-NEXT: }
"""


def test_removes_a_dead_chain_and_keeps_the_numbers():
    module = check_pass("dce", DEAD_CHAIN)
    assert module.instruction_count() == 2
    check_numerics(DEAD_CHAIN, module)


def test_keeps_side_effecting_instructions_and_the_dead_parameter():
    check_pass("dce", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  unused = f32[4] parameter(1)
  cc = f32[4] custom-call(p), custom_call_target="log_it", custom_call_has_side_effect=true
  plain = f32[4] custom-call(p), custom_call_target="pure"
  t = token[] after-all()
  inf = ((f32[2]), token[]) infeed(t)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[4] rng(lo, hi), distribution=rng_uniform
  dead = f32[4] exponential(p)
  ROOT n = f32[4] negate(p)
}
// CHECK:     %unused = f32[4]{0} parameter(1)
// CHECK:     %cc = f32[4]{0} custom-call(%p), custom_call_target="log_it"
// CHECK-NOT: "pure"
// CHECK:     %t = token[] after-all()
// CHECK:     %inf = {{.*}} infeed(%t)
// CHECK:     %r = f32[4]{0} rng(%lo, %hi)
// CHECK-NOT: exponential
""")


def test_keeps_instructions_with_control_dependencies():
    check_unchanged("dce", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] add(p, p)
  ROOT n = f32[4] negate(p), control-predecessors={a}
}
""")


def test_removes_unreachable_and_orphaned_fusion_computations():
    check_pass("dce", """
HloModule m
unused_comp {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
fused {
  fp = f32[4] parameter(0)
  ROOT fe = f32[4] exponential(fp)
}
ENTRY e {
  p = f32[4] parameter(0)
  f = f32[4] fusion(p), kind=kLoop, calls=fused
  ROOT n = f32[4] negate(p)
}
// CHECK-NOT: %unused_comp
// CHECK-NOT: %fused
// CHECK:     ENTRY %e
// CHECK-NOT: fusion
""")


MULTI_OUTPUT = """
HloModule m
fused {
  fp = f32[4] parameter(0)
  e = f32[4] exponential(fp)
  l = f32[4] log(fp)
  s = f32[4] sine(fp)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(e, l, s)
}
ENTRY e {
  p = f32[4] parameter(0)
  f = (f32[4], f32[4], f32[4]) fusion(p), kind=kLoop, calls=fused
  g0 = f32[4] get-tuple-element(f), index=0
  g2 = f32[4] get-tuple-element(f), index=2
  ROOT r = f32[4] add(g0, g2)
}
// CHECK:      %fused
// CHECK-NOT:    log
// CHECK:        ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%e, %s)
// CHECK:      ENTRY %e
// CHECK:        %f = (f32[4]{0}, f32[4]{0}) fusion(%p), kind=kLoop, calls=%fused
// CHECK-NEXT:   %g0 = f32[4]{0} get-tuple-element(%f), index=0
// CHECK-NEXT:   %g2 = f32[4]{0} get-tuple-element(%f), index=1
"""


def test_drops_unused_outputs_of_a_multi_output_fusion():
    module = check_pass("dce", MULTI_OUTPUT)
    check_numerics(MULTI_OUTPUT, module)


def test_a_multi_output_fusion_left_with_one_output_is_read_directly():
    text = MULTI_OUTPUT.split("// CHECK")[0]
    text = text.replace("ROOT r = f32[4] add(g0, g2)", "ROOT r = f32[4] negate(g2)")
    module = check_pass("dce", text + """
// CHECK:      %fused
// CHECK:        ROOT %s = f32[4]{0} sine(%fp)
// CHECK:      ENTRY %e
// CHECK:        %f = f32[4]{0} fusion(%p), kind=kLoop, calls=%fused
// CHECK-NEXT:   ROOT %r = f32[4]{0} negate(%f)
""")
    check_numerics(text, module)


def test_clean_module_is_unchanged():
    check_unchanged("dce", """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
}
""")
