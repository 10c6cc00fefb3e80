"""Literals: numpy values for constants, their text in XLA's literal syntax, and reading it back.

Printing follows XLA's `Literal::ToStringWithoutShapeOneline`: scalars bare, rank-1 arrays as
`{1, 2}`, higher ranks nested with spaces (`{ { 1, 2 }, { 3, 4 } }`, `/*i0=..*/` markers above
rank 3), pred elements of arrays as 0/1, tuples as `( a, b )`. Floats print like XLA's
`RoundTripFpToString`: `%.{digits10}g` for f32/f64 when that reads back exactly, otherwise
`%.{max_digits10}g`, so `print(parse(print(m)))` is exact; NaNs keep their sign and payload
(`-nan`, `nan(0x1)`).

    >>> format_literal(np.array([[1, 2], [3, 4]], np.int32))
    '{ { 1, 2 }, { 3, 4 } }'
    >>> format_float(np.float32(0.1))
    '0.1'
"""

from __future__ import annotations

import math
import re

import numpy as np

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType, from_numpy_dtype

# (uint view, sign bit, exponent bits, default quiet-NaN payload) of types whose NaN carries a payload.
_NAN_BITS = {
    "f16": (np.uint16, 0x8000, 0x7C00, 0x200, 0x3FF),
    "bf16": (np.uint16, 0x8000, 0x7F80, 0x40, 0x7F),
    "f32": (np.uint32, 0x80000000, 0x7F800000, 0x400000, 0x7FFFFF),
    "f64": (np.uint64, 0x8000000000000000, 0x7FF0000000000000, 0x8000000000000, 0xFFFFFFFFFFFFF),
}


class LiteralError(ValueError):
    """A malformed literal; `pos` is the offset in the text being parsed (when known)."""

    def __init__(self, message: str, pos: int | None = None):
        super().__init__(message)
        self.pos = pos


# -- printing -------------------------------------------------------------------------------------
def _ptype_of(v, ptype: PrimitiveType | None) -> PrimitiveType:
    if ptype is not None:
        return ptype
    if isinstance(v, np.generic):
        return from_numpy_dtype(v.dtype)
    return PRIMITIVE_TYPES["f32"]


def _nan_text(v, ptype: PrimitiveType) -> str:
    sign = "-" if np.signbit(np.asarray(v).astype(np.float32)) else ""
    spec = _NAN_BITS.get(ptype.name)
    if spec is None or not isinstance(v, np.generic) or v.dtype != ptype.np_dtype:
        return sign + "nan"
    utype, _sign, _exp, quiet, mask = spec
    payload = int(np.asarray(v).view(utype)) & mask
    return sign + ("nan" if payload == quiet else f"nan(0x{payload:x})")


def format_float(v, ptype: PrimitiveType | None = None) -> str:
    """XLA's RoundTripFpToString: the shortest of two `%g` precisions that reads back exactly."""
    ptype = _ptype_of(v, ptype)
    f = float(v)
    if math.isnan(f):
        return _nan_text(v, ptype)
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f == 0 and math.copysign(1.0, f) < 0:
        return "-0.0"  # XLA prints "-0", which its parser reads as the integer 0 (+0.0)
    if ptype.name == "f32":
        text = "%.6g" % f
        with np.errstate(over="ignore"):
            exact = np.float32(float(text)) == np.float32(f)
        return text if exact else "%.9g" % f
    if ptype.name == "f64":
        text = "%.15g" % f
        return text if float(text) == f else "%.17g" % f
    return "%.*g" % (ptype.max_digits10 or 9, f)


def _format_floats(flat: np.ndarray, ptype: PrimitiveType) -> list[str]:
    """`format_float` over a whole array, with the exactness check vectorized."""
    values = flat.astype(np.float64).tolist()
    if ptype.name not in ("f32", "f64"):
        digits = ptype.max_digits10 or 9
        out = ["%.*g" % (digits, f) for f in values]
    else:
        short, long_ = (6, 9) if ptype.name == "f32" else (15, 17)
        out = ["%.*g" % (short, f) for f in values]
        with np.errstate(invalid="ignore", over="ignore"):
            back = np.array(out, dtype=np.float64).astype(flat.dtype)
            bad = np.nonzero(back != flat)[0]
        for i in bad.tolist():
            out[i] = "%.*g" % (long_, values[i])
    wide = flat.astype(np.float64)
    for i in np.nonzero(~np.isfinite(wide) | ((wide == 0) & np.signbit(wide)))[0].tolist():
        out[i] = format_float(flat[i], ptype)
    return out


