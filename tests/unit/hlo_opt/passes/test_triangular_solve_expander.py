"""TriangularSolveExpander ("triangular_solve_expander"): triangular-solve -> a call of a
forward-substitution while loop; every attribute combination checked against numpy's solve."""

import itertools

import numpy as np
import pytest
from pass_testlib import check_pass, check_unchanged

from hlo_common.interpreter import evaluate

LEFT_LOWER = """
HloModule m
ENTRY e {
  a = f32[4,4] parameter(0)
  b = f32[4,3] parameter(1)
  ROOT x = f32[4,3] triangular-solve(a, b), left_side=true, lower=true,
      unit_diagonal=true, transpose_a=NO_TRANSPOSE
}
// CHECK:      %triangular_solve_cond
// CHECK:      %triangular_solve_body
// CHECK:      f32[1,3]{1,0} dot({{.*}}), lhs_batch_dims={0}, lhs_contracting_dims={1}
// CHECK-SAME: rhs_batch_dims={0}, rhs_contracting_dims={1}
// CHECK:      f32[1,3]{1,0} divide(
// CHECK:      f32[1,4,3]{2,1,0} dynamic-update-slice(
// CHECK:      %triangular_solve_expansion
// CHECK:      compare({{.*}}), direction=LE
// CHECK:      compare({{.*}}), direction=EQ
// CHECK-NOT:  reverse(
// CHECK:      while({{.*}}), condition=%triangular_solve_cond, body=%triangular_solve_body
// CHECK:      ENTRY %e
// CHECK:      ROOT %{{.*}} = f32[4,3]{1,0} call(%a, %b), to_apply=%triangular_solve_expansion
// CHECK-NOT:  triangular-solve(
"""

NP_TYPES = {"f32": np.float32, "c128": np.complex128}


def _numpy_solve(a, b, left, lower, transpose, unit):
    n = a.shape[-1]
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t[..., np.arange(n), np.arange(n)] = 1
    op = {"NO_TRANSPOSE": t, "TRANSPOSE": np.swapaxes(t, -1, -2),
          "ADJOINT": np.conj(np.swapaxes(t, -1, -2))}[transpose]
    if left:
        return np.linalg.solve(op, b)
    return np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


def test_left_lower_unit_is_a_while_loop():
    module = check_pass("triangular_solve_expander", LEFT_LOWER)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(4, 4)), rng.normal(size=(4, 3))
    got = evaluate(module, [a.astype(np.float32), b.astype(np.float32)])
    want = _numpy_solve(a, b, True, True, "NO_TRANSPOSE", True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("et,left,lower,transpose,unit", [
    (et, left, lower, transpose, unit)
    for et, (left, lower, unit), transpose in itertools.product(
        ["f32", "c128"], itertools.product([True, False], repeat=3),
        ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])])
def test_every_variant_matches_numpy(et, left, lower, transpose, unit):
    b_dims = (2, 3, 4, 3) if left else (2, 3, 3, 4)
    flag = {True: "true", False: "false"}
    text = f"""
HloModule m
ENTRY e {{
  a = {et}[2,3,4,4] parameter(0)
  b = {et}[{",".join(map(str, b_dims))}] parameter(1)
  ROOT x = {et}[{",".join(map(str, b_dims))}] triangular-solve(a, b), left_side={flag[left]},
      lower={flag[lower]},
      unit_diagonal={flag[unit]}, transpose_a={transpose}
}}
// CHECK: while(
// CHECK-NOT: triangular-solve(
"""
    module = check_pass("triangular_solve_expander", text)
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 3, 4, 4)) + 4 * np.eye(4), rng.normal(size=b_dims)
    if et == "c128":
        a, b = a + 1j * rng.normal(size=a.shape), b + 1j * rng.normal(size=b.shape)
    got = evaluate(module, [a.astype(NP_TYPES[et]), b.astype(NP_TYPES[et])])
    tol = 1e-4 if et == "f32" else 1e-10
    np.testing.assert_allclose(got, _numpy_solve(a, b, left, lower, transpose, unit), rtol=tol, atol=tol)


def test_no_triangular_solve_no_change():
    check_unchanged("triangular_solve_expander", """
HloModule m
ENTRY e {
  a = f32[4,4] parameter(0)
  ROOT t = f32[4,4] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""")
