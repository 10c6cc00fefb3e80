"""HloCSE ("cse"): identical instructions and constants merge; anything that differs stays apart."""

import numpy as np
from pass_testlib import check_numerics, check_pass, check_unchanged, run_pass

IDENTICAL = """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  a1 = f32[4] add(p, q)
  a2 = f32[4] add(q, p)
  m1 = f32[4] multiply(a1, p)
  m2 = f32[4] multiply(a2, p)
  ROOT r = f32[4] subtract(m1, m2)
}
// CHECK:      %a1 = f32[4]{0} add(%p, %q)
// CHECK-NEXT: %m1 = f32[4]{0} multiply(%a1, %p)
// CHECK-NEXT: ROOT %r = f32[4]{0} subtract(%m1, %m1)
"""


def test_merges_identical_instructions_commutative_operands_in_any_order():
    module = check_pass("cse", IDENTICAL)
    assert module.instruction_count() == 5
    check_numerics(IDENTICAL, module)


def test_operand_order_matters_for_non_commutative_ops():
    check_unchanged("cse", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  sa = f32[4] subtract(p, q)
  sb = f32[4] subtract(q, p)
  ROOT r = (f32[4], f32[4]) tuple(sa, sb)
}
""")


CONSTANTS = """
HloModule m
ENTRY e {
  c1 = f32[] constant(2)
  c2 = f32[] constant(2)
  z1 = f32[] constant(0)
  z2 = f32[] constant(0.5)
  i1 = s32[] constant(2)
  ROOT t = (f32[], f32[], f32[], f32[], s32[]) tuple(c1, c2, z1, z2, i1)
}
// CHECK:      %c1 = f32[] constant(2)
// CHECK-NEXT: %z1 = f32[] constant(0)
// CHECK-NEXT: %z2 = f32[] constant(0.5)
// CHECK-NEXT: %i1 = s32[] constant(2)
// CHECK-NEXT: ROOT %t = {{.*}} tuple(%c1, %c1, %z1, %z2, %i1)
"""


def test_merges_bit_identical_constants_only():
    module = check_pass("cse", CONSTANTS)
    check_numerics(CONSTANTS, module)


def test_negative_zero_is_not_zero():
    # Checked on the IR: the printer writes -0.0 as "-0", which does not parse back as -0.0 yet.
    module, changed = run_pass("cse", """
HloModule m
ENTRY e {
  z1 = f32[] constant(0)
  z2 = f32[] constant(-0.0)
  ROOT t = (f32[], f32[]) tuple(z1, z2)
}
""")
    assert not changed
    zeros = [i.literal for i in module.entry.instructions if i.opcode == "constant"]
    assert [bool(np.signbit(z)) for z in zeros] == [False, True]


LAYOUTS = """
HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  a = f32[2,3]{1,0} negate(p)
  b = f32[2,3]{0,1} negate(p)
  ROOT t = (f32[2,3]{1,0}, f32[2,3]{0,1}) tuple(a, b)
}
"""


def test_layouts_keep_instructions_apart_when_layout_sensitive():
    check_unchanged("cse", LAYOUTS, is_layout_sensitive=True)


def test_layouts_are_ignored_when_layout_insensitive():
    check_pass("cse", LAYOUTS + "// CHECK: ROOT %t = {{.*}} tuple(%a, %a)\n", is_layout_sensitive=False)


def test_attributes_and_side_effects_keep_instructions_apart():
    check_unchanged("cse", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  b1 = f32[4,4] broadcast(p), dimensions={0}
  b2 = f32[4,4] broadcast(p), dimensions={1}
  sa = f32[2] slice(p), slice={[0:2]}
  sb = f32[2] slice(p), slice={[2:4]}
  c1 = f32[4] custom-call(p), custom_call_target="log_it", custom_call_has_side_effect=true
  c2 = f32[4] custom-call(p), custom_call_target="log_it", custom_call_has_side_effect=true
  n1 = f32[4] negate(p), control-predecessors={c1}
  n2 = f32[4] negate(p)
  ROOT t = (f32[4,4], f32[4,4], f32[2], f32[2], f32[4], f32[4], f32[4], f32[4])
    tuple(b1, b2, sa, sb, c1, c2, n1, n2)
}
""")


def test_equal_iotas_count_as_the_same_operand():
    text = """
HloModule m
ENTRY e {
  p = s32[8] parameter(0)
  i1 = s32[8] iota(), iota_dimension=0
  i2 = s32[8] iota(), iota_dimension=0
  a1 = s32[8] add(i1, p)
  a2 = s32[8] add(p, i2)
  ROOT t = (s32[8], s32[8]) tuple(a1, a2)
}
// CHECK:     %a1 = s32[8]{0} add(%i1, %p)
// CHECK-NOT: %a2
// CHECK:     ROOT %t = {{.*}} tuple(%a1, %a1)
"""
    module = check_pass("cse", text)
    check_numerics(text, module)


FUSIONS = """
HloModule m
fused1 {
  x = f32[4] parameter(0)
  y = f32[4] exponential(x)
  y2 = f32[4] exponential(x)
  ROOT z = f32[4] add(y, y2)
}
fused2 {
  a = f32[4] parameter(0)
  b = f32[4] exponential(a)
  b2 = f32[4] exponential(a)
  ROOT c = f32[4] add(b, b2)
}
ENTRY e {
  p = f32[4] parameter(0)
  f1 = f32[4] fusion(p), kind=kLoop, calls=fused1
  f2 = f32[4] fusion(p), kind=kLoop, calls=fused2
  n1 = f32[4] negate(p)
  n2 = f32[4] negate(p)
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(f1, f2, n1, n2)
}
"""


def test_structurally_equal_fusions_merge():
    module = check_pass("cse", FUSIONS + """
// CHECK:      %fused1
// CHECK:        %y = f32[4]{0} exponential(%x)
// CHECK-NEXT:   ROOT %z = f32[4]{0} add(%y, %y)
// CHECK:      ENTRY %e
// CHECK:        ROOT %t = {{.*}} tuple(%f1, %f1, %n1, %n1)
""")
    check_numerics(FUSIONS, module)


def test_only_fusion_computations():
    check_pass("cse", FUSIONS + """
// CHECK:      %fused1
// CHECK:        ROOT %z = f32[4]{0} add(%y, %y)
// CHECK:      ENTRY %e
// CHECK:        ROOT %t = {{.*}} tuple(%f1, %f2, %n1, %n2)
""", only_fusion_computations=True)


def test_nothing_to_merge():
    check_unchanged("cse", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  a = f32[4] add(p, q)
  ROOT m = f32[4] multiply(a, q)
}
""")


def test_constants_with_unknown_values_never_merge():
    module, changed = run_pass("cse", """
HloModule m
ENTRY e {
  a = f32[4] constant({...})
  b = f32[4] constant({...})
  ROOT t = (f32[4], f32[4]) tuple(a, b)
}
""")
    assert not changed and module.instruction_count() == 3
