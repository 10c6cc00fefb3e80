"""Interpreter handlers for type conversion: convert, bitcast-convert, reduce-precision,
stochastic-convert.

convert follows XLA: float to integer truncates toward zero and saturates at the type's limits,
NaN becomes 0; integer to integer wraps; anything to pred is `!= 0`; narrowing floats round to
nearest even (through ml_dtypes; integers to narrow floats go through f32 as Eigen does).
bitcast-convert reinterprets bits; between widths the narrow side has one extra minor dimension,
little-endian as on every XLA host. reduce-precision is XLA's bit recipe (round to nearest even
on the mantissa, then flush under/overflowing exponents to signed zero/infinity; NaN stays NaN).
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.interpreter.arith import (
    F32, as_unsigned, down, float_bits_dtype, from_bits, int_compute, up, wrap_int,
)
from hlo_common.interpreter.registry import register


def convert_array(x: np.ndarray, src: PrimitiveType, dst: PrimitiveType) -> np.ndarray:
    """XLA's `convert` from element type `src` to `dst` (see the module docstring)."""
    x = np.asarray(x)
    if src is dst:
        return x
    if dst.is_pred:
        return np.asarray(int_compute(x) != 0)
    if src.is_complex and not dst.is_complex:
        x = np.real(x)
        src = PRIMITIVE_TYPES["f32" if src.name == "c64" else "f64"]
    if dst.is_integer:
        if src.is_integer or src.is_pred:
            return down(int_compute(x).astype(np.int64 if src.kind != "unsigned" else np.uint64), dst)
        return float_to_int(up(x), dst)
    if src.is_integer or src.is_pred:
        xi = int_compute(x)
        if dst.is_low_precision_float:  # through f32, as Eigen's narrow-float constructors do
            return xi.astype(F32).astype(dst.np_dtype)
        return xi.astype(dst.np_dtype)
    return up(x).astype(dst.np_dtype)


def float_to_int(x: np.ndarray, dst: PrimitiveType) -> np.ndarray:
    """Truncate toward zero, saturate at dst's limits, NaN -> 0 (all comparisons exact in f64)."""
    t = np.trunc(x.astype(np.float64))
    if dst.kind == "signed":
        lo, hi = -(1 << (dst.bits - 1)), (1 << (dst.bits - 1)) - 1
        wide = np.int64
    else:
        lo, hi = 0, (1 << dst.bits) - 1
        wide = np.uint64
    too_big = t >= float(hi + 1)  # hi + 1 is a power of two, exact in f64
    too_small = t <= float(lo)
    safe = np.where(too_big | too_small | np.isnan(t), 0.0, t).astype(wide)
    r = np.where(too_big, np.array(hi, wide), np.where(too_small, np.array(lo, wide), safe))
    return wrap_int(r, dst).astype(dst.np_dtype) if dst.bits < 8 else r.astype(dst.np_dtype)


@register("convert")
def _convert(instr, operands, ev):
    src = instr.operands[0].shape.element_type
    return convert_array(operands[0], src, instr.shape.element_type)


@register("bitcast-convert")
def _bitcast_convert(instr, operands, ev):
    src = instr.operands[0].shape.element_type
    return bitcast_convert_array(operands[0], src, instr.shape.element_type)


def bitcast_convert_array(x: np.ndarray, src: PrimitiveType, dst: PrimitiveType) -> np.ndarray:
    """Reinterpret the bits of `x` as `dst` (extra/removed minor dimension between widths).

    Sub-byte elements pack little-endian too: element k of the minor dimension holds bits
    [k*bits, (k+1)*bits) of the wide value (s4[2] {1, 2} is the byte 0x21), as on XLA:CPU.
    """
    shape = np.shape(x)
    x = np.ascontiguousarray(x).reshape(shape)  # ascontiguousarray turns 0-d into 1-d
    if src.bits < 8 or dst.bits < 8:
        return _bitcast_sub_byte(x, src, dst)
    if dst.is_pred:
        return x.view(np.uint8) != 0
    if src.is_pred:
        x = x.astype(np.uint8)
    if src.bits == dst.bits:
        return x.view(dst.np_dtype)
    if src.bits > dst.bits:
        ratio = src.bits // dst.bits
        return x.view(dst.np_dtype).reshape(x.shape + (ratio,))
    return x.view(dst.np_dtype).reshape(x.shape[:-1])


