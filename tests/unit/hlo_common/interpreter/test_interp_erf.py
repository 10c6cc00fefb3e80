"""The interpreter's own vectorized erf against Python's math.erf (an independent libm value)."""

import math

import numpy as np

from hlo_common.interpreter.arith import erf


def test_erf_matches_math_erf_in_float64():
    x = np.concatenate([np.linspace(-7.0, 7.0, 14001), [2.9999999, 3.0, 3.0000001, 1e-300, -1e-12]])
    got = erf(x)
    want = np.array([math.erf(v) for v in x])
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-300)
    assert rel.max() < 1e-14


def test_erf_special_values_and_dtype():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    got = erf(x)
    assert got.dtype == np.float32
    assert got[0] == 0 and not np.signbit(got[0]) and np.signbit(got[1])
    assert got[2] == 1 and got[3] == -1 and np.isnan(got[4])
