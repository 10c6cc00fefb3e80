"""ConditionalSimplifier ("simplify-conditional")."""

import numpy as np
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

BRANCHES = """
HloModule m
on_true {
  tp = (f32[4], f32[4]) parameter(0)
  ta = f32[4] get-tuple-element(tp), index=0
  tb = f32[4] get-tuple-element(tp), index=1
  ROOT tr = f32[4] add(ta, tb)
}
on_false {
  fp = (f32[4], f32[4]) parameter(0)
  fa = f32[4] get-tuple-element(fp), index=0
  ROOT fr = f32[4] exponential(fa)
}
"""


def test_constant_predicate_inlines_the_taken_branch():
    text = BRANCHES + """
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  t = (f32[4], f32[4]) tuple(x, y)
  c = pred[] constant(false)
  ROOT r = f32[4] conditional(c, t, t), true_computation=on_true, false_computation=on_false
}
// CHECK:      ENTRY
// CHECK-NOT:  conditional
// CHECK:      %[[A:.*]] = f32[4]{0} get-tuple-element(%t), index=0
// CHECK-NEXT: ROOT %{{.*}} = f32[4]{0} exponential(%[[A]])
"""
    module = check_pass("simplify-conditional", text)
    check_same_results(text, module)
    assert [c.name for c in module.computations] == ["e"]


def test_out_of_range_index_takes_the_last_branch():
    text = """
HloModule m
b0 {
  p0 = f32[2] parameter(0)
  ROOT n0 = f32[2] negate(p0)
}
b1 {
  p1 = f32[2] parameter(0)
  ROOT n1 = f32[2] abs(p1)
}
ENTRY e {
  x = f32[2] parameter(0)
  i = s32[] constant(7)
  ROOT r = f32[2] conditional(i, x, x), branch_computations={b0, b1}
}
// CHECK:      ENTRY
// CHECK:      ROOT %{{.*}} = f32[2]{0} abs(%x)
"""
    module = check_pass("simplify-conditional", text)
    check_same_results(text, module)


def test_cheap_pred_conditional_becomes_selects():
    text = BRANCHES + """
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  p = pred[] parameter(2)
  t = (f32[4], f32[4]) tuple(x, y)
  ROOT r = f32[4] conditional(p, t, t), true_computation=on_true, false_computation=on_false
}
// CHECK:      ENTRY
// CHECK-DAG:  %[[ADD:.*]] = f32[4]{0} add(
// CHECK-DAG:  %[[EXP:.*]] = f32[4]{0} exponential(
// CHECK-DAG:  %[[B:.*]] = pred[4]{0} broadcast(%p), dimensions={}
// CHECK:      ROOT %{{.*}} = f32[4]{0} select(%[[B]], %[[ADD]], %[[EXP]])
"""
    module = check_pass("simplify-conditional", text)
    for seed in range(3):
        check_same_results(text, module, seed=seed)


def test_unused_results_and_operands_are_trimmed():
    text = """
HloModule m
lt {
  la = f32[] parameter(0)
  lb = f32[] parameter(1)
  ROOT l = pred[] compare(la, lb), direction=LT
}
b0 {
  p0 = (f32[4], s32[3]) parameter(0)
  a0 = f32[4] get-tuple-element(p0), index=0
  d0 = f32[4] sort(a0), dimensions={0}, to_apply=lt
  ROOT t0 = (f32[4], f32[4], f32[4]) tuple(d0, a0, d0)
}
b1 {
  p1 = (f32[4], s32[3]) parameter(0)
  a1 = f32[4] get-tuple-element(p1), index=0
  d1 = f32[4] sine(a1)
  ROOT t1 = (f32[4], f32[4], f32[4]) tuple(d1, a1, d1)
}
ENTRY e {
  x = f32[4] parameter(0)
  k = s32[3] parameter(1)
  i = s32[] parameter(2)
  t = (f32[4], s32[3]) tuple(x, k)
  c = (f32[4], f32[4], f32[4]) conditional(i, t, t), branch_computations={b0, b1}
  g0 = f32[4] get-tuple-element(c), index=0
  g2 = f32[4] get-tuple-element(c), index=2
  ROOT r = f32[4] add(g0, g2)
}
// CHECK:      %b0.clone2 (p0.clone2: (f32[4])) -> (f32[4])
// CHECK:      %b1.clone2 (p1.clone2: (f32[4])) -> (f32[4])
// CHECK:      ENTRY
// CHECK:      %c = (f32[4]{0}) conditional(%i, %{{.*}}, %{{.*}}),
// CHECK-SAME: branch_computations={%b0.clone2, %b1.clone2}
// CHECK-NEXT: %g0 = f32[4]{0} get-tuple-element(%c), index=0
// CHECK-NEXT: %g2 = f32[4]{0} get-tuple-element(%c), index=0
"""
    module = check_pass("simplify-conditional", text)
    for seed, index in ((0, 0), (1, 1), (2, 5)):
        from pass_testlib import random_arguments
        from hlo_common.hlo.parser import parse_module
        args = random_arguments(parse_module(text), seed)
        args[2] = np.int32(index)
        check_same_results(text, module, args=args)


def test_expensive_branches_with_unknown_predicate_stay():
    check_unchanged("simplify-conditional", """
HloModule m
b0 {
  p0 = f32[4,4] parameter(0)
  ROOT d0 = f32[4,4] dot(p0, p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
b1 {
  p1 = f32[4,4] parameter(0)
  ROOT n1 = f32[4,4] negate(p1)
}
ENTRY e {
  x = f32[4,4] parameter(0)
  p = pred[] parameter(1)
  ROOT r = f32[4,4] conditional(p, x, x), true_computation=b0, false_computation=b1
}
""")


def test_constants_in_branches_are_cheap_as_in_xla():
    # testdata/fusion/conditional: jax.lax.cond with a constant in one branch; XLA:GPU selects.
    text = """
HloModule m
on_true {
  tp = f32[4] parameter(0)
  k = f32[] constant(2)
  kb = f32[4] broadcast(k), dimensions={}
  ROOT tr = f32[4] multiply(tp, kb)
}
on_false {
  fp = f32[4] parameter(0)
  ROOT fr = f32[4] log-plus-one(fp)
}
ENTRY e {
  x = f32[4] parameter(0)
  p = pred[] parameter(1)
  ROOT r = f32[4] conditional(p, x, x), true_computation=on_true, false_computation=on_false
}
// CHECK-NOT:  conditional
// CHECK:      ROOT %{{.*}} = f32[4]{0} select(
"""
    module = check_pass("simplify-conditional", text)
    for seed in range(3):
        check_same_results(text, module, seed=seed)
