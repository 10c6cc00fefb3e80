"""Literals: numpy values for constants, and their text in XLA's literal syntax.

Arrays print as nested braces in row-major order (`{ {1, 2}, {3, 4} }`), scalars bare, tuples as
`(a, b)`. Floats print in the shortest form that reads back to the same value of their own type,
so `print(parse(print(m)))` is exact.

    >>> format_literal(np.array([[1, 2], [3, 4]], np.int32))
    '{ {1, 2}, {3, 4} }'
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from hlo_common.dtypes import PrimitiveType, from_numpy_dtype


def format_float(v, ptype: PrimitiveType | None = None) -> str:
    """Shortest text that parses back to the same value of `ptype` (f32 if not given)."""
    f = float(v)
    if math.isnan(f):
        bits = _nan_payload(v)
        return "nan" if bits is None else f"nan(0x{bits:x})"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f == int(f) and abs(f) < 1e16:
        return ("-0" if math.copysign(1.0, f) < 0 else "0") if f == 0 else str(int(f))
    dt = np.dtype(v.dtype) if isinstance(v, np.generic) else np.dtype(np.float64)
    if dt == np.float16 or dt == np.float32 or dt == np.float64:
        x = v
    else:  # bf16 / f8: exact in f32, shortest f32 text still reads back to the same value
        x = np.float32(f)
    a = abs(f)
    if 1e-5 <= a < 1e16:
        return np.format_float_positional(x, unique=True, trim="-")
    return np.format_float_scientific(x, unique=True, trim="-").replace("e+", "e+")


def _nan_payload(v) -> int | None:
    """The NaN's mantissa bits when they are not the canonical quiet NaN of the type."""
    if not isinstance(v, np.generic):
        return None
    dt = v.dtype
    if dt == np.float32:
        bits = int(np.array(v).view(np.uint32)) & 0x7FFFFF
        return None if bits == 0x400000 else bits
    if dt == np.float64:
        bits = int(np.array(v).view(np.uint64)) & 0xFFFFFFFFFFFFF
        return None if bits == 0x8000000000000 else bits
    if dt == np.float16:
        bits = int(np.array(v).view(np.uint16)) & 0x3FF
        return None if bits == 0x200 else bits
    if dt == ml_dtypes.bfloat16:
        bits = int(np.array(v).view(np.uint16)) & 0x7F
        return None if bits == 0x40 else bits
    return None


def format_scalar(v, ptype: PrimitiveType) -> str:
    if ptype.is_pred:
        return "true" if bool(v) else "false"
    if ptype.is_complex:
        return f"({format_float(v.real.astype(_real_of(v)))}, {format_float(v.imag.astype(_real_of(v)))})"
    if ptype.is_float:
        return format_float(v, ptype)
    return str(int(v))


def _real_of(v) -> np.dtype:
    return np.float32 if np.dtype(v.dtype) == np.complex64 else np.float64


def format_literal(value, ptype: PrimitiveType | None = None) -> str:
    """Text of an array (or a tuple of arrays) in XLA literal syntax."""
    if isinstance(value, tuple):
        return "(" + ", ".join(format_literal(v) for v in value) + ")"
    arr = np.asarray(value)
    if ptype is None:
        ptype = from_numpy_dtype(arr.dtype)
    if arr.ndim == 0:
        return format_scalar(arr[()], ptype)
    flat = [format_scalar(x, ptype) for x in arr.reshape(-1)]
    return _nest(flat, arr.shape)


def _nest(flat: list[str], shape: tuple[int, ...]) -> str:
    if len(shape) == 1:
        return "{" + ", ".join(flat) + "}"
    if shape[0] == 0 or any(d == 0 for d in shape):
        return "{}" if shape[0] == 0 else "{ " + ", ".join("{}" for _ in range(shape[0])) + " }"
    step = len(flat) // shape[0]
    inner = [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
    return "{ " + ", ".join(inner) + " }"


def garbage_literal(shape_dims, ptype: PrimitiveType, seed_text: str) -> np.ndarray:
    """Deterministic stand-in values for a `{...}` constant whose values were not printed."""
    seed = sum((i + 1) * ord(c) for i, c in enumerate(seed_text)) & 0xFFFFFFFF
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape_dims, dtype=np.int64))
    if ptype.is_pred:
        vals = rng.integers(0, 2, n).astype(bool)
    elif ptype.is_integer:
        vals = rng.integers(0, 8, n)
    elif ptype.is_complex:
        vals = rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n)
    else:
        vals = rng.uniform(-1, 1, n)
    return vals.astype(ptype.np_dtype).reshape(shape_dims)
