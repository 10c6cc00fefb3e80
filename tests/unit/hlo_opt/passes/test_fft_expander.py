"""FftExpander ("fft_expander"): fft -> dots with DFT matrices built from iota, cos and sin;
every fft_type checked against numpy.fft (not our interpreter's fft)."""

import numpy as np
import pytest
from pass_testlib import check_pass, check_unchanged

from hlo_common.interpreter import evaluate

RFFT = """
HloModule m
ENTRY e {
  x = f32[3,9] parameter(0)
  ROOT y = c64[3,5] fft(x), fft_type=RFFT, fft_length={9}
}
// CHECK:      %fft_expansion
// CHECK:      c64[3,9]{1,0} complex(%x
// CHECK:      s32[9,5]{1,0} iota(), iota_dimension=0
// CHECK:      s32[9,5]{1,0} remainder(
// CHECK:      f32[9,5]{1,0} cosine(
// CHECK:      f32[9,5]{1,0} sine(
// CHECK:      c64[9,5]{1,0} complex(
// CHECK:      c64[3,5]{1,0} dot({{.*}}), lhs_contracting_dims={1}, rhs_contracting_dims={0}
// CHECK-SAME: operand_precision={highest,highest}
// CHECK-NOT:  transpose(
// CHECK:      ENTRY %e
// CHECK-NEXT: %x = f32[3,9]{1,0} parameter(0)
// CHECK-NEXT: ROOT %{{.*}} = c64[3,5]{1,0} call(%x), to_apply=%fft_expansion
// CHECK-NOT:  fft(
"""

NP_TYPES = {"c64": np.complex64, "c128": np.complex128, "f32": np.float32, "f64": np.float64}
NUMPY_FFT = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn, "IRFFT": np.fft.irfftn}
CASES = [  # fft_type, input type, input dims, fft_length, output type, output dims
    ("FFT", "c64", (3, 8), (8,), "c64", (3, 8)),
    ("FFT", "c64", (2, 3, 4, 5), (3, 4, 5), "c64", (2, 3, 4, 5)),
    ("IFFT", "c128", (2, 5, 6), (5, 6), "c128", (2, 5, 6)),
    ("RFFT", "f64", (2, 4, 6, 8), (4, 6, 8), "c128", (2, 4, 6, 5)),
    ("IRFFT", "c64", (3, 5), (8,), "f32", (3, 8)),
    ("IRFFT", "c128", (2, 3, 4), (3, 7), "f64", (2, 3, 7)),
    ("IRFFT", "c128", (4, 2, 6), (4, 2, 10), "f64", (4, 2, 10)),
]


def _text(kind, it, idims, lengths, ot, odims):
    def d(v):
        return ",".join(map(str, v))
    return f"""
HloModule m
ENTRY e {{
  x = {it}[{d(idims)}] parameter(0)
  ROOT y = {ot}[{d(odims)}] fft(x), fft_type={kind}, fft_length={{{d(lengths)}}}
}}
// CHECK: dot(
// CHECK-NOT: fft(
"""


def _input(it, dims, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=dims)
    if it.startswith("c"):
        x = x + 1j * rng.normal(size=dims)
    return x.astype(NP_TYPES[it])


def test_rfft_is_one_dot_with_a_dft_matrix():
    module = check_pass("fft_expander", RFFT)
    x = _input("f32", (3, 9))
    np.testing.assert_allclose(evaluate(module, [x]), np.fft.rfft(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}_{c[1]}_{'x'.join(map(str, c[2]))}")
def test_every_fft_type_matches_numpy(case):
    kind, it, idims, lengths, ot, _ = case
    module = check_pass("fft_expander", _text(*case))
    x = _input(it, idims, seed=1)
    axes = tuple(range(len(idims) - len(lengths), len(idims)))
    wide = np.complex128 if it.startswith("c") else np.float64
    want = NUMPY_FFT[kind](x.astype(wide), s=lengths, axes=axes)
    got = evaluate(module, [x])
    assert got.dtype == NP_TYPES[ot]
    tol = 1e-4 if ot in ("c64", "f32") else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_long_axis_angles_stay_exact():
    case = ("FFT", "c128", (1, 4096), (4096,), "c128", (1, 4096))
    module = check_pass("fft_expander", _text(*case))
    x = _input("c128", (1, 4096), seed=2)
    np.testing.assert_allclose(evaluate(module, [x]), np.fft.fft(x), rtol=1e-9, atol=1e-9)


def test_axis_too_long_for_a_dft_matrix_is_left_alone():
    check_unchanged("fft_expander", """
HloModule m
ENTRY e {
  x = c64[8192] parameter(0)
  ROOT y = c64[8192] fft(x), fft_type=FFT, fft_length={8192}
}
""")


def test_no_fft_no_change():
    check_unchanged("fft_expander", """
HloModule m
ENTRY e {
  x = c64[8] parameter(0)
  ROOT y = c64[8] negate(x)
}
""")
