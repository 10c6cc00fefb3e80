"""Scalar, vector and complex types of the kernel IR, and how HLO element types map onto them.

Types are plain strings spelled as in MLIR, so the printed IR reads like XLA's: signless integers
`i1 i2 i4 i8 i16 i32 i64 i128`, `index` (64-bit), floats `f16 bf16 f32 f64`, the narrow floats
`f8E4M3FN f8E5M2 ... f4E2M1FN` (storage-only: arithmetic on them goes through f32),
`complex<f32>`, `complex<f64>` and `vector<4xf32>`. Signedness lives in the ops (`divsi` /
`divui`), as in MLIR's arith dialect.

    >>> ir_type("s32"), ir_type("pred"), ir_type("f8e4m3fn"), vector_type(4, "bf16")
    ('i32', 'i1', 'f8E4M3FN', 'vector<4xbf16>')
    >>> FLOAT_FORMATS["f8E4M3FN"].max_finite
    448.0
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INDEX = "index"
INT_BITS = {"i1": 1, "i2": 2, "i4": 4, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "i128": 128, INDEX: 64}


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format narrower than f32 (or f32/f64 themselves).

    `nan`: "ieee" (all-ones exponent is inf/NaN), "fn" (no inf; only S.111..1 is NaN),
    "fnuz" (no inf, no -0; 0x80 is NaN), "none" (no inf, no NaN: overflow saturates), "fnu"
    (no sign bit, no zero, no inf; all ones is NaN: f8E8M0FNU, values 2**(e - 127))."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    nan: str

    @property
    def signed(self) -> bool:
        return self.nan != "fnu"

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @property
    def max_exponent_field(self) -> int:
        """Largest biased exponent of a finite number."""
        top = (1 << self.exponent_bits) - 1
        return top - 1 if self.nan in ("ieee", "fnu") else top

    @property
    def max_finite_bits(self) -> int:
        """Bit pattern (sign clear) of the largest finite value."""
        mantissa = (1 << self.mantissa_bits) - 1
        if self.nan == "fn":
            mantissa -= 1  # S.1111.111 is NaN
        return (self.max_exponent_field << self.mantissa_bits) | mantissa

    @property
    def max_finite(self) -> float:
        e = self.max_finite_bits >> self.mantissa_bits
        m = self.max_finite_bits & ((1 << self.mantissa_bits) - 1)
        return (1 + m / (1 << self.mantissa_bits)) * 2.0 ** (e - self.bias)


FLOAT_FORMATS = {f.name: f for f in [
    FloatFormat("f16", 5, 10, 15, "ieee"),
    FloatFormat("bf16", 8, 7, 127, "ieee"),
    FloatFormat("f32", 8, 23, 127, "ieee"),
    FloatFormat("f64", 11, 52, 1023, "ieee"),
    FloatFormat("f8E5M2", 5, 2, 15, "ieee"),
    FloatFormat("f8E4M3", 4, 3, 7, "ieee"),
    FloatFormat("f8E3M4", 3, 4, 3, "ieee"),
    FloatFormat("f8E4M3FN", 4, 3, 7, "fn"),
    FloatFormat("f8E4M3FNUZ", 4, 3, 8, "fnuz"),
    FloatFormat("f8E5M2FNUZ", 5, 2, 16, "fnuz"),
    FloatFormat("f8E4M3B11FNUZ", 4, 3, 11, "fnuz"),
    FloatFormat("f6E2M3FN", 2, 3, 1, "none"),
    FloatFormat("f6E3M2FN", 3, 2, 3, "none"),
    FloatFormat("f4E2M1FN", 2, 1, 1, "none"),
    FloatFormat("f8E8M0FNU", 8, 0, 127, "fnu"),
]}

# HLO element type -> kernel IR type.
_HLO_TO_IR = {
    "pred": "i1", "s2": "i2", "u2": "i2", "s4": "i4", "u4": "i4", "s8": "i8", "u8": "i8",
    "s16": "i16", "u16": "i16", "s32": "i32", "u32": "i32", "s64": "i64", "u64": "i64",
    "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64", "f8e5m2": "f8E5M2", "f8e4m3": "f8E4M3",
    "f8e3m4": "f8E3M4", "f8e4m3fn": "f8E4M3FN", "f8e4m3fnuz": "f8E4M3FNUZ", "f8e5m2fnuz": "f8E5M2FNUZ",
    "f8e4m3b11fnuz": "f8E4M3B11FNUZ", "f6e2m3fn": "f6E2M3FN", "f6e3m2fn": "f6E3M2FN",
    "f4e2m1fn": "f4E2M1FN", "f8e8m0fnu": "f8E8M0FNU", "c64": "complex<f32>", "c128": "complex<f64>",
}
_VECTOR = re.compile(r"^vector<(\d+)x(.+)>$")
_COMPLEX = re.compile(r"^complex<(f32|f64)>$")


class UnsupportedTypeError(ValueError):
    """An HLO element type the kernel IR cannot hold (tokens, s1/u1)."""


def ir_type(hlo_type: str) -> str:
    """The kernel IR type of an HLO element type name (`s32` -> `i32`)."""
    t = _HLO_TO_IR.get(hlo_type)
    if t is None:
        raise UnsupportedTypeError(f"element type {hlo_type} is not supported by the kernel IR")
    return t


def is_int(t: str) -> bool:
    return t in INT_BITS


def is_float(t: str) -> bool:
    return t in FLOAT_FORMATS


def is_narrow_float(t: str) -> bool:
    """Floats that are only stored, never computed on (everything but f32 / f64)."""
    return t in FLOAT_FORMATS and t not in ("f32", "f64")


def is_complex(t: str) -> bool:
    return _COMPLEX.match(t) is not None


def complex_element(t: str) -> str:
    return _COMPLEX.match(t).group(1)


def is_vector(t: str) -> bool:
    return t.startswith("vector<")


def vector_type(n: int, element: str) -> str:
    return f"vector<{n}x{element}>"


def vector_shape(t: str) -> tuple[int, str]:
    """(lanes, element type) of a vector type."""
    m = _VECTOR.match(t)
    if m is None:
        raise ValueError(f"{t} is not a vector type")
    return int(m.group(1)), m.group(2)


def element_type(t: str) -> str:
    return vector_shape(t)[1] if is_vector(t) else t


def bit_width(t: str) -> int:
    if t in INT_BITS:
        return INT_BITS[t]
    if t in FLOAT_FORMATS:
        return FLOAT_FORMATS[t].bits
    if is_complex(t):
        return 2 * bit_width(complex_element(t))
    if is_vector(t):
        n, e = vector_shape(t)
        return n * bit_width(e)
    raise ValueError(f"unknown kernel IR type {t}")


def is_valid_type(t: str) -> bool:
    if t in INT_BITS or t in FLOAT_FORMATS or is_complex(t):
        return True
    m = _VECTOR.match(t)
    return m is not None and int(m.group(1)) > 0 and is_valid_type(m.group(2)) and not is_vector(m.group(2))
