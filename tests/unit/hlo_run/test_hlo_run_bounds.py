"""Default error bounds fitted to each output's element type; given bounds apply to every output; the
report prints the bounds it used."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from hlo_run.cli import cli
from hlo_run.compare import compare_values, default_bounds

BF16 = ml_dtypes.bfloat16


@pytest.mark.parametrize("dtype, bound", [
    (np.float32, 1e-3), (np.float64, 1e-3), (np.complex64, 1e-3), (np.complex128, 1e-3),
    (BF16, 2e-2), (np.float16, 2e-2),
    (ml_dtypes.float8_e4m3fn, 0.25), (ml_dtypes.float8_e5m2, 0.5), (ml_dtypes.float8_e3m4, 0.125),
    (np.int32, 0.0), (np.uint8, 0.0), (np.bool_, 0.0),
])
def test_default_bounds_by_type(dtype, bound):
    assert default_bounds(dtype) == (bound, bound)


def _next_up(x: np.ndarray) -> np.ndarray:
    bits = x.view(np.uint16) + np.uint16(1)
    return bits.view(x.dtype)


def test_bf16_one_ulp_off_passes_by_default_but_not_with_f32_bounds():
    expected = np.array([1.0, -3.5, 100.0, 0.75], BF16)
    actual = _next_up(expected.copy())
    assert not np.array_equal(actual, expected)
    fitted = compare_values(actual, expected)
    assert fitted.ok and fitted.leaves[0].abs_bound == 2e-2
    assert not compare_values(actual, expected, 1e-3, 1e-3).ok  # run_hlo_module's fixed default


def test_integers_exact_and_given_bound_applies_to_every_output():
    actual = (np.float32([1.0, 2.0]), np.array([1.0], BF16), np.int32([5]))
    expected = (np.float32([1.3, 2.0]), np.array([1.3], BF16), np.int32([6]))
    c = compare_values(actual, expected, abs_bound=0.5)
    assert [(leaf.abs_bound, leaf.rel_bound) for leaf in c.leaves] == [(0.5, 1e-3), (0.5, 2e-2), (0.5, 0.0)]
    assert [leaf.ok for leaf in c.leaves] == [True, True, False]  # integers: exact whatever the bound
    assert c.bounds_lines() == ["out0 (f32[2]): abs 0.5, rel 0.001", "out1 (bf16[1]): abs 0.5, rel 0.02",
                                "out2 (s32[1]): abs 0.5, rel 0"]


TUPLE = """HloModule mixed
ENTRY e {
  p = f32[3] parameter(0)
  c = bf16[3] convert(p)
  i = s32[3] convert(p)
  ROOT t = (f32[3], bf16[3], s32[3]) tuple(p, c, i)
}
"""


def test_report_prints_the_bounds_used(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(TUPLE)
    runner = CliRunner()
    both = ["--platform", "interpreter", "--reference-platform", "interpreter"]
    result = runner.invoke(cli, both + [str(path)])
    assert result.exit_code == 0, result.stderr
    assert ("bounds (by output type): out0 (f32[3]): abs 0.001, rel 0.001; "
            "out1 (bf16[3]): abs 0.02, rel 0.02; out2 (s32[3]): exact") in result.stderr
    result = runner.invoke(cli, ["--platform", "interpreter", "--reference-platform", "interpreter",
                                 "--rel_error_bound=0.1", str(path)])
    assert "bounds (rel given, others by type): out0 (f32[3]): abs 0.001, rel 0.1;" in result.stderr
