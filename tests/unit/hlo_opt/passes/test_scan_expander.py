"""ScanExpander ("scan_expander"): scan -> while loop over the scan dimension. The expanded
module (no scan left, so the interpreter runs the while loop, not its scan handler) is checked
against numpy by hand and against the interpreter on the original scan; XLA:CPU agrees with the
interpreter on a reverse scan (checked once by hand: outputs [-1.5, 7, -1.5, 18, 2.5], carry 2.5
for inputs 1..5, init 0.5, body (c * x, x - c))."""

import numpy as np

from hlo_common.interpreter.evaluator import evaluate
from hlo_common.hlo.printer import print_module
from hlo_opt.pipelines import GPU_PIPELINES
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

# Two inputs, two carries (a running sum and a running product), two per-step outputs.
FORWARD = """
HloModule m
body {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  s = f32[] parameter(2)
  p = f32[] parameter(3)
  sum1 = f32[] add(s, x)
  prod1 = f32[] multiply(p, y)
  d = f32[] subtract(sum1, prod1)
  ROOT t = (f32[], f32[], f32[], f32[]) tuple(d, sum1, sum1, prod1)
}
ENTRY e {
  a = f32[6] parameter(0)
  b = f32[6] parameter(1)
  s0 = f32[] parameter(2)
  p0 = f32[] parameter(3)
  ROOT scan = (f32[6], f32[6], f32[], f32[]) scan(a, b, s0, p0), dimensions={0}, num_carries=2, to_apply=body
}
// CHECK:      %scan_condition
// CHECK:      compare(
// CHECK-SAME: direction=LT
// CHECK:      %scan_body
// CHECK:      dynamic-slice(
// CHECK:      dynamic-update-slice(
// CHECK:      while(
// CHECK-SAME: condition=%scan_condition, body=%scan_body
// CHECK-NOT:  scan(
"""

# A reverse scan along dimension 1 of a matrix: each step sees a column.
REVERSE = """
HloModule m
body {
  col = s32[3] parameter(0)
  c = s32[3] parameter(1)
  n = s32[3] add(c, col)
  m = s32[3] multiply(n, col)
  ROOT t = (s32[3], s32[3]) tuple(m, n)
}
ENTRY e {
  a = s32[3,4] parameter(0)
  init = s32[3] parameter(1)
  ROOT scan = (s32[3,4], s32[3]) scan(a, init), dimensions={1}, num_carries=1, is_reverse=true, to_apply=body
}
"""


def test_forward_scan_with_two_carries():
    module = check_pass("scan_expander", FORWARD)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    s0, p0 = np.float32(0.25), np.float32(1.5)
    got = evaluate(module, [a, b, s0, p0])
    s, p, d, run = np.float32(s0), np.float32(p0), [], []
    for i in range(6):
        s, p = np.float32(s + a[i]), np.float32(p * b[i])
        d.append(s - p)
        run.append(s)
    np.testing.assert_allclose(got[0], d, rtol=1e-6)
    np.testing.assert_allclose(got[1], run, rtol=1e-6)
    np.testing.assert_allclose([got[2], got[3]], [s, p], rtol=1e-6)
    check_same_results(FORWARD, module, seed=2)


def test_reverse_scan_along_dimension_1():
    module = check_pass("scan_expander", REVERSE)
    a = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    init = np.array([1, -2, 3], np.int32)
    out, carry = evaluate(module, [a, init])
    want, c = np.zeros((3, 4), np.int64), init.astype(np.int64)
    for j in reversed(range(4)):
        c = c + a[:, j]
        want[:, j] = c * a[:, j]
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(carry, c)
    check_same_results(REVERSE, module, seed=5)


def test_no_scan_no_change():
    check_unchanged("scan_expander", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
""")


def test_scan_inside_a_fusion_is_left_alone():
    text = """
HloModule m
add { x = f32[] parameter(0) c = f32[] parameter(1) s = f32[] add(x, c) ROOT t = (f32[], f32[]) tuple(s, s) }
fused { a = f32[5] parameter(0) i = f32[] parameter(1)
  ROOT scan = (f32[5], f32[]) scan(a, i), dimensions={0}, num_carries=1, to_apply=add }
ENTRY e { a = f32[5] parameter(0) i = f32[] parameter(1)
  ROOT f = (f32[5], f32[]) fusion(a, i), kind=kLoop, calls=fused }
"""
    check_unchanged("scan_expander", text)


def test_runs_after_dynamic_dimension_simplifier_in_optimization():
    optimization = next(spec for spec in GPU_PIPELINES if spec.name == "optimization")
    names = [item.name for item in optimization.items]
    assert names.index("scan_expander") == names.index("dynamic_dimension_simplifier") + 1
    assert names.index("scan_expander") < names.index("stable-sort-expander")


def test_expanded_module_prints_and_reparses():
    module = check_pass("scan_expander", REVERSE)
    assert "scan(" not in print_module(module)