def format_scalar(v, ptype: PrimitiveType) -> str:
    if ptype.is_pred:
        return "true" if bool(v) else "false"
    if ptype.is_complex:
        part = PRIMITIVE_TYPES["f32" if ptype.name == "c64" else "f64"]
        real_t = part.np_dtype
        return f"({format_float(real_t.type(v.real), part)}, {format_float(real_t.type(v.imag), part)})"
    if ptype.is_float:
        return format_float(v, ptype)
    return str(int(v))


def _element_texts(arr: np.ndarray, ptype: PrimitiveType) -> list[str]:
    flat = np.ascontiguousarray(arr).reshape(-1)
    if ptype.is_pred:
        return ["1" if b else "0" for b in flat.tolist()]  # XLA prints array predicates as 0/1
    if ptype.is_float:
        return _format_floats(flat, ptype)
    if ptype.is_complex:
        return [format_scalar(x, ptype) for x in flat]
    return [str(int(x)) for x in flat.tolist()]


def format_literal(value, ptype=None) -> str:
    """Text of an array (or a tuple of arrays) in XLA literal syntax. `ptype` may be a
    PrimitiveType or a Shape (for tuples); by default it comes from the numpy dtype."""
    if isinstance(value, tuple):
        shapes = getattr(ptype, "tuple_shapes", None) or (None,) * len(value)
        return "( " + ", ".join(format_literal(v, s) for v, s in zip(value, shapes)) + " )"
    arr = np.asarray(value)
    if ptype is not None and not isinstance(ptype, PrimitiveType):
        ptype = ptype.element_type
    if ptype is None:
        ptype = from_numpy_dtype(arr.dtype)
    if arr.ndim == 0:
        return format_scalar(arr[()], ptype)
    return _nest(_element_texts(arr, ptype), arr.shape)


def _nest(flat: list[str], shape: tuple[int, ...]) -> str:
    """XLA's oneline nesting of row-major element texts (see DenseArrayPrintHelper)."""
    rank = len(shape)
    if rank == 1:
        return "{" + ", ".join(flat) + "}"
    if shape[0] == 0:
        return "{}"  # XLA would print "{  }"; the compact form reads back the same
    out: list[str] = []
    it = iter(flat)

    def rec(level: int, index: list[int]) -> None:
        n = shape[level]
        if level == rank - 1:
            pad = "" if n <= 1 else " "
            out.append("{" + pad + ", ".join(next(it) for _ in range(n)) + pad + "}")
            return
        if rank > 3 and index:
            out.append(f"{{ /*i{len(index) - 1}={index[-1]}*/" + (" " if n > 0 else ""))
        else:
            out.append("{ ")
        for i in range(n):
            rec(level + 1, index + [i])
            if i < n - 1:
                out.append(", ")
        out.append(" }")

    rec(0, [])
    return "".join(out)


def is_zero_splat(arr) -> bool:
    """True when every element of the (non-tuple) literal is the all-zero bit pattern."""
    if isinstance(arr, tuple):
        return False
    a = np.asarray(arr)
    if a.size == 0:
        return False
    if a.strides and all(s == 0 for s in a.strides):  # a broadcast view: look at one element
        a = a.reshape(-1)[:1]
    a = np.ascontiguousarray(a)
    return not a.view(np.uint8).any()


# -- building values ------------------------------------------------------------------------------
def splat(value, ptype: PrimitiveType, dims) -> np.ndarray:
    """A read-only broadcast view of one value over `dims` (no per-element storage)."""
    scalar = np.asarray(value).astype(ptype.np_dtype).reshape(())
    return np.broadcast_to(scalar, tuple(dims))


def first_element_literal(value: np.ndarray, ptype: PrimitiveType, dims) -> np.ndarray:
    """XLA's reading of a scalar literal given for an array shape (`f32[4] constant(5)`): the value
    lands in element 0 and every other element is zero. A zero value stays a broadcast view."""
    scalar = np.asarray(value).astype(ptype.np_dtype).reshape(())
    if is_zero_splat(scalar):
        return splat(scalar, ptype, dims)
    arr = np.zeros(tuple(dims), dtype=ptype.np_dtype)
    if arr.size:
        arr.reshape(-1)[0] = scalar
    return arr


_FULL_GARBAGE_ELEMENTS = 1 << 20


def garbage_literal(shape_dims, ptype: PrimitiveType, seed_text: str) -> np.ndarray:
    """Deterministic stand-in values for a `{...}` constant whose values were not printed. Above
    a million elements one random row is broadcast (read-only) instead of filling the array."""
    seed = sum((i + 1) * ord(c) for i, c in enumerate(seed_text)) & 0xFFFFFFFF
    rng = np.random.default_rng(seed)
    shape_dims = tuple(shape_dims)
    n = math.prod(shape_dims)
    if n > _FULL_GARBAGE_ELEMENTS and len(shape_dims) >= 2 and shape_dims[-1] <= _FULL_GARBAGE_ELEMENTS:
        row = garbage_literal(shape_dims[-1:], ptype, seed_text)
        return np.broadcast_to(row, shape_dims)
    if ptype.is_pred:
        vals = rng.integers(0, 2, n).astype(bool)
    elif ptype.is_integer:
        vals = rng.integers(0, 8, n)
    elif ptype.is_complex:
        vals = rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n)
    else:
        vals = rng.uniform(-1, 1, n)
    return vals.astype(ptype.np_dtype).reshape(shape_dims)


