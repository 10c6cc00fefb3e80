"""Interpreter handlers for the bit-level and comparison opcodes.

and / or / xor / not (logical on pred, bitwise on integers), the three shifts, popcnt,
count-leading-zeros, mulhi and compare with its four comparison types. Bit counts use the
element type's own width (s4 has 4 bits), which is what XLA:CPU computes.

TOTALORDER compare orders floats as -NaN < -inf < ... < -0 < +0 < ... < inf < NaN by mapping each
bit pattern to a signed integer key (negative patterns get their magnitude bits flipped).
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.interpreter.arith import (
    as_signed, as_unsigned, down, float_bits_dtype, from_bits, int_compute, up,
)
from hlo_common.interpreter.registry import register
from hlo_common.hlo.ir import HloInstruction


def _etype(instr: HloInstruction) -> PrimitiveType:
    return instr.shape.element_type


@register("and")
def _and(instr, operands, ev):
    a, b = (int_compute(v) for v in operands)
    return down(np.bitwise_and(a, b), _etype(instr))


@register("or")
def _or(instr, operands, ev):
    a, b = (int_compute(v) for v in operands)
    return down(np.bitwise_or(a, b), _etype(instr))


@register("xor")
def _xor(instr, operands, ev):
    a, b = (int_compute(v) for v in operands)
    return down(np.bitwise_xor(a, b), _etype(instr))


@register("not")
def _not(instr, operands, ev):
    x = operands[0]
    et = _etype(instr)
    if et.is_pred:
        return np.logical_not(x)
    if et.is_float:
        return down(up(x) == 0, et)
    return down(np.invert(int_compute(x)), et)


# -- shifts ------------------------------------------------------------------------------------------------


def _shift_amount(instr, amount: np.ndarray, et: PrimitiveType):
    """(in-bounds mask, shift amounts as the unsigned type of the width): amounts read as unsigned."""
    u = as_unsigned(amount, et)
    in_bounds = u < et.bits
    return in_bounds, np.where(in_bounds, u, np.zeros((), u.dtype))


@register("shift-left")
def _shift_left(instr, operands, ev):
    et = _etype(instr)
    in_bounds, s = _shift_amount(instr, operands[1], et)
    bits = as_unsigned(operands[0], et)
    shifted = np.left_shift(bits, s.astype(bits.dtype))
    out = np.where(in_bounds, shifted, np.zeros((), bits.dtype))
    return from_bits(out, et)


@register("shift-right-logical")
def _shift_right_logical(instr, operands, ev):
    et = _etype(instr)
    in_bounds, s = _shift_amount(instr, operands[1], et)
    bits = as_unsigned(operands[0], et)
    out = np.where(in_bounds, np.right_shift(bits, s.astype(bits.dtype)), np.zeros((), bits.dtype))
    return from_bits(out, et)


@register("shift-right-arithmetic")
def _shift_right_arithmetic(instr, operands, ev):
    et = _etype(instr)
    in_bounds, s = _shift_amount(instr, operands[1], et)
    val = as_signed(operands[0], et)
    fill = np.where(val < 0, np.full((), -1, val.dtype), np.zeros((), val.dtype))
    out = np.where(in_bounds, np.right_shift(val, s.astype(val.dtype)), fill)
    return from_bits(out, et)


# -- bit counts ---------------------------------------------------------------------------------------------


@register("popcnt")
def _popcnt(instr, operands, ev):
    et = _etype(instr)
    if et.bits < 8:  # XLA (evaluator and CPU) counts the 8-bit sign-extended storage value
        return from_bits(np.bitwise_count(int_compute(operands[0]).view(np.uint8)), et)
    return down(np.bitwise_count(as_unsigned(operands[0], et)), et)


@register("count-leading-zeros")
def _clz(instr, operands, ev):
    et = _etype(instr)
    y = as_unsigned(operands[0], et).astype(np.uint64)
    n = np.full(y.shape, et.bits, np.int64)
    shift = 32
    while shift:
        if shift < et.bits:
            t = y >> np.uint64(shift)
            nz = t != 0
            n = np.where(nz, n - shift, n)
            y = np.where(nz, t, y)
        shift //= 2
    n = n - (y != 0)
    return from_bits(n, et) if et.bits < 8 else n.astype(et.np_dtype)


@register("mulhi")
def _mulhi(instr, operands, ev):
    et = _etype(instr)
    a, b = operands
    if et.bits <= 32:
        wide = np.int64 if et.kind == "signed" else np.uint64
        prod = int_compute(a).astype(wide) * int_compute(b).astype(wide)
        return from_bits(prod >> et.bits, et) if et.bits < 8 else (prod >> et.bits).astype(et.np_dtype)
    ua, ub = as_unsigned(a, et), as_unsigned(b, et)
    hi = _umulhi64(ua, ub)
    if et.kind == "signed":  # signed high half = unsigned high half - (a<0)*b - (b<0)*a  (mod 2^64)
        zero = np.zeros((), np.uint64)
        hi = hi - np.where(a < 0, ub, zero) - np.where(b < 0, ua, zero)
    return hi.view(et.np_dtype) if hi.ndim else np.asarray(hi).view(et.np_dtype)


def _umulhi64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High 64 bits of the 128-bit product of two uint64 arrays (32-bit limbs, no overflow)."""
    m = np.uint64(0xFFFFFFFF)
    s = np.uint64(32)
    a_lo, a_hi = a & m, a >> s
    b_lo, b_hi = b & m, b >> s
    lo_lo, hi_lo, lo_hi, hi_hi = a_lo * b_lo, a_hi * b_lo, a_lo * b_hi, a_hi * b_hi
    mid = (lo_lo >> s) + (hi_lo & m) + (lo_hi & m)
    return hi_hi + (hi_lo >> s) + (lo_hi >> s) + (mid >> s)


# -- compare ----------------------------------------------------------------------------------------------

_DIRECTIONS = {
    "EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
    "GT": np.greater, "GE": np.greater_equal,
}


def _total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integer keys whose order is the IEEE total order of the floats in `x`."""
    signed, _ = float_bits_dtype(x.dtype)
    s = x.view(signed)
    flip = np.array(np.iinfo(signed).max, signed)
    return np.where(s < 0, s ^ flip, s)


def _default_compare_type(et: PrimitiveType) -> str:
    if et.is_float or et.is_complex:
        return "FLOAT"
    return "SIGNED" if et.kind == "signed" else "UNSIGNED"


@register("compare")
def _compare(instr, operands, ev):
    direction = str(instr.attrs.get("direction", "EQ"))
    fn = _DIRECTIONS.get(direction)
    if fn is None:
        raise ValueError(f"unknown comparison direction '{direction}'")
    et = instr.operands[0].shape.element_type
    kind = str(instr.attrs.get("type", _default_compare_type(et)))
    a, b = operands
    if kind == "TOTALORDER" and et.is_float:
        return fn(_total_order_key(up(np.asarray(a))), _total_order_key(up(np.asarray(b))))
    if et.is_integer and kind == "SIGNED":
        return fn(as_signed(np.asarray(a), et), as_signed(np.asarray(b), et))
    if et.is_integer and kind == "UNSIGNED":
        return fn(as_unsigned(np.asarray(a), et), as_unsigned(np.asarray(b), et))
    return fn(up(a), up(b))
