"""Numeric helpers shared by the interpreter's elementwise handlers.

XLA's evaluator computes narrow floats (bf16, f16, f8*) in f32 and rounds back once per op, and
does integer arithmetic with two's-complement wrap-around. These helpers give handlers exactly
that: `up` widens an operand to its compute dtype, `down` rounds a result into the element type,
and the sub-byte integer types (s4, u2, ...) are carried in int8/uint8 and wrapped to their width.

    >>> down(up(np.array([1, 3], ml_dtypes.bfloat16)) / 3, PRIMITIVE_TYPES["bf16"])
    array([0.333984, 1], dtype=bfloat16)
"""

from __future__ import annotations

import math

import numpy as np

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType

F32 = np.dtype(np.float32)
LOW_FLOAT_DTYPES = frozenset(t.np_dtype for t in PRIMITIVE_TYPES.values() if t.is_low_precision_float)
SUB_BYTE_INT_DTYPES = frozenset(
    t.np_dtype for t in PRIMITIVE_TYPES.values() if t.is_integer and t.bits < 8)
_SIGNED_OF_WIDTH = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_UNSIGNED_OF_WIDTH = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def compact(x: np.ndarray) -> tuple[np.ndarray, bool]:
    """The distinct elements of a broadcast view (strides 0 collapsed to size 1), and whether it was one."""
    if x.ndim == 0 or 0 not in x.strides or x.size <= 1:
        return x, False
    idx = tuple(slice(0, 1) if s == 0 else slice(None) for s in x.strides)
    return x[idx], True


def up(x: np.ndarray) -> np.ndarray:
    """Widen a narrow-float array to f32 (its compute dtype); other arrays are returned as they are.

    Broadcast views (from `broadcast`) are converted element-once and re-broadcast, so a broadcast
    scalar never materializes a full f32 array.
    """
    if x.dtype not in LOW_FLOAT_DTYPES:
        return x
    small, was_view = compact(x)
    if was_view:
        return np.broadcast_to(small.astype(F32), x.shape)
    return x.astype(F32)


def down(y, ptype: PrimitiveType) -> np.ndarray:
    """Round/convert a computed result into `ptype`'s dtype (a no-op when it already is)."""
    dt = ptype.np_dtype
    y = np.asarray(y)
    if y.dtype == dt:
        return y
    if ptype.is_integer and ptype.bits < 8:
        return wrap_int(y, ptype).astype(dt)
    return y.astype(dt)


def int_compute(x: np.ndarray) -> np.ndarray:
    """Sub-byte integers as int8/uint8 (values unchanged); other arrays as they are."""
    if x.dtype in SUB_BYTE_INT_DTYPES:
        return x.astype(np.int8 if np.dtype(x.dtype).name.startswith("int") else np.uint8)
    return x


def wrap_int(y: np.ndarray, ptype: PrimitiveType) -> np.ndarray:
    """Two's-complement wrap of integer values to `ptype`'s width (result in a standard int dtype)."""
    bits = ptype.bits
    if bits >= 8:
        return np.asarray(y).astype(ptype.np_dtype)
    y = np.asarray(y).astype(np.int64)
    mask = (1 << bits) - 1
    if ptype.kind == "signed":
        sign = 1 << (bits - 1)
        return (((y & mask) ^ sign) - sign).astype(np.int8)
    return (y & mask).astype(np.uint8)


def as_unsigned(x: np.ndarray, ptype: PrimitiveType) -> np.ndarray:
    """The bit patterns of integer `x` as unsigned values of the type's width."""
    if ptype.bits >= 8:
        return x.view(_UNSIGNED_OF_WIDTH[ptype.bits])
    return (int_compute(x).astype(np.int16) & ((1 << ptype.bits) - 1)).astype(np.uint8)


def as_signed(x: np.ndarray, ptype: PrimitiveType) -> np.ndarray:
    """The bit patterns of integer `x` read as signed values of the type's width."""
    if ptype.bits >= 8:
        return x.view(_SIGNED_OF_WIDTH[ptype.bits])
    u = as_unsigned(x, ptype).astype(np.int8)
    sign = 1 << (ptype.bits - 1)
    return ((u ^ sign) - sign).astype(np.int8)


def from_bits(bits: np.ndarray, ptype: PrimitiveType) -> np.ndarray:
    """Integer bit patterns (any int dtype of the right width) as values of integer type `ptype`."""
    if ptype.bits >= 8:
        return bits.view(ptype.np_dtype)
    return wrap_int(bits, ptype).astype(ptype.np_dtype)


def float_bits_dtype(dtype: np.dtype) -> tuple[type, type]:
    """(signed int, unsigned int) numpy types as wide as float `dtype`."""
    size = np.dtype(dtype).itemsize * 8
    return _SIGNED_OF_WIDTH[size], _UNSIGNED_OF_WIDTH[size]


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in x's dtype; computed in float64 to within ~2e-15.

    |x| < 3: the all-positive series erf(x) = 2x/sqrt(pi) e^(-x^2) sum (2x^2)^n / (2n+1)!!
    (no cancellation); otherwise 1 - erfc(x) with erfc from its continued fraction
    e^(-x^2) / sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))). Fixed term counts keep it
    vectorized and free of a scipy dependency.
    """
    xd = np.asarray(x, np.float64)
    ax = np.abs(xd)
    out = np.empty_like(ax)
    small = ax < 3.0
    xs = ax[small]
    ratio = 2.0 * xs * xs
    term = np.ones_like(xs)
    total = np.ones_like(xs)
    for n in range(1, 90):
        term *= ratio / (2 * n + 1)
        total += term
    out[small] = (2.0 / math.sqrt(math.pi)) * xs * np.exp(-xs * xs) * total
    xl = ax[~small]
    frac = xl.copy()
    for k in range(80, 0, -1):
        frac = xl + (0.5 * k) / frac
    with np.errstate(invalid="ignore"):
        out[~small] = 1.0 - np.exp(-xl * xl) / (math.sqrt(math.pi) * frac)
    return np.copysign(out, xd).astype(np.asarray(x).dtype, copy=False)