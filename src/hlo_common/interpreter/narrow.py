"""bf16 values carried in f32 arrays: exact widening and narrowing, and fast rounding in place.

XLA's HloEvaluator computes every bf16 op in f32 and rounds the result to bf16 (round to nearest
even) before the next op reads it. Inside an elementwise region (`regions.py`) the interpreter
keeps such values in f32 arrays whose elements are all bf16 values ("wide" form), so a chain of
bf16 ops converts once on the way in and once on the way out, and each op's rounding is done on
the f32 bits instead of through a bf16 array:

- `widen` / `narrow_into`: bf16 <-> f32 exactly, by moving the 16 bits (a bf16 value is the
  upper half of the f32 with the same value; NaN payloads are kept both ways);
- `round_bf16_in_place`: an f32 array rounded to bf16 precision, in place: in one pass by the
  machine code of `narrow_jit.py` for contiguous arrays of at least `JIT_MIN_ELEMENTS`, else with
  numpy as follows (the compiled loop does the same per element). For every non-NaN
  value, adding 0x7FFF plus the lowest kept bit to the bits and clearing the low 16 bits is round
  to nearest even (the bit pattern is monotonic in the magnitude, so carries into the exponent give
  the next binade, the largest values overflow to infinity and subnormals round on bf16's
  subnormal grid). A NaN would not survive the carry, so an array holding one is rounded through
  ml_dtypes instead, which turns every NaN into the quiet NaN 0x7FC0 / 0xFFC0 with its sign.

The result is bit for bit the value `array.astype(bfloat16)` gives
(`tests/unit/hlo_common/interpreter/test_interp_narrow.py` checks every one of the 2^32 f32 bit
patterns).

    >>> a = np.array([1.00390625, 1.01171875, 3.4e38], np.float32)  # a tie to even, one up, overflow
    >>> round_bf16_in_place(a).tolist()
    [1.0, 1.015625, inf]
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo_common.interpreter import narrow_jit

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
_SIXTEEN = np.uint32(16)
_ONE = np.uint32(1)
_HALF_MINUS_ONE = np.uint32(0x7FFF)
_HIGH_HALF = np.uint32(0xFFFF0000)
JIT_MIN_ELEMENTS = 1 << 12  # smaller arrays: numpy's passes cost little, and no code is compiled


def widen(x: np.ndarray) -> np.ndarray:
    """A bf16 array as a new f32 array of the same values (the bits moved to the upper half)."""
    if x.size >= JIT_MIN_ELEMENTS:
        out = np.empty(x.shape, F32)
        if narrow_jit.widen_into(out, x):
            return out
    return x.astype(F32)


def narrow_into(out: np.ndarray, wide: np.ndarray) -> None:
    """Store f32 `wide` (bf16 values) into bf16 array `out` (same shape), exactly."""
    if wide.size >= JIT_MIN_ELEMENTS and narrow_jit.narrow_into(out, wide):
        return
    np.right_shift(wide.view(np.uint32), _SIXTEEN, out=out.view(np.uint16), casting="unsafe")


def round_narrow_into(out: np.ndarray, wide: np.ndarray) -> None:
    """Store f32 `wide` rounded to bf16 into bf16 array `out` (same shape); `wide` (a temporary,
    owning its elements) may be rounded in place on the way."""
    if wide.size >= JIT_MIN_ELEMENTS and narrow_jit.round_into(out, wide):
        return
    narrow_into(out, round_bf16_in_place(wide))


def narrow(wide: np.ndarray) -> np.ndarray:
    """f32 `wide` (bf16 values) as a new bf16 array, exactly."""
    out = np.empty(wide.shape, BF16)
    narrow_into(out, wide)
    return out


def round_bf16_in_place(a: np.ndarray) -> np.ndarray:
    """Round the f32 array `a` (writable, owning its elements) to bf16 precision; returns `a`."""
    if a.size == 0:
        return a
    if a.size >= JIT_MIN_ELEMENTS and narrow_jit.round_in_place(a):
        return a
    if np.isnan(np.maximum.reduce(a, axis=None)):  # maximum propagates NaN
        a[...] = a.astype(BF16)
        return a
    bits = a.view(np.uint32)
    carry = np.right_shift(bits, _SIXTEEN)
    np.bitwise_and(carry, _ONE, out=carry)
    np.add(carry, _HALF_MINUS_ONE, out=carry)
    np.add(bits, carry, out=bits)
    np.bitwise_and(bits, _HIGH_HALF, out=bits)
    return a