def _bitcast_sub_byte(x: np.ndarray, src: PrimitiveType, dst: PrimitiveType) -> np.ndarray:
    """bitcast-convert where a side is narrower than a byte: the bit codes are moved, lowest
    element in the lowest bits (sub-byte floats as their codes, not their values)."""
    if not (src.is_integer and dst.is_integer or src.bits >= 8 or dst.bits >= 8 or src.bits == dst.bits):
        raise ValueError(f"bitcast-convert between {src.name} and {dst.name} is not supported")
    if src.bits == dst.bits:
        return _from_codes(_codes(x, src), dst)
    if src.bits < dst.bits:  # pack the minor dimension into one wide element
        ratio = dst.bits // src.bits
        parts = _codes(x, src).astype(np.uint64)
        shifts = (np.arange(ratio, dtype=np.uint64) * np.uint64(src.bits))
        packed = np.bitwise_or.reduce(parts << shifts, axis=-1)
        return from_bits(packed.astype(_UNSIGNED[dst.bits]), dst) if dst.is_integer else \
            packed.astype(_UNSIGNED[dst.bits]).view(dst.np_dtype)
    ratio = src.bits // dst.bits
    wide = x.view(_UNSIGNED[src.bits]).astype(np.uint64)[..., None]
    shifts = np.arange(ratio, dtype=np.uint64) * np.uint64(dst.bits)
    return _from_codes(((wide >> shifts) & np.uint64((1 << dst.bits) - 1)).astype(np.uint8), dst)


def _codes(x: np.ndarray, ptype: PrimitiveType) -> np.ndarray:
    """The bit codes of sub-byte (or byte-wide) values as uint8 (floats: their encoding)."""
    if ptype.is_integer or ptype.is_pred:
        return as_unsigned(x, ptype)
    return x.view(np.uint8) & np.uint8((1 << ptype.bits) - 1)


def _from_codes(codes: np.ndarray, ptype: PrimitiveType) -> np.ndarray:
    """uint8 bit codes as values of a sub-byte (or byte-wide) type."""
    if ptype.is_integer or ptype.is_pred:
        return from_bits(codes, ptype)
    return codes.astype(np.uint8).view(ptype.np_dtype)


_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


@register("reduce-precision")
def _reduce_precision(instr, operands, ev):
    exponent_bits = int(instr.attrs["exponent_bits"])
    mantissa_bits = int(instr.attrs["mantissa_bits"])
    x = up(operands[0])
    return down(reduce_precision_array(np.asarray(x), exponent_bits, mantissa_bits), instr.shape.element_type)


def reduce_precision_array(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """XLA's reduce-precision on an f32 or f64 array."""
    _, unsigned = float_bits_dtype(x.dtype)
    total = np.dtype(x.dtype).itemsize * 8
    src_mantissa = np.finfo(x.dtype).nmant
    src_exponent = total - src_mantissa - 1

    def u(v: int) -> np.ndarray:
        return np.array(v, unsigned)

    v = np.ascontiguousarray(x).reshape(x.shape).view(unsigned)
    if mantissa_bits < src_mantissa:
        drop = src_mantissa - mantissa_bits
        last_bit = 1 << drop
        bias = ((v & u(last_bit)) >> u(drop)) + u((last_bit >> 1) - 1)
        v = (v + bias) & u(((1 << total) - 1) ^ (last_bit - 1))
    if exponent_bits < src_exponent:
        exp_mask = ((1 << src_exponent) - 1) << src_mantissa
        exponent_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp, min_exp = exponent_bias + reduced_bias, exponent_bias - reduced_bias
        e = v & u(exp_mask)
        signed_zero = v & u(1 << (total - 1))
        signed_inf = signed_zero | u(exp_mask)
        v = np.where(e > u(max_exp << src_mantissa), signed_inf, v)
        v = np.where(e <= u(min_exp << src_mantissa), signed_zero, v)
    r = np.asarray(v).reshape(x.shape).view(x.dtype)
    # NaNs stay NaN even with no mantissa bits left (XLA:CPU/GPU quiet them; the HloEvaluator
    # would give inf there).
    return np.where(np.isnan(x), x, r)


@register("stochastic-convert")
def _stochastic_convert(instr, operands, ev):
    """XLA's StochasticConvertDecomposer recipe, evaluated op by op in the operand's type."""
    x, random = operands
    src = instr.operands[0].shape.element_type
    rtype = instr.operands[1].shape.element_type
    dst = instr.shape.element_type
    if not (src.is_float and dst.kind == "signed"):
        raise ValueError(f"stochastic-convert from {src.name} to {dst.name} is not supported")
    xf = up(x)
    absx = up(down(np.abs(xf), src))  # one rounding per HLO op of the recipe
    truncated = up(down(np.floor(absx), src))
    fractional = up(down(absx - truncated, src))
    frac_type = PRIMITIVE_TYPES["f32"] if src.name == "f16" else src  # 2^16 overflows f16
    fixed = down(fractional * fractional.dtype.type(2.0 ** rtype.bits), frac_type)
    round_up = random < convert_array(fixed, frac_type, rtype)
    t_int = int_compute(float_to_int(truncated, dst))
    t_int = np.where(round_up, t_int + np.ones((), t_int.dtype), t_int)
    result = np.where(xf < 0, np.negative(t_int), t_int)
    lo, hi = -(1 << (dst.bits - 1)), (1 << (dst.bits - 1)) - 1
    lo_f, hi_f = (up(np.array(v).astype(src.np_dtype)) for v in (float(lo), float(hi)))
    result = np.where(xf <= lo_f, np.array(lo, result.dtype), result)
    result = np.where(xf >= hi_f, np.array(hi, result.dtype), result)
    return down(result, dst)

