"""TupleSimplifier ("tuple-simplifier"): tuples built only to be taken apart disappear."""

from pass_testlib import check_numerics, check_pass, check_unchanged

GTE_OF_TUPLE = """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = s32[] parameter(1)
  n = f32[4] negate(p)
  t = (f32[4], s32[]) tuple(n, q)
  g = f32[4] get-tuple-element(t), index=0
  ROOT r = f32[4] add(g, p)
}
// CHECK:      %n = f32[4]{0} negate(%p)
// CHECK-NOT:  tuple
// CHECK-NEXT: ROOT %r = f32[4]{0} add(%n, %p)
"""


def test_get_tuple_element_of_a_tuple_reads_the_element():
    module = check_pass("tuple-simplifier", GTE_OF_TUPLE)
    check_numerics(GTE_OF_TUPLE, module)


def test_a_chain_through_nested_tuples():
    text = """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  inner = (f32[4], f32[4]) tuple(p, q)
  outer = ((f32[4], f32[4]), f32[4]) tuple(inner, p)
  g1 = (f32[4], f32[4]) get-tuple-element(outer), index=0
  g2 = f32[4] get-tuple-element(g1), index=1
  ROOT r = f32[4] multiply(g2, g2)
}
// CHECK:      ENTRY %e
// CHECK-NEXT:   %p = f32[4]{0} parameter(0)
// CHECK-NEXT:   %q = f32[4]{0} parameter(1)
// CHECK-NEXT:   ROOT %r = f32[4]{0} multiply(%q, %q)
"""
    module = check_pass("tuple-simplifier", text)
    check_numerics(text, module)


def test_a_tuple_of_all_elements_of_a_tuple_is_that_tuple():
    check_pass("tuple-simplifier", """
HloModule m
ENTRY e {
  p = (f32[4], s32[]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  b = s32[] get-tuple-element(p), index=1
  ROOT t = (f32[4], s32[]) tuple(a, b)
}
// CHECK:      ENTRY %e
// CHECK-NEXT:   ROOT %p = (f32[4]{0}, s32[]) parameter(0)
// CHECK-NEXT: }
""")


def test_declines_reordered_partial_and_mismatched_tuples():
    check_unchanged("tuple-simplifier", """
HloModule m
ENTRY e {
  p = (f32[4], f32[4]) parameter(0)
  w = (f32[4], f32[4], f32[4]) parameter(1)
  a = f32[4] get-tuple-element(p), index=0
  b = f32[4] get-tuple-element(p), index=1
  swapped = (f32[4], f32[4]) tuple(b, a)
  c = f32[4] get-tuple-element(w), index=0
  d = f32[4] get-tuple-element(w), index=1
  partial = (f32[4], f32[4]) tuple(c, d)
  ROOT t = ((f32[4], f32[4]), (f32[4], f32[4])) tuple(swapped, partial)
}
""")


def test_get_tuple_element_of_a_non_tuple_is_left_alone():
    check_unchanged("tuple-simplifier", """
HloModule m
cond {
  cp = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}
body {
  bp = (s32[], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bv = f32[4] get-tuple-element(bp), index=1
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  nv = f32[4] add(bv, bv)
  ROOT bt = (s32[], f32[4]) tuple(ni, nv)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4]) tuple(z, p)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
""")
