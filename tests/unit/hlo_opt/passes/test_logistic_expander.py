"""LogisticExpander ("logistic-expander"): logistic(x) -> 1 / (1 + exp(-x))."""

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

LOGISTIC = """
HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  ROOT l = f32[8] logistic(p)
}
// CHECK:      %[[ONE:.*]] = f32[] constant(1)
// CHECK-NEXT: %[[B:.*]] = f32[8]{0} broadcast(%[[ONE]]), dimensions={}
// CHECK-NEXT: %[[NEG:.*]] = f32[8]{0} negate(%p)
// CHECK-NEXT: %[[EXP:.*]] = f32[8]{0} exponential(%[[NEG]])
// CHECK-NEXT: %[[ADD:.*]] = f32[8]{0} add(%[[B]], %[[EXP]])
// CHECK-NEXT: ROOT %{{.*}} = f32[8]{0} divide(%[[B]], %[[ADD]])
// CHECK-NOT:  logistic
"""


def test_logistic_becomes_one_over_one_plus_exp():
    module = check_pass("logistic-expander", LOGISTIC)
    check_same_results(LOGISTIC, module)


def test_scalar_and_bf16_logistics_keep_their_types():
    text = """
HloModule m
ENTRY e {
  p = bf16[2,3] parameter(0)
  s = f32[] parameter(1)
  a = bf16[2,3] logistic(p)
  b = f32[] logistic(s)
  ROOT t = (bf16[2,3], f32[]) tuple(a, b)
}
// CHECK-NOT:  logistic
// CHECK-DAG:  bf16[] constant(1)
// CHECK-DAG:  f32[] constant(1)
// CHECK-DAG:  bf16[2,3]{1,0} divide(
// CHECK-DAG:  f32[] divide(
"""
    module = check_pass("logistic-expander", text)
    check_same_results(text, module, seed=3)


def test_no_logistic_no_change():
    check_unchanged("logistic-expander", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT t = f32[4] tanh(p)
}
""")
