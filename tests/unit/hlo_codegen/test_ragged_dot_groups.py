"""ragged-dot's group sizes on the host kernel and in the interpreter, against numpy by hand:
the ragged non-contracting mode with a group-size row per outer lhs dim, and sizes that are
negative (jax's masks: group g holds [start, start + size) with start the sum of the sizes before
it, so a negative size makes its group empty and moves later groups back, and groups may
overlap; every group holding a position adds its product)."""

from __future__ import annotations

import numpy as np
import pytest

from emitter_testlib import fusion_of, link_ptx, nvjitlink_available, reference, run_on_host

TEXT = """f {{ a = f32[{n},11,5] parameter(0) b = f32[3,5,7] parameter(1) g = s64[{n},3] parameter(2)
  ROOT r = f32[{n},11,7] ragged-dot(a, b, g), lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}},
    lhs_ragged_dims={{1}}, rhs_group_dims={{0}} }}"""


def numpy_ragged_dot(lhs: np.ndarray, rhs: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Row i of lhs dim 0 uses sizes[i]; lhs row (i, m) gets lhs[i, m] @ rhs[g] for each group g
    with start_g <= m < start_g + sizes[i, g]."""
    out = np.zeros(lhs.shape[:2] + rhs.shape[2:], np.float64)
    for i in range(lhs.shape[0]):
        start = 0
        for g, size in enumerate(sizes[i]):
            for m in range(lhs.shape[1]):
                if start <= m < start + size:
                    out[i, m] += lhs[i, m].astype(np.float64) @ rhs[g].astype(np.float64)
            start += int(size)
    return out


@pytest.mark.parametrize("sizes", [
    [[4, 3, 2], [0, 11, 0], [11, 0, 0], [2, 2, 2]],      # valid sizes; rows past the groups give 0
    [[7, -7, 7], [2, -3, 2], [-4, 5, 3], [-1, -3, 5]],   # negative sizes: empty and overlapping groups
])
def test_ragged_non_contracting_group_rows(sizes: list[list[int]]) -> None:
    sizes = np.array(sizes, np.int64)
    fusion = fusion_of(TEXT.format(n=len(sizes)))
    rng = np.random.default_rng(7)
    lhs = rng.standard_normal((len(sizes), 11, 5)).astype(np.float32)
    rhs = rng.standard_normal((3, 5, 7)).astype(np.float32)
    want = numpy_ragged_dot(lhs, rhs, sizes)
    (got,) = run_on_host(fusion, [lhs, rhs, sizes])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    (interp,) = reference(fusion, [lhs, rhs, sizes])
    np.testing.assert_allclose(interp, want, rtol=1e-5, atol=1e-5)


def test_ragged_non_contracting_links_for_sm_90() -> None:
    if not nvjitlink_available():
        pytest.skip("PTX linking needs nvJitLink")
    from hlo_codegen.emitters import emit_kernel

    link_ptx(emit_kernel(fusion_of(TEXT.format(n=2))))