# -- reading --------------------------------------------------------------------------------------
_INT_TOKEN = re.compile(r"-?\d+")
_FLOAT_TOKEN = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|-?inf|-?nan(?:\(0x[0-9a-fA-F]+\))?")
_NAN_PAYLOAD = re.compile(r"(-?)nan(?:\(0x([0-9a-fA-F]+)\))?")


def int_range(et: PrimitiveType) -> tuple[int, int]:
    if et.is_pred:
        return 0, 1
    if et.kind == "signed":
        return -(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1
    return 0, (1 << et.bits) - 1


def values_to_array(tokens: list[str], positions: list[int], et: PrimitiveType, dims) -> np.ndarray:
    """Element tokens (row-major; complex as `re,im` pairs) -> an array of `et`, range-checked
    like XLA's parser. Raises LiteralError at the offending token."""
    if et.is_complex:
        parts = _float_values(tokens, positions, PRIMITIVE_TYPES["f64"], et)
        arr = np.empty(len(parts) // 2, dtype=et.np_dtype)
        arr.real, arr.imag = parts[0::2], parts[1::2]
    elif et.is_pred or et.is_integer:
        arr = _int_values(tokens, positions, et)
    else:
        arr = _float_values(tokens, positions, et, et)
    return arr.reshape(tuple(dims))


def _int_values(tokens: list[str], positions: list[int], et: PrimitiveType) -> np.ndarray:
    lo, hi = int_range(et)
    vals = []
    for tok, pos in zip(tokens, positions):
        if et.is_pred and tok in ("true", "false"):
            vals.append(tok == "true")
            continue
        if not _INT_TOKEN.fullmatch(tok):
            raise LiteralError(f"expects an integer for primitive type {et.name}, found '{tok[:40]}'", pos)
        v = int(tok) if len(tok) <= 40 else hi + 1
        if not lo <= v <= hi:
            raise LiteralError(f"value {tok[:40]} is out of range for literal's primitive type {et.name} "
                               f"namely [{lo}, {hi}]", pos)
        vals.append(v)
    work = np.bool_ if et.is_pred else (np.int64 if et.kind == "signed" else np.uint64)
    return np.array(vals, dtype=work).astype(et.np_dtype)


def _float_values(tokens: list[str], positions: list[int], et: PrimitiveType,
                  target: PrimitiveType) -> np.ndarray:
    vals, nans = [], []
    for i, (tok, pos) in enumerate(zip(tokens, positions)):
        if not _FLOAT_TOKEN.fullmatch(tok):
            raise LiteralError(f"expects a floating point value for primitive type {target.name}, "
                               f"found '{tok[:40]}'", pos)
        if "nan" in tok:
            nans.append((i, tok))
            vals.append(-math.nan if tok.startswith("-") else math.nan)
        elif _INT_TOKEN.fullmatch(tok):
            vals.append(float(int(tok)) if len(tok) < 400 else float(tok))  # XLA: "-0" is the integer 0
        elif "inf" not in tok and math.isinf(float(tok)):
            raise LiteralError(f"constant {tok[:40]} is out of range for double and so cannot be read", pos)
        else:
            vals.append(float(tok))
    wide = np.array(vals, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        arr = wide.astype(et.np_dtype)
        overflow = np.isfinite(wide) & ~np.isfinite(arr.astype(np.float64))
    if overflow.any():
        i = int(np.nonzero(overflow)[0][0])
        raise LiteralError(f"value {tokens[i]} is out of range for literal's primitive type {target.name}",
                           positions[i])
    if nans and et.name in _NAN_BITS:
        _apply_nan_payloads(arr, nans, et, positions)
    return arr


def _apply_nan_payloads(arr: np.ndarray, nans, et: PrimitiveType, positions: list[int]) -> None:
    utype, sign, exp, quiet, mask = _NAN_BITS[et.name]
    bits = arr.view(utype)
    for i, tok in nans:
        m = _NAN_PAYLOAD.fullmatch(tok)
        payload = quiet if m.group(2) is None else int(m.group(2), 16)
        if payload == 0 or payload > mask:
            raise LiteralError(f"NaN payload 0x{payload:x} does not fit {et.name}", positions[i])
        bits[i] = utype(exp | payload | (sign if m.group(1) else 0))


