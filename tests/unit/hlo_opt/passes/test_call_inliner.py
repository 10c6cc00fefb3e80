"""CallInliner ("call-inliner"): calls are replaced by their callee's body; names stay unique."""

from pass_testlib import check_numerics, check_pass, check_unchanged

NESTED = """
HloModule m
add_one {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  b = f32[4] broadcast(one), dimensions={}
  ROOT a = f32[4] add(x, b)
}
twice {
  y = f32[4] parameter(0)
  first = f32[4] call(y), to_apply=add_one
  ROOT second = f32[4] call(first), to_apply=add_one
}
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] multiply(p, p)
  c = f32[4] call(a), to_apply=twice
  ROOT n = f32[4] negate(c)
}
// CHECK-NOT:  call(
// CHECK-NOT:  %add_one
// CHECK-NOT:  %twice
// CHECK:      ENTRY %e
// CHECK-NEXT:   %p = f32[4]{0} parameter(0)
// CHECK-NEXT:   %a = f32[4]{0} multiply(%p, %p)
// CHECK-NEXT:   %[[ONE1:.*]] = f32[] constant(1)
// CHECK-NEXT:   %[[B1:.*]] = f32[4]{0} broadcast(%[[ONE1]]), dimensions={}
// CHECK-NEXT:   %[[A1:.*]] = f32[4]{0} add(%a, %[[B1]])
// CHECK-NEXT:   %[[ONE2:.*]] = f32[] constant(1)
// CHECK-NEXT:   %[[B2:.*]] = f32[4]{0} broadcast(%[[ONE2]]), dimensions={}
// CHECK-NEXT:   %[[A2:.*]] = f32[4]{0} add(%[[A1]], %[[B2]])
// CHECK-NEXT:   ROOT %n = f32[4]{0} negate(%[[A2]])
"""


def test_nested_calls_are_inlined_and_callees_removed():
    module = check_pass("call-inliner", NESTED)
    names = [i.name for c in module.computations for i in c.instructions]
    assert len(names) == len(set(names)), names
    assert [c.name for c in module.computations] == ["e"]
    check_numerics(NESTED, module)


def test_a_call_at_the_root_with_a_tuple_result():
    text = """
HloModule m
pair {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  s = f32[4] add(x, y)
  d = f32[4] subtract(x, y)
  ROOT t = (f32[4], f32[4]) tuple(s, d)
}
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  ROOT c = (f32[4], f32[4]) call(p, q), to_apply=pair
}
// CHECK:      ENTRY %e
// CHECK:        %[[S:s.*]] = f32[4]{0} add(%p, %q)
// CHECK-NEXT:   %[[D:d.*]] = f32[4]{0} subtract(%p, %q)
// CHECK-NEXT:   ROOT %{{t.*}} = (f32[4]{0}, f32[4]{0}) tuple(%[[S]], %[[D]])
"""
    module = check_pass("call-inliner", text)
    check_numerics(text, module)


def test_declines_calls_marked_not_inlineable():
    check_unchanged("call-inliner", """
HloModule m
neg {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] call(p), to_apply=neg, frontend_attributes={inlineable="false"}
}
""")


def test_no_calls():
    check_unchanged("call-inliner", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
""")
