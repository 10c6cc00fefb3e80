"""CholeskyExpander ("cholesky_expander"): cholesky -> a call of a column-by-column while loop;
results checked against numpy's cholesky (not our interpreter's cholesky)."""

import numpy as np
import pytest
from pass_testlib import check_pass, check_unchanged

from hlo_common.interpreter import evaluate

LOWER = """
HloModule m
ENTRY e {
  p = f32[2,3,4,4] parameter(0)
  ROOT c = f32[2,3,4,4] cholesky(p), lower=true
}
// CHECK:      %cholesky_cond
// CHECK:      compare({{.*}}), direction=LT
// CHECK:      %cholesky_body
// CHECK:      f32[6,1,4]{2,1,0} dynamic-slice(
// CHECK:      f32[6,4]{1,0} dot({{.*}}), lhs_batch_dims={0}, lhs_contracting_dims={2}
// CHECK-SAME: rhs_batch_dims={0}, rhs_contracting_dims={1}
// CHECK:      sqrt(
// CHECK:      f32[6,4,4]{2,1,0} dynamic-update-slice(
// CHECK:      %cholesky_expansion
// CHECK:      f32[6,4,4]{2,1,0} reshape(
// CHECK:      while({{.*}}), condition=%cholesky_cond, body=%cholesky_body
// CHECK:      f32[] constant(nan)
// CHECK:      ENTRY %e
// CHECK-NEXT: %p = f32[2,3,4,4]{3,2,1,0} parameter(0)
// CHECK-NEXT: ROOT %{{.*}} = f32[2,3,4,4]{3,2,1,0} call(%p), to_apply=%cholesky_expansion
// CHECK-NOT:  cholesky(
"""

NP_TYPES = {"f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128}


def _hermitian_pd(rng, batch, n, complex_):
    m = rng.normal(size=batch + (n, n))
    if complex_:
        m = m + 1j * rng.normal(size=m.shape)
    return m @ np.conj(np.swapaxes(m, -1, -2)) + n * np.eye(n)


def test_lower_batched_becomes_while_loop_and_matches_numpy():
    module = check_pass("cholesky_expander", LOWER)
    a = _hermitian_pd(np.random.default_rng(0), (2, 3), 4, False)
    want = np.linalg.cholesky(a)
    a[0, 1] = np.tril(a[0, 1]) + 7 * np.triu(np.ones((4, 4)), 1)  # the upper triangle is not read
    got = evaluate(module, [a.astype(np.float32)])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("et,lower", [("f64", "false"), ("c64", "true"), ("c128", "false")])
def test_types_and_upper_match_numpy(et, lower):
    text = f"""
HloModule m
ENTRY e {{
  p = {et}[3,5,5] parameter(0)
  ROOT c = {et}[3,5,5] cholesky(p), lower={lower}
}}
// CHECK-NOT: cholesky(
"""
    module = check_pass("cholesky_expander", text)
    a = _hermitian_pd(np.random.default_rng(1), (3,), 5, et.startswith("c"))
    got = evaluate(module, [a.astype(NP_TYPES[et])])
    low = np.linalg.cholesky(a)
    want = low if lower == "true" else np.conj(np.swapaxes(low, -1, -2))
    tol = 1e-4 if et in ("c64",) else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_not_positive_definite_gives_nans_for_that_matrix_only():
    text = LOWER.split("// CHECK")[0]
    module = check_pass("cholesky_expander", text)
    a = _hermitian_pd(np.random.default_rng(2), (2, 3), 4, False)
    a[1, 2] = -a[1, 2]  # negative definite
    a[0, 0, 2, 2] = np.nan
    got = evaluate(module, [a.astype(np.float32)])
    assert np.isnan(got[1, 2]).all() and np.isnan(got[0, 0]).all()
    ok = np.ones((2, 3), bool)
    ok[1, 2] = ok[0, 0] = False
    np.testing.assert_allclose(got[ok], np.linalg.cholesky(a[ok]), rtol=1e-4, atol=1e-5)


def test_two_choleskys_get_their_own_computations():
    text = """
HloModule m
ENTRY e {
  p = f32[4,4] parameter(0)
  q = f64[3,3] parameter(1)
  a = f32[4,4] cholesky(p), lower=true
  b = f64[3,3] cholesky(q), lower=false
  ROOT t = (f32[4,4], f64[3,3]) tuple(a, b)
}
// CHECK-DAG: call(%p), to_apply=%cholesky_expansion
// CHECK-DAG: call(%q), to_apply=%cholesky_expansion.1
// CHECK-NOT: cholesky(
"""
    module = check_pass("cholesky_expander", text)
    rng = np.random.default_rng(3)
    p, q = _hermitian_pd(rng, (), 4, False), _hermitian_pd(rng, (), 3, False)
    a, b = evaluate(module, [p.astype(np.float32), q])
    np.testing.assert_allclose(a, np.linalg.cholesky(p), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, np.linalg.cholesky(q).T, rtol=1e-10, atol=1e-10)


def test_no_cholesky_no_change():
    check_unchanged("cholesky_expander", """
HloModule m
ENTRY e {
  p = f32[4,4] parameter(0)
  ROOT t = f32[4,4] transpose(p), dimensions={1,0}
}
""")
