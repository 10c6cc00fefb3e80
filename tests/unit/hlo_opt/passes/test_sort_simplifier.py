"""SortSimplifier ("simplify-sorts"): unused operands of variadic sorts are dropped."""

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

THREE_OPERANDS = """
HloModule m
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  e = u8[] parameter(4)
  f = u8[] parameter(5)
  ROOT l = pred[] compare(a, b), direction=LT
}
ENTRY e {
  k = f32[8] parameter(0)
  v = s32[8] parameter(1)
  w = u8[8] parameter(2)
  s = (f32[8], s32[8], u8[8]) sort(k, v, w), dimensions={0}, to_apply=lt
  g = s32[8] get-tuple-element(s), index=1
  ROOT n = s32[8] negate(g)
}
// CHECK:      %lt.clone (p.0.lhs: f32[], p.0.rhs: f32[], p.1.lhs: s32[], p.1.rhs: s32[]) -> pred[]
// CHECK:      ENTRY
// CHECK:      %[[S:.*]] = (f32[8]{0}, s32[8]{0}) sort(%k, %v), dimensions={0}, to_apply=%lt.clone
// CHECK-NEXT: %[[G:.*]] = s32[8]{0} get-tuple-element(%[[S]]), index=1
// CHECK-NEXT: ROOT %n = s32[8]{0} negate(%[[G]])
"""


def test_unused_value_operand_is_dropped():
    module = check_pass("simplify-sorts", THREE_OPERANDS)
    check_same_results(THREE_OPERANDS, module)


def test_one_surviving_operand_gives_an_array_sort():
    text = """
HloModule m
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=GT
}
ENTRY e {
  k = f32[4,5] parameter(0)
  v = s32[4,5] parameter(1)
  s = (f32[4,5], s32[4,5]) sort(k, v), dimensions={1}, to_apply=lt
  ROOT g = f32[4,5] get-tuple-element(s), index=0
}
// CHECK:      ENTRY
// CHECK:      ROOT %{{.*}} = f32[4,5]{1,0} sort(%k), dimensions={1}, to_apply=%lt.clone
"""
    module = check_pass("simplify-sorts", text)
    check_same_results(text, module)


def test_declines_when_everything_is_used_or_the_sort_is_the_root():
    check_unchanged("simplify-sorts", """
HloModule m
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT l = pred[] compare(c, d), direction=LT
}
ENTRY e {
  k = f32[8] parameter(0)
  v = s32[8] parameter(1)
  s = (f32[8], s32[8]) sort(k, v), dimensions={0}, to_apply=lt
  g = f32[8] get-tuple-element(s), index=0
  sr = (f32[8], s32[8]) sort(k, v), dimensions={0}, to_apply=lt
  ROOT t = (f32[8], (f32[8], s32[8])) tuple(g, sr)
}
""")
