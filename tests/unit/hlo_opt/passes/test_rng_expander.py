"""RngExpander ("rng-expander"): rng -> rng-get-and-update-state + a call of a Philox computation.

The expected numbers are XLA's distribution formulas (`prng.cc`) written in numpy on top of the
interpreter's Philox (`hlo_common.interpreter.rng.philox_bits`, itself checked against XLA:CPU),
fed with the state the interpreter's rng-get-and-update-state starts from; the expanded module
is evaluated by the interpreter op by op, a different code path."""

import math

import numpy as np
import pytest
from pass_testlib import check_pass, check_unchanged

from hlo_common.interpreter import evaluate
from hlo_common.interpreter.rng import philox_bits
from hlo_opt.pipelines import PLANNED_PASSES

STATE0 = 0x7012395  # where rng-get-and-update-state starts (XLA's rng_state initializer)


def rng_module(shape: str, dist: str, a: str, b: str, scalar: str) -> str:
    return f"""
HloModule m
ENTRY e {{
  a = {scalar}[] constant({a})
  b = {scalar}[] constant({b})
  ROOT r = {shape} rng(a, b), distribution={dist}
}}
"""


def expand_and_evaluate(text: str, checks: str = ""):
    module = check_pass("rng-expander", text + checks)
    return np.asarray(evaluate(module, []))


def philox_words(dims, width, state=STATE0):
    bits, _ = philox_bits(0, state, tuple(dims), width)
    return bits


def uniform01(dims, dtype, state=STATE0):
    """XLA's ConvertRandomBitsToUniformFloatingPoint with [0, 1)."""
    width, mantissa = (64, 52) if dtype == np.float64 else (32, 23)
    top = philox_words(dims, width, state) >> np.uint64(width - mantissa)
    return top.astype(dtype) * dtype(2.0 ** -mantissa)


def test_uniform_f32_is_a_call_on_the_advanced_state():
    text = rng_module("f32[2,3,5]", "rng_uniform", "-2", "3", "f32")
    got = expand_and_evaluate(text, """
// CHECK:      %rng_uniform_f32_2x3x5
// CHECK:      ENTRY
// CHECK-DAG:  %[[KEY:[^ ]+]] = u64[] constant(0)
// CHECK-DAG:  %[[STATE:[^ ]+]] = u64[2]{0} rng-get-and-update-state(), delta=30
// CHECK:      call(%[[KEY]], %[[STATE]], %a, %b), to_apply=%rng_uniform_f32_2x3x5
// CHECK-NOT:  rng(
""")
    want = uniform01((2, 3, 5), np.float32) * np.float32(5) + np.float32(-2)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.min() >= -2 and got.max() < 3


def test_uniform_f64_uses_two_words_per_element():
    text = rng_module("f64[7]", "rng_uniform", "0", "1", "f64")
    got = expand_and_evaluate(text, "// CHECK: rng-get-and-update-state(), delta=14\n")
    np.testing.assert_array_equal(got, uniform01((7,), np.float64))


@pytest.mark.parametrize("shape, et, lo, hi", [("s32[4,3]", "s32", -7, 5), ("u32[9]", "u32", 3, 1000),
                                               ("s64[5]", "s64", -(1 << 40), 1 << 41)])
def test_uniform_int_is_xlas_remainder_formula(shape, et, lo, hi):
    dims = tuple(int(d) for d in shape[shape.index("[") + 1:-1].split(","))
    got = expand_and_evaluate(rng_module(shape, "rng_uniform", str(lo), str(hi), et))
    width = 64 if et.endswith("64") else 32
    span = (hi - lo) % (1 << width)
    dist = [int(x) % span for x in philox_words(dims, width).reshape(-1)]
    want = [lo + d // 2 + (d - d // 2) for d in dist]  # = lo + d, as XLA adds the two halves
    assert [int(x) for x in got.reshape(-1)] == want
    assert got.min() >= lo and got.max() < hi


def box_muller(u0, u1):
    u0 = np.maximum(u0, np.float32(1e-7))
    r = np.sqrt(-2.0 * np.log(u0.astype(np.float64)))
    v = 2.0 * math.pi * u1.astype(np.float64)
    return np.sin(v) * r, np.cos(v) * r


@pytest.mark.parametrize("dims", [(2, 3, 5), (3, 5), ()])
def test_normal_is_box_muller_along_xlas_split_dimension(dims):
    shape = f"f32[{','.join(map(str, dims))}]"
    got = expand_and_evaluate(rng_module(shape, "rng_normal", "1.5", "2", "f32"))
    # SplitShapeIntoHalves: the first even dimension, else the largest; uniform pairs sit next
    # to each other along a new dimension after it.
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), int(np.argmax(dims)) if dims else 0)
    if dims:
        concat = dims[:split] + ((dims[split] + 1) // 2, 2) + dims[split + 1:]
    else:
        concat = (2,)
    u = uniform01(concat, np.float32)
    z0, z1 = box_muller(np.take(u, [0], axis=split + 1 if dims else 0),
                        np.take(u, [1], axis=split + 1 if dims else 0))
    if dims:
        z = np.concatenate([z0, z1], axis=split + 1).reshape(
            dims[:split] + (concat[split] * 2,) + dims[split + 1:])
        z = z[tuple(slice(0, d) for d in dims)]
    else:
        z = z0.reshape(())
    np.testing.assert_allclose(got, 1.5 + 2 * z, rtol=1e-5, atol=1e-5)


def test_half_precision_is_drawn_in_f32_and_converted():
    text = rng_module("f16[6]", "rng_uniform", "0", "4", "f16")
    got = expand_and_evaluate(text, """
// CHECK:      %rng_uniform_f32_6
// CHECK:      ENTRY
// CHECK-DAG:  f32[] convert(%a)
// CHECK-DAG:  f32[] convert(%b)
// CHECK:      %[[CALL:[^ ]+]] = f32[6]{0} call(
// CHECK:      f16[6]{0} convert(%[[CALL]])
""")
    want = (uniform01((6,), np.float32) * np.float32(4)).astype(np.float16)
    np.testing.assert_array_equal(got, want)


def test_second_rng_draws_from_the_advanced_state_and_shares_the_computation():
    text = """
HloModule m
ENTRY e {
  a = f32[] constant(0)
  b = f32[] constant(1)
  r1 = f32[5] rng(a, b), distribution=rng_uniform
  r2 = f32[5] rng(a, b), distribution=rng_uniform
  ROOT t = (f32[5], f32[5]) tuple(r1, r2)
}
"""
    module = check_pass("rng-expander", text + """
// CHECK:      %rng_uniform_f32_5
// CHECK-NOT:  %rng_uniform_f32_5
// CHECK:      ENTRY
""")
    r1, r2 = (np.asarray(x) for x in evaluate(module, []))
    np.testing.assert_array_equal(r1, uniform01((5,), np.float32))
    np.testing.assert_array_equal(r2, uniform01((5,), np.float32, STATE0 + 5))


def test_no_rng_and_narrow_integers_are_left_alone():
    check_unchanged("rng-expander", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
""")
    check_unchanged("rng-expander", rng_module("s8[4]", "rng_uniform", "0", "9", "s8"))


def test_registered_not_planned():
    assert "rng-expander" not in PLANNED_PASSES
