"""Elementwise opcodes of the interpreter, against hand-derived (Python int / numpy) expectations."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

BF16 = ml_dtypes.bfloat16


def unary(op: str, t: str, x, out: str | None = None, attrs: str = ""):
    x = np.asarray(x)
    n = ",".join(str(d) for d in x.shape)
    text = f"ENTRY e {{ p = {t}[{n}] parameter(0) ROOT r = {out or t}[{n}] {op}(p){attrs} }}"
    return evaluate(parse_module(text), [x])


def binary(op: str, t: str, a, b, out: str | None = None, attrs: str = ""):
    a, b = np.asarray(a), np.asarray(b)
    n = ",".join(str(d) for d in a.shape)
    text = (f"ENTRY e {{ p = {t}[{n}] parameter(0) q = {t}[{n}] parameter(1) "
            f"ROOT r = {out or t}[{n}] {op}(p, q){attrs} }}")
    return evaluate(parse_module(text), [a, b])


def ints(t: str, values):
    et = PRIMITIVE_TYPES[t]
    wide = np.uint64 if et.kind == "unsigned" else np.int64
    return np.array([int(v) for v in values], wide).astype(et.np_dtype)


def limits(t: str) -> tuple[int, int]:
    et = PRIMITIVE_TYPES[t]
    if et.kind == "signed":
        return -(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1
    return 0, (1 << et.bits) - 1


def wrap(v: int, t: str) -> int:
    lo, hi = limits(t)
    span = hi - lo + 1
    return (v - lo) % span + lo


# -- integer arithmetic -----------------------------------------------------------------------------------


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@pytest.mark.parametrize("t", ["s8", "s32", "s64", "u8", "u32", "s4"])
def test_integer_divide_and_remainder(t):
    lo, hi = limits(t)
    vals = sorted({lo, hi, 0, 1, 2, 3, 7, hi // 2} | ({-1, -2, -7} if lo < 0 else set()))
    pairs = [(a, b) for a in vals for b in vals]
    a, b = ints(t, [p[0] for p in pairs]), ints(t, [p[1] for p in pairs])
    q, r = binary("divide", t, a, b), binary("remainder", t, a, b)
    for (x, y), qv, rv in zip(pairs, q.tolist(), r.tolist()):
        if y == 0:
            want_q, want_r = (-1 if lo < 0 else hi), x
        elif lo < 0 and x == lo and y == -1:
            want_q, want_r = lo, 0
        else:
            want_q = _trunc_div(x, y)
            want_r = x - want_q * y
        assert (int(qv), int(rv)) == (want_q, want_r), (t, x, y)


@pytest.mark.parametrize("t", ["s8", "u16", "s32", "u64", "s4", "u2"])
def test_integer_add_multiply_negate_wrap(t):
    lo, hi = limits(t)
    vals = [lo, hi, 0, 1, -1 if lo < 0 else 2, 3]
    pairs = [(a, b) for a in vals for b in vals]
    a, b = ints(t, [p[0] for p in pairs]), ints(t, [p[1] for p in pairs])
    assert [int(v) for v in binary("add", t, a, b).tolist()] == [wrap(x + y, t) for x, y in pairs]
    assert [int(v) for v in binary("subtract", t, a, b).tolist()] == [wrap(x - y, t) for x, y in pairs]
    assert [int(v) for v in binary("multiply", t, a, b).tolist()] == [wrap(x * y, t) for x, y in pairs]
    assert [int(v) for v in unary("negate", t, a).tolist()] == [wrap(-x, t) for x, _ in pairs]


@pytest.mark.parametrize("t", ["s8", "u8", "s32", "u32", "s64", "s4"])
def test_shifts_including_out_of_range_amounts(t):
    et = PRIMITIVE_TYPES[t]
    lo, hi = limits(t)
    values = [v for v in (lo, hi, 1, 5, -5, -1) if lo <= v <= hi]
    amounts = [a for a in (0, 1, 3, et.bits - 1, et.bits, et.bits + 3, -1) if lo <= a <= hi]
    pairs = [(v, s) for v in values for s in amounts]
    a, b = ints(t, [p[0] for p in pairs]), ints(t, [p[1] for p in pairs])
    mask = (1 << et.bits) - 1

    def signed(u):
        return u - (1 << et.bits) if u >> (et.bits - 1) else u

    def as_t(u):  # bit pattern -> value of type t
        return signed(u & mask) if et.kind == "signed" else u & mask

    for op, fn in [
        ("shift-left", lambda v, s: 0 if s >= et.bits else as_t((v & mask) << s)),
        ("shift-right-logical", lambda v, s: 0 if s >= et.bits else as_t((v & mask) >> s)),
        ("shift-right-arithmetic",
         lambda v, s: as_t(signed(v & mask) >> min(s, et.bits - 1))),
    ]:
        got = [int(v) for v in binary(op, t, a, b).tolist()]
        want = [fn(v, s & mask) for v, s in pairs]
        assert got == want, op


@pytest.mark.parametrize("t", ["u8", "s16", "s32", "u64", "s64", "u4"])
def test_clz_and_popcnt(t):
    et = PRIMITIVE_TYPES[t]
    lo, hi = limits(t)
    vals = [v for v in (0, 1, 2, 3, 7, hi, lo, -1, hi // 3) if lo <= v <= hi]
    x = ints(t, vals)
    mask = (1 << et.bits) - 1
    assert [int(v) for v in unary("count-leading-zeros", t, x).tolist()] == \
        [et.bits - (v & mask).bit_length() for v in vals]
    assert [int(v) for v in unary("popcnt", t, x).tolist()] == [bin(v & mask).count("1") for v in vals]


def test_popcnt_of_s4_counts_the_sign_extended_byte_like_xla():
    # -1 has 8 bits set, which wraps to -8 in s4.
    assert unary("popcnt", "s4", ints("s4", [-8, -2, -1, 7])).tolist() == [5, 7, -8, 3]


@pytest.mark.parametrize("t", ["s32", "u32", "s64", "u64", "s8", "u16"])
def test_mulhi(t):
    et = PRIMITIVE_TYPES[t]
    lo, hi = limits(t)
    vals = [v for v in (lo, hi, 0, 1, -1, 12345, -987654, hi // 3 + 7) if lo <= v <= hi]
    pairs = [(a, b) for a in vals for b in vals]
    a, b = ints(t, [p[0] for p in pairs]), ints(t, [p[1] for p in pairs])
    got = [int(v) for v in binary("mulhi", t, a, b).tolist()]
    assert got == [wrap((x * y) >> et.bits, t) for x, y in pairs]


def test_integer_power():
    base = [2, 3, -3, 1, -1, 0, 7]
    exps = [0, 1, 5, 31, 100, -1, -2, -3]
    pairs = [(x, y) for x in base for y in exps]
    got = binary("power", "s32", ints("s32", [p[0] for p in pairs]), ints("s32", [p[1] for p in pairs]))

    def want(x, y):
        if y >= 0:
            return wrap(pow(x, y), "s32")
        return {1: 1, -1: -1 if y % 2 else 1}.get(x, 0)

    assert [int(v) for v in got.tolist()] == [want(x, y) for x, y in pairs]


def test_pred_arithmetic_and_logic():
    a = np.array([0, 0, 1, 1], bool)
    b = np.array([0, 1, 0, 1], bool)
    assert binary("add", "pred", a, b).tolist() == [False, True, True, True]
    assert binary("multiply", "pred", a, b).tolist() == [False, False, False, True]
    assert binary("xor", "pred", a, b).tolist() == [False, True, True, False]
    assert binary("maximum", "pred", a, b).tolist() == [False, True, True, True]
    assert unary("not", "pred", a).tolist() == [True, True, False, False]
    assert binary("power", "pred", a, b).tolist() == [True, False, True, True]


# -- floating point -----------------------------------------------------------------------------------------


def test_bf16_arithmetic_rounds_once_per_op():
    rng = np.random.default_rng(1)
    a = rng.standard_normal(1000).astype(BF16)
    b = rng.standard_normal(1000).astype(BF16)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    for op, fn in [("add", np.add), ("multiply", np.multiply), ("divide", np.divide), ("atan2", np.arctan2)]:
        got = binary(op, "bf16", a, b)
        assert got.dtype == BF16
        np.testing.assert_array_equal(got.view(np.uint16), fn(af, bf).astype(BF16).view(np.uint16))
    got = unary("exponential", "bf16", a)
    np.testing.assert_array_equal(got.view(np.uint16), np.exp(af).astype(BF16).view(np.uint16))


def test_rounding_ops_on_ties():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.0, -0.3, 3.7], np.float32)
    afz = unary("round-nearest-afz", "f32", x)
    even = unary("round-nearest-even", "f32", x)
    np.testing.assert_array_equal(afz, [1, 2, 3, -1, -3, 0, -0.0, -0.0, 4])
    np.testing.assert_array_equal(even, [0, 2, 2, -0.0, -2, 0, -0.0, -0.0, 4])
    assert np.signbit(afz[6]) and np.signbit(afz[7]) and np.signbit(even[3])


def test_sign_of_nan_zero_and_ints():
    s = unary("sign", "f32", np.array([np.nan, -0.0, 0.0, -3, 2, -np.inf], np.float32))
    assert np.isnan(s[0]) and s[1] == 0 and np.signbit(s[1]) and not np.signbit(s[2])
    np.testing.assert_array_equal(s[3:], [-1, 1, -1])
    assert unary("sign", "s8", ints("s8", [-128, 0, 5])).tolist() == [-1, 0, 1]
    c = unary("sign", "c64", np.array([3 + 4j, 0j], np.complex64))
    np.testing.assert_allclose(c, [0.6 + 0.8j, 0])


def test_maximum_minimum_propagate_nan_and_order_signed_zeros():
    a = np.array([np.nan, 1, -0.0, 0.0, 2], np.float32)
    b = np.array([1, np.nan, 0.0, -0.0, -np.inf], np.float32)
    mx, mn = binary("maximum", "f32", a, b), binary("minimum", "f32", a, b)
    assert np.isnan(mx[:2]).all() and np.isnan(mn[:2]).all()
    assert not np.signbit(mx[2]) and not np.signbit(mx[3])
    assert np.signbit(mn[2]) and np.signbit(mn[3])
    assert mx[4] == 2 and mn[4] == -np.inf


def test_clamp_propagates_nan_and_broadcasts_scalar_bounds():
    text = """ENTRY e { lo = f32[] parameter(0) x = f32[4] parameter(1) hi = f32[] parameter(2)
               ROOT c = f32[4] clamp(lo, x, hi) }"""
    x = np.array([-5, 0, 5, np.nan], np.float32)
    out = evaluate(parse_module(text), [np.float32(-1), x, np.float32(2)])
    np.testing.assert_array_equal(out[:3], [-1, 0, 2])
    assert np.isnan(out[3])


def test_select_with_scalar_predicate():
    text = """ENTRY e { p = pred[] parameter(0) a = s32[2] parameter(1) b = s32[2] parameter(2)
               ROOT s = s32[2] select(p, a, b) }"""
    m = parse_module(text)
    a, b = np.array([1, 2], np.int32), np.array([3, 4], np.int32)
    assert evaluate(m, [np.bool_(True), a, b]).tolist() == [1, 2]
    assert evaluate(m, [np.bool_(False), a, b]).tolist() == [3, 4]


def test_float_power_remainder_and_special_functions():
    a = np.array([1, np.nan, 2, -8, 0.25, 7.5], np.float32)
    b = np.array([np.nan, 0, 10, 1 / 3, -0.5, -2], np.float32)
    p = binary("power", "f32", a, b)
    assert p[0] == 1 and p[1] == 1 and p[2] == 1024 and np.isnan(p[3]) and p[4] == 2
    rem = binary("remainder", "f32", np.float32([7.5, -7.5]), np.float32([2, 2]))
    np.testing.assert_array_equal(rem, [1.5, -1.5])
    x = np.array([-2, -0.5, 0, 0.3, 1, 3], np.float64)
    np.testing.assert_allclose(unary("erf", "f64", x), [math.erf(v) for v in x], rtol=1e-14)
    np.testing.assert_allclose(unary("cbrt", "f64", x), np.sign(x) * np.abs(x) ** (1 / 3), rtol=1e-14)
    np.testing.assert_allclose(unary("logistic", "f64", x), 1 / (1 + np.exp(-x)), rtol=1e-14)
    np.testing.assert_allclose(unary("rsqrt", "f64", np.abs(x) + 1), 1 / np.sqrt(np.abs(x) + 1), rtol=1e-14)
    finite = unary("is-finite", "f32", np.float32([1, np.inf, np.nan]), out="pred")
    assert finite.tolist() == [True, False, False]


def test_compare_total_order_and_unsigned_types():
    order = [-np.nan, -np.inf, -1.0, -0.0, 0.0, 1e-45, 2.0, np.inf, np.nan]
    x = np.array(order, np.float32)
    x[0] = -np.abs(x[0]) if not np.signbit(x[0]) else x[0]
    x.view(np.uint32)[0] |= 0x80000000  # a negative NaN
    pairs = [(i, j) for i in range(len(order)) for j in range(len(order))]
    a, b = x[[p[0] for p in pairs]], x[[p[1] for p in pairs]]
    lt = binary("compare", "f32", a, b, out="pred", attrs=", direction=LT, type=TOTALORDER")
    assert lt.tolist() == [i < j for i, j in pairs]
    eq = binary("compare", "f32", a, b, out="pred", attrs=", direction=EQ")
    assert eq.tolist() == [bool(order[i] == order[j]) for i, j in pairs]  # IEEE: -0 == +0, NaN != NaN
    u = binary("compare", "u32", ints("u32", [1, 2**32 - 1]), ints("u32", [2, 1]), out="pred",
               attrs=", direction=LT")
    assert u.tolist() == [True, False]


def test_complex_ops():
    a = np.array([1 + 2j, -3 + 0.5j], np.complex64)
    b = np.array([2 - 1j, 1j], np.complex64)
    np.testing.assert_allclose(binary("multiply", "c64", a, b), a * b)
    np.testing.assert_allclose(binary("divide", "c64", a, b), a / b, rtol=1e-6)
    np.testing.assert_array_equal(unary("abs", "c64", np.array([3 + 4j], np.complex64), out="f32"), [5])
    np.testing.assert_array_equal(unary("real", "c64", a, out="f32"), [1, -3])
    np.testing.assert_array_equal(unary("imag", "c64", a, out="f32"), [2, 0.5])
    text = "ENTRY e { a = f32[2] parameter(0) b = f32[2] parameter(1) ROOT c = c64[2] complex(a, b) }"
    out = evaluate(parse_module(text), [np.float32([1, np.inf]), np.float32([np.inf, 2])])
    assert out.dtype == np.complex64 and out[0].imag == np.inf and out[1].real == np.inf and out[1].imag == 2


def test_complex_atan2_agrees_with_real_atan2_on_real_values():
    y = np.array([1, -1, 0.5, 3], np.complex128)
    x = np.array([1, 2, -1, -0.25], np.complex128)
    got = binary("atan2", "c128", y, x)
    np.testing.assert_allclose(got.real, np.arctan2(y.real, x.real), rtol=1e-12)
    np.testing.assert_allclose(got.imag, 0, atol=1e-12)


def test_complex_division_recovers_infinities_like_c99():
    a = np.array([1 + 1j, 1 + 0j, np.inf + 1j, 2 - 1j], np.complex64)
    b = np.array([complex(np.nan, np.inf), 0j, 1 + 1j, 1 + 1j], np.complex64)
    q = binary("divide", "c64", a, b)
    assert q[0] == 0 and np.signbit(q[0].imag)       # finite / infinite is zero
    assert np.isinf(q[1].real)                         # nonzero / 0 is infinite
    assert np.isinf(q[2].real) and np.isinf(q[2].imag)  # infinite / finite is infinite
    np.testing.assert_allclose(q[3], (2 - 1j) / (1 + 1j), rtol=1e-6)


@pytest.mark.parametrize("b_bits", [0, 0x80000000, 0x3F800000, 0xFF800000, 0x7FC00000, 0x80000001])
def test_maximum_minimum_with_one_value_match_the_elementwise_rule(b_bits):
    # relu's max(x, 0) takes a shortcut when one operand is a single value; it must give the
    # general rule's bits: NaN payloads, infinities, subnormals and both zeros on either side.
    from hlo_common.interpreter.elementwise import float_maximum, float_minimum

    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 1,
                        0x80000001, 0x3F800000, 0xBF800000], np.uint32)
    noise = np.random.default_rng(5).integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)
    a = np.concatenate([special, noise])
    a = a.view(np.float32).reshape(3, -1)
    b = np.array(b_bits, np.uint32).view(np.float32).reshape(1, 1)
    with np.errstate(invalid="ignore"):
        want_max = np.where(a == b, np.where(np.signbit(a), b, a), np.maximum(a, b))
        want_min = np.where(a == b, np.where(np.signbit(a), a, b), np.minimum(a, b))
        assert float_maximum(a, b).tobytes() == want_max.tobytes()
        assert float_minimum(a, b).tobytes() == want_min.tobytes()
