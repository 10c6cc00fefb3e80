"""XLA primitive types and their numpy / ml_dtypes counterparts.

Every HLO element type (`f32`, `bf16`, `s4`, `f8e4m3fn`, ...) is one `PrimitiveType`; the table
`PRIMITIVE_TYPES` is the single place that knows bit widths, signedness and the numpy dtype used
by the reference interpreter and the runtimes.

    >>> PRIMITIVE_TYPES["bf16"].bits, PRIMITIVE_TYPES["bf16"].is_float
    (16, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class PrimitiveType:
    name: str  # text name as it appears in HLO, e.g. "f32"
    proto_id: int  # enum number in xla_data.proto
    bits: int  # storage bits of one element (logical width for sub-byte types)
    kind: str  # "pred" | "signed" | "unsigned" | "float" | "complex" | "token" | "opaque" | "buffer"
    np_dtype: np.dtype | None  # numpy/ml_dtypes dtype used to hold values

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("signed", "unsigned")

    @property
    def is_signed(self) -> bool:
        return self.kind in ("signed", "float", "complex")

    @property
    def is_pred(self) -> bool:
        return self.kind == "pred"

    @property
    def is_array_type(self) -> bool:
        return self.kind not in ("token", "opaque", "buffer")

    @property
    def byte_size(self) -> int:
        """Bytes one element occupies in an unpacked buffer (sub-byte types take a byte)."""
        return max(1, self.bits // 8)

    @property
    def max_digits10(self) -> int:
        """Decimal digits that always round-trip a value (std::numeric_limits<T>::max_digits10)."""
        return _MAX_DIGITS10.get(self.name, 0)

    @property
    def is_low_precision_float(self) -> bool:
        """Floats narrower than 32 bits: computed in f32 and rounded, as XLA does."""
        return self.is_float and self.bits < 32


def _t(name, proto_id, bits, kind, dtype):
    return PrimitiveType(name, proto_id, bits, kind, None if dtype is None else np.dtype(dtype))


_TABLE = [
    _t("pred", 1, 8, "pred", np.bool_),
    _t("s1", 30, 1, "signed", ml_dtypes.int1),
    _t("s2", 26, 2, "signed", ml_dtypes.int2),
    _t("s4", 21, 4, "signed", ml_dtypes.int4),
    _t("s8", 2, 8, "signed", np.int8),
    _t("s16", 3, 16, "signed", np.int16),
    _t("s32", 4, 32, "signed", np.int32),
    _t("s64", 5, 64, "signed", np.int64),
    _t("u1", 31, 1, "unsigned", ml_dtypes.uint1),
    _t("u2", 27, 2, "unsigned", ml_dtypes.uint2),
    _t("u4", 22, 4, "unsigned", ml_dtypes.uint4),
    _t("u8", 6, 8, "unsigned", np.uint8),
    _t("u16", 7, 16, "unsigned", np.uint16),
    _t("u32", 8, 32, "unsigned", np.uint32),
    _t("u64", 9, 64, "unsigned", np.uint64),
    _t("f16", 10, 16, "float", np.float16),
    _t("bf16", 16, 16, "float", ml_dtypes.bfloat16),
    _t("f32", 11, 32, "float", np.float32),
    _t("f64", 12, 64, "float", np.float64),
    _t("f8e5m2", 19, 8, "float", ml_dtypes.float8_e5m2),
    _t("f8e4m3", 28, 8, "float", ml_dtypes.float8_e4m3),
    _t("f8e4m3fn", 20, 8, "float", ml_dtypes.float8_e4m3fn),
    _t("f8e4m3b11fnuz", 23, 8, "float", ml_dtypes.float8_e4m3b11fnuz),
    _t("f8e3m4", 29, 8, "float", ml_dtypes.float8_e3m4),
    _t("f8e5m2fnuz", 24, 8, "float", ml_dtypes.float8_e5m2fnuz),
    _t("f8e4m3fnuz", 25, 8, "float", ml_dtypes.float8_e4m3fnuz),
    _t("f8e8m0fnu", 33, 8, "float", ml_dtypes.float8_e8m0fnu),
    _t("f4e2m1fn", 32, 4, "float", ml_dtypes.float4_e2m1fn),
    _t("f6e3m2fn", 35, 6, "float", ml_dtypes.float6_e3m2fn),
    _t("f6e2m3fn", 34, 6, "float", ml_dtypes.float6_e2m3fn),
    _t("c64", 15, 64, "complex", np.complex64),
    _t("c128", 18, 128, "complex", np.complex128),
    _t("token", 17, 0, "token", None),
    _t("opaque", 14, 0, "opaque", None),
]

# Enum numbers follow xla_data.proto; the f6 numbers and BUFFER's differ between XLA versions.
PRIMITIVE_TYPES: dict[str, PrimitiveType] = {t.name: t for t in _TABLE}

# The element type of a buffer shape `b(f32[8])`. Not a type keyword of the lexer (XLA's lexer
# excludes tuple and buffer), so it is kept out of PRIMITIVE_TYPES.
BUFFER = PrimitiveType("buffer", 36, 0, "buffer", None)

# Mantissa digits (with the implicit bit) -> max_digits10 = ceil(digits * log10(2) + 1).
_FLOAT_DIGITS = {
    "f16": 11, "bf16": 8, "f32": 24, "f64": 53, "f8e5m2": 3, "f8e4m3": 4, "f8e4m3fn": 4,
    "f8e4m3b11fnuz": 4, "f8e3m4": 5, "f8e5m2fnuz": 3, "f8e4m3fnuz": 4, "f8e8m0fnu": 1,
    "f4e2m1fn": 2, "f6e3m2fn": 3, "f6e2m3fn": 4,
}
_MAX_DIGITS10 = {name: -(-(d * 30103) // 100000) + 1 for name, d in _FLOAT_DIGITS.items()}

PRED = PRIMITIVE_TYPES["pred"]
S32 = PRIMITIVE_TYPES["s32"]
S64 = PRIMITIVE_TYPES["s64"]
U32 = PRIMITIVE_TYPES["u32"]
U64 = PRIMITIVE_TYPES["u64"]
F32 = PRIMITIVE_TYPES["f32"]
TOKEN = PRIMITIVE_TYPES["token"]

_BY_DTYPE = {t.np_dtype: t for t in _TABLE if t.np_dtype is not None}


def primitive_type(name: str) -> PrimitiveType:
    return PRIMITIVE_TYPES[name]


def from_numpy_dtype(dtype) -> PrimitiveType:
    return _BY_DTYPE[np.dtype(dtype)]


def unsigned_of_width(bits: int) -> PrimitiveType:
    """The unsigned integer type of the given width (for bit manipulation)."""
    return {8: PRIMITIVE_TYPES["u8"], 16: PRIMITIVE_TYPES["u16"], 32: U32, 64: U64}[bits]


def compute_dtype(t: PrimitiveType) -> np.dtype:
    """The numpy dtype in which elementwise math on `t` is carried out (f32 for narrow floats)."""
    if t.is_low_precision_float and t.name != "f16":
        return np.dtype(np.float32)
    if t.name == "f16":
        return np.dtype(np.float32)
    if t.is_integer and t.bits < 8:
        return np.dtype(np.int8 if t.kind == "signed" else np.uint8)
    return t.np_dtype
