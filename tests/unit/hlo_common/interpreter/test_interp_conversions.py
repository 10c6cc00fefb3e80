"""convert, bitcast-convert, reduce-precision and stochastic-convert in the interpreter."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

BF16 = ml_dtypes.bfloat16


def convert(x, src: str, dst: str, op: str = "convert", out_dims: str | None = None, attrs: str = ""):
    x = np.asarray(x)
    dims = ",".join(str(d) for d in x.shape)
    out = out_dims if out_dims is not None else dims
    text = f"ENTRY e {{ p = {src}[{dims}] parameter(0) ROOT r = {dst}[{out}] {op}(p){attrs} }}"
    return evaluate(parse_module(text), [x])


FLOATS = [0.0, -0.0, 0.5, -0.5, 1.9, -1.9, 127.5, 128.0, -129.0, 255.9, 300.0, -300.0, 3e9, -3e9,
          2.0**31, -2.0**31, 2.0**63, -2.0**63, 2.0**64, 1e30, np.inf, -np.inf, np.nan]


def _saturate(v: float, t: str) -> int:
    et = PRIMITIVE_TYPES[t]
    if et.kind == "signed":
        lo, hi = -(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1
    else:
        lo, hi = 0, (1 << et.bits) - 1
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return hi if v > 0 else lo
    return min(max(math.trunc(v), lo), hi)


@pytest.mark.parametrize("src", ["f32", "f64", "bf16"])
@pytest.mark.parametrize("dst", ["s8", "u8", "s32", "u32", "s64", "u64", "s4"])
def test_float_to_int_truncates_and_saturates_nan_to_zero(src, dst):
    x = np.array(FLOATS, np.float64).astype(PRIMITIVE_TYPES[src].np_dtype)
    got = convert(x, src, dst)
    assert got.dtype == PRIMITIVE_TYPES[dst].np_dtype
    assert [int(v) for v in got.tolist()] == [_saturate(float(v), dst) for v in x.astype(np.float64)]


def test_int_to_int_wraps_and_to_pred_tests_nonzero():
    x = np.array([-129, 128, 255, 256, -1, 7, 8], np.int64)
    assert convert(x, "s64", "s8").tolist() == [127, -128, -1, 0, -1, 7, 8]
    assert convert(x, "s64", "u8").tolist() == [127, 128, 255, 0, 255, 7, 8]
    assert convert(x, "s64", "s4").tolist() == [-1, 0, -1, 0, -1, 7, -8]
    assert convert(np.float32([0, -0.0, np.nan, 0.1]), "f32", "pred").tolist() == [False, False, True, True]
    assert convert(np.array([True, False]), "pred", "bf16").astype(np.float32).tolist() == [1, 0]


def test_int_and_float_narrowing_round_to_nearest_even():
    # 257 lies halfway between the bf16 values 256 and 258: ties go to the even mantissa (256).
    assert convert(np.int32([257, 259, 16777217]), "s32", "bf16").astype(np.float32).tolist() == \
        [256, 260, 16777216]
    assert convert(np.int64([16777217, 16777219]), "s64", "f32").tolist() == [16777216, 16777220]
    x = np.float32([1 + 2**-8, 1 + 3 * 2**-8, 65520, 1e-8])
    got = convert(x, "f32", "bf16").astype(np.float32)
    assert got[0] == 1 and got[1] == 1 + 2**-6
    h = convert(x, "f32", "f16")
    assert h[0] == np.float16(1 + 2**-8) and np.isinf(h[2]) and h[3] == np.float16(1e-8)
    f8 = convert(np.float32([448, 464, 500, -1e6]), "f32", "f8e4m3fn").astype(np.float32)
    assert f8[0] == 448 and f8[1] == 448 and np.isnan(f8[3])  # e4m3fn has no inf: overflow is NaN


def test_complex_conversions():
    c = np.complex64([1.5 + 2j, -3 - 1j])
    assert convert(c, "c64", "f32").tolist() == [1.5, -3]
    assert convert(np.float32([2, -1]), "f32", "c128").tolist() == [2 + 0j, -1 + 0j]


def test_bitcast_convert_same_and_different_widths():
    x = np.float32([1.5, -2.0, 1e-3])
    np.testing.assert_array_equal(convert(x, "f32", "s32", "bitcast-convert"), x.view(np.int32))
    np.testing.assert_array_equal(convert(x, "f32", "u8", "bitcast-convert", out_dims="3,4"),
                                  x.view(np.uint8).reshape(3, 4))
    u16 = np.arange(6, dtype=np.uint16).reshape(3, 2) * 9000
    np.testing.assert_array_equal(convert(u16, "u16", "f32", "bitcast-convert", out_dims="3"),
                                  u16.reshape(-1).view(np.float32))
    b = np.array([1, -2], BF16)
    np.testing.assert_array_equal(convert(b, "bf16", "s16", "bitcast-convert"), b.view(np.int16))
    assert convert(np.uint8([0, 1, 4]), "u8", "pred", "bitcast-convert").tolist() == [False, True, True]


@pytest.mark.parametrize("exponent_bits, mantissa_bits, dtype", [(8, 7, BF16), (5, 10, np.float16)])
def test_reduce_precision_matches_narrow_types_in_their_normal_range(exponent_bits, mantissa_bits, dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(2000) * 50).astype(np.float32)
    x = np.concatenate([x, np.float32([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-11), 65504, 65520, 1e6, np.inf])])
    got = convert(x, "f32", "f32", "reduce-precision",
                  attrs=f", exponent_bits={exponent_bits}, mantissa_bits={mantissa_bits}")
    with np.errstate(over="ignore"):
        want = x.astype(dtype).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_reduce_precision_flushes_and_keeps_nan():
    x = np.float32([1e-5, -1e-5, 7e4, -7e4, np.nan, 3.0, 6.0])
    got = convert(x, "f32", "f32", "reduce-precision", attrs=", exponent_bits=5, mantissa_bits=0")
    assert got[0] == 0 and np.signbit(got[1]) and got[1] == 0  # f16 range: denormals flush to zero
    assert got[2] == np.inf and got[3] == -np.inf and np.isnan(got[4])
    # With no mantissa bits a tie rounds to the even exponent field: 3 = 1.5*2^1 (field 128) -> 2,
    # 6 = 1.5*2^2 (field 129) -> 8.
    assert got[5] == 2 and got[6] == 8


def test_stochastic_convert_rounds_up_when_random_is_below_the_fraction():
    x = np.float32([0.25, 0.25, -1.75, -1.75, 2.0, 1e10, -1e10, np.nan])
    r = np.uint32([0x3FFFFFFF, 0x40000000, 0xBFFFFFFF, 0xC0000000, 0, 0, 0, 0])
    text = ("ENTRY e { a = f32[8] parameter(0) b = u32[8] parameter(1) "
            "ROOT r = s32[8] stochastic-convert(a, b) }")
    got = evaluate(parse_module(text), [x, r])
    # fraction 0.25 -> 0x40000000: r < fraction rounds |x| up; signs are restored; values saturate.
    assert got.tolist() == [1, 0, -2, -1, 2, 2**31 - 1, -2**31, 0]


def test_bitcast_convert_packs_sub_byte_elements_low_bits_first():
    nibbles = np.array([[1, 2], [3, 4], [-1, 5], [7, -8]], ml_dtypes.int4)
    packed = convert(nibbles, "s4", "s8", "bitcast-convert", out_dims="4")
    # element k of the minor dimension holds bits [4k, 4k+4): [1, 2] -> 0x21
    assert packed.tolist() == [0x21, 0x43, 0x5F, -0x79]
    back = convert(packed, "s8", "s4", "bitcast-convert", out_dims="4,2")
    np.testing.assert_array_equal(back.astype(np.int8), nibbles.astype(np.int8))
    crumbs = convert(np.uint8([0b11100100]), "u8", "u2", "bitcast-convert", out_dims="1,4")
    assert crumbs.astype(np.uint8).tolist() == [[0, 1, 2, 3]]


def test_bitcast_convert_moves_the_codes_of_sub_byte_floats():
    f4 = ml_dtypes.float4_e2m1fn
    x = np.array([[1.0, -2.0], [0.5, 6.0], [-0.0, 3.0]], f4)
    codes = x.view(np.uint8) & 0xF  # e2m1 codes: 1.0 = 0x2, -2.0 = 0xC, 6.0 = 0x7, -0 = 0x8
    packed = convert(x, "f4e2m1fn", "u8", "bitcast-convert", out_dims="3")
    assert packed.tolist() == (codes[:, 0] | codes[:, 1] << 4).tolist() == [0xC2, 0x71, 0x58]
    back = convert(packed, "u8", "f4e2m1fn", "bitcast-convert", out_dims="3,2")
    assert back.dtype == f4 and np.array_equal(back.view(np.uint8) & 0xF, codes)
    ints = convert(x, "f4e2m1fn", "s4", "bitcast-convert")
    assert ints.astype(np.int8).tolist() == [[2, -4], [1, 7], [-8, 5]]
