"""hlo_run.compare: run_hlo_module's both-bounds rule, NaN/inf handling, exact integers."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo_run.compare import compare_arrays, compare_values, flatten_leaves


def test_element_fails_only_when_both_bounds_are_exceeded():
    expected = np.array([100.0, 0.001, 1.0], np.float32)
    # 100 -> 100.05: abs 0.05 > 1e-3 but rel 5e-4 <= 1e-3 -> ok
    # 0.001 -> 0.0015: rel 0.5 > 1e-3 but abs 5e-4 <= 1e-3 -> ok
    # 1 -> 1.01: abs 0.01 and rel 0.01 both exceed -> fails
    actual = np.array([100.05, 0.0015, 1.01], np.float32)
    leaf = compare_arrays("out0", actual, expected, 1e-3, 1e-3)
    assert leaf.mismatches == 1
    assert leaf.worst[0][0] == (2,)
    assert abs(leaf.worst[0][3] - 0.01) < 1e-6


def test_nan_matches_nan_but_not_a_number():
    expected = np.array([np.nan, np.nan, 1.0, np.inf, np.inf], np.float32)
    actual = np.array([np.nan, 0.0, np.nan, np.inf, -np.inf], np.float32)
    leaf = compare_arrays("out0", actual, expected, 1e-3, 1e-3)
    assert leaf.mismatches == 3
    assert leaf.max_abs_error == np.inf
    assert sorted(w[0] for w in leaf.worst) == [(1,), (2,), (4,)]


def test_integers_and_pred_compare_exactly_whatever_the_bounds():
    leaf = compare_arrays("out0", np.array([1, 2, 3], np.int32), np.array([1, 2, 4], np.int32), 10.0, 10.0)
    assert leaf.mismatches == 1
    leaf = compare_arrays("out0", np.array([True, False]), np.array([True, True]), 1.0, 1.0)
    assert leaf.mismatches == 1


def test_complex_compares_real_and_imaginary_parts():
    expected = np.array([1 + 1j, 2 + 2j], np.complex64)
    actual = np.array([1 + 1.5j, 2 + 2j], np.complex64)
    assert compare_arrays("out0", actual, expected, 1e-3, 1e-3).mismatches == 1


def test_bf16_uses_float_errors():
    expected = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    actual = np.array([1.0078125, 2.0], ml_dtypes.bfloat16)
    assert compare_arrays("out0", actual, expected, 1e-2, 1e-2).ok
    assert not compare_arrays("out0", actual, expected, 1e-3, 1e-3).ok


def test_tuples_compare_leaf_by_leaf_and_report_shape_differences():
    a = (np.float32([1, 2]), (np.int32([3]), np.float32([4])))
    e = (np.float32([1, 2]), (np.int32([3]), np.float32([5])))
    result = compare_values(a, e)
    assert [leaf.name for leaf in result.leaves] == ["out0", "out1", "out2"]
    assert not result.ok and result.leaves[2].mismatches == 1
    assert "1 element(s) in 1 output(s) differ" in result.one_line()
    bad = compare_values(np.float32([1, 2]), np.float32([1, 2, 3]))
    assert not bad.ok and "f32[2]" in bad.one_line() and "f32[3]" in bad.one_line()
    assert not compare_values((np.float32([1]),), (np.float32([1]), np.float32([1]))).ok


def test_summary_names_the_worst_elements_first():
    expected = np.zeros((2, 3), np.float32)
    actual = np.array([[0, 0.5, 0], [2.0, 0, 0]], np.float32)
    result = compare_values(actual, expected)
    lines = result.summary_lines()
    assert "2 of 6 element(s) differ" in lines[0]
    assert "at [1, 0]: got 2.0, expected 0.0" in lines[1]
    assert "at [0, 1]" in lines[2]


def test_flatten_leaves_skips_tokens():
    class Token:
        pass

    leaves = flatten_leaves((np.float32([1]), Token(), (np.int8([2]),)))
    assert [leaf.dtype for leaf in leaves] == [np.float32, np.int8]
