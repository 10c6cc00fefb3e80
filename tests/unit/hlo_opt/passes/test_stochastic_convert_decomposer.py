"""StochasticConvertDecomposer ("stochastic_convert_decomposer"): stochastic-convert (float ->
signed integer) becomes elementwise ops. Expected values are worked by hand from the rule
"|x| rounds up exactly when random / 2^bits < frac(|x|), the sign is put back, out-of-range
values saturate"; random inputs are compared with the interpreter's stochastic-convert."""

import numpy as np
import pytest
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

from hlo_common.interpreter import evaluate
from hlo_opt.pipelines import PLANNED_PASSES


def sc(src: str, rnd: str, dst: str, n: int) -> str:
    return f"""
HloModule m
ENTRY e {{
  x = {src}[{n}] parameter(0)
  r = {rnd}[{n}] parameter(1)
  ROOT s = {dst}[{n}] stochastic-convert(x, r)
}}
"""


def expand(text: str, checks: str = ""):
    return check_pass("stochastic_convert_decomposer", text + checks)


def test_rounds_up_below_the_fraction_and_saturates():
    q = 1 << 30  # 0.25 * 2^32
    x = np.array([2.25, 2.25, -2.25, -2.25, 2.0, 0.75, 130.0, -200.0, 127.5, -128.0], np.float32)
    r = np.array([q - 1, q, 0, q, 0, 3 * q - 1, 0, 0, 0xFFFFFFFF, 0], np.uint32)
    want = np.array([3, 2, -3, -2, 2, 1, 127, -128, 127, -128], np.int8)
    text = sc("f32", "u32", "s8", 10)
    module = expand(text, """
// CHECK:      ENTRY
// CHECK-DAG:  sign(%x)
// CHECK-DAG:  floor(
// CHECK-DAG:  compare({{.*}}), direction=LT
// CHECK-DAG:  direction=LE
// CHECK-DAG:  direction=GE
// CHECK:      ROOT {{.*}} = s8[10]{0} select(
// CHECK-NOT:  stochastic-convert
""")
    np.testing.assert_array_equal(evaluate(module, [x, r]), want)
    check_same_results(text, module, args=[x, r])


def test_f16_fraction_is_scaled_in_f32():
    x = np.array([1.5, 1.5, -0.25, 70000.0 / 2], np.float16)
    r = np.array([0x7FFF, 0x8000, 0x3FFF, 0], np.uint16)  # 0.5 * 2^16 = 0x8000, 0.25 * 2^16 = 0x4000
    module = expand(sc("f16", "u16", "s16", 4), """
// CHECK:      %[[FRAC:[^ ]+]] = f16[4]{0} subtract(
// CHECK:      f32[4]{0} convert(%[[FRAC]])
""")
    np.testing.assert_array_equal(evaluate(module, [x, r]), np.array([2, 1, -1, 32767], np.int16))


@pytest.mark.parametrize("src, rnd, dst", [("f32", "u32", "s32"), ("bf16", "u16", "s8"),
                                           ("f64", "u64", "s64"), ("f16", "u16", "s32")])
def test_matches_the_interpreter_on_random_inputs(src, rnd, dst):
    text = sc(src, rnd, dst, 64)
    rng = np.random.default_rng(7)
    from hlo_common.hlo.dtypes import PRIMITIVE_TYPES

    x = (rng.standard_normal(64) * 60).astype(PRIMITIVE_TYPES[src].np_dtype)
    bits = PRIMITIVE_TYPES[rnd].bits
    r = rng.integers(0, 1 << bits, 64, dtype=np.uint64).astype(PRIMITIVE_TYPES[rnd].np_dtype)
    check_same_results(text, expand(text), args=[x, r])


def test_a_module_without_stochastic_convert_is_left_alone():
    check_unchanged("stochastic_convert_decomposer", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = s8[4] convert(p)
}
""")


def test_registered_not_planned():
    assert "stochastic_convert_decomposer" not in PLANNED_PASSES
