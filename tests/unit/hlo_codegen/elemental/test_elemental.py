"""Elemental emission, numerically: every elementwise opcode run through the loop emitter and the
host JIT against the reference interpreter (ints exact, f32 1e-4, bf16/f16 2e-2), with the edge
values that have special semantics (division by zero, INT_MIN / -1, shifts out of range, NaN in
max/min/compare, saturating float -> int, TOTALORDER). Ops are batched into multi-output
fusions so each case costs one JIT compile.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from elemental_harness import SPECIAL, check_fusion, int_array, tuple_fusion

def _floats(dtype, n: int, seed: int, lo: float = -4.0, hi: float = 4.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = np.concatenate([np.array(SPECIAL), rng.uniform(lo, hi, n - len(SPECIAL))])
    with np.errstate(over="ignore"):
        return a.astype(np.float64).astype(dtype)


FLOAT_UNARY_ANY = ["exponential", "exponential-minus-one", "sine", "cosine", "tan", "tanh", "sinh", "cosh",
                   "asinh", "ceil", "floor", "round-nearest-even", "round-nearest-afz", "erf", "abs",
                   "negate",
                   "sign", "logistic", "cbrt"]
FLOAT_UNARY_POSITIVE = ["log", "log-plus-one", "sqrt", "rsqrt", "acosh"]
FLOAT_UNARY_UNIT = ["asin", "acos", "atanh"]


@pytest.mark.parametrize("etype", ["f32", "bf16", "f64", "f16"])
def test_float_unary(etype: str) -> None:
    n = 64
    t = f"{etype}[{n}]"
    ops = [(t, f"{op}(p0)") for op in FLOAT_UNARY_ANY] + [(t, f"{op}(p1)") for op in FLOAT_UNARY_POSITIVE]
    ops += [(t, f"{op}(p2)") for op in FLOAT_UNARY_UNIT] + [(f"pred[{n}]", "is-finite(p0)")]
    dt = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f64": np.float64, "f16": np.float16}[etype]
    args = [_floats(dt, n, 1), np.abs(_floats(dt, n, 2, 1.0, 30.0)) + dt(1), _floats(dt, n, 3, -0.999, 0.999)]
    with np.errstate(all="ignore"):
        check_fusion(tuple_fusion([t, t, t], ops), args)


@pytest.mark.parametrize("etype", ["f32", "bf16", "f64"])
def test_float_binary_and_compare(etype: str) -> None:
    n = len(SPECIAL) ** 2
    t = f"{etype}[{n}]"
    ops = [(t, f"{op}(p0, p1)") for op in ("add", "subtract", "multiply", "divide", "remainder", "maximum",
                                            "minimum", "power", "atan2")]
    for direction in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        ops.append((f"pred[{n}]", f"compare(p0, p1), direction={direction}"))
        ops.append((f"pred[{n}]", f"compare(p0, p1), direction={direction}, type=TOTALORDER"))
    ops += [(t, "select(p2, p0, p1)"), (t, "clamp(p1, p0, p1)")]
    dt = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f64": np.float64}[etype]
    a, b = np.meshgrid(np.array(SPECIAL), np.array(SPECIAL))
    with np.errstate(all="ignore"):
        args = [a.reshape(-1).astype(dt), b.reshape(-1).astype(dt), (np.arange(n) % 3 == 0)]
        check_fusion(tuple_fusion([t, t, f"pred[{n}]"], ops), args)


@pytest.mark.parametrize("etype", ["s8", "s32", "u32", "s64", "u64", "s4", "u8"])
def test_integer_ops(etype: str) -> None:
    dt = {"s8": np.int8, "s32": np.int32, "u32": np.uint32, "s64": np.int64, "u64": np.uint64,
          "s4": ml_dtypes.int4, "u8": np.uint8}[etype]
    info = (-8, 7) if etype == "s4" else (np.iinfo(dt).min, np.iinfo(dt).max)
    edge = sorted({0, 1, -1, 2, -2, 3, 5, 7, info[0], info[1], info[0] + 1, info[1] - 1})
    edge = [v for v in edge if info[0] <= v <= info[1]]
    a, b = np.meshgrid(edge, edge)
    n = a.size
    t = f"{etype}[{n}]"
    ops = [(t, f"{op}(p0, p1)") for op in ("add", "subtract", "multiply", "divide", "remainder", "maximum",
                                            "minimum", "and", "or", "xor", "shift-left",
                                            "shift-right-logical",
                                            "shift-right-arithmetic", "power")]
    ops += [(t, f"{op}(p0)") for op in ("not", "negate", "abs", "sign", "popcnt", "count-leading-zeros")]
    if etype != "s4":
        ops.append((t, "mulhi(p0, p1)"))
    for direction in ("EQ", "NE", "LT", "GE"):
        for kind in ("SIGNED", "UNSIGNED"):
            ops.append((f"pred[{n}]", f"compare(p0, p1), direction={direction}, type={kind}"))
    ops.append((t, "clamp(p1, p0, p0)"))
    check_fusion(tuple_fusion([t, t], ops), [int_array(dt, a.reshape(-1)), int_array(dt, b.reshape(-1))])


def test_pred_ops() -> None:
    a, b = np.meshgrid([False, True], [False, True])
    t = "pred[4]"
    ops = [(t, f"{op}(p0, p1)") for op in ("and", "or", "xor", "add", "multiply", "maximum", "minimum",
                                            "power", "subtract")] + [(t, "not(p0)")]
    ops += [(t, f"compare(p0, p1), direction={d}") for d in ("LT", "GT", "EQ")]
    check_fusion(tuple_fusion([t, t], ops), [a.reshape(-1), b.reshape(-1)])


CONVERT_TARGETS = ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64", "s4", "u4", "pred", "f16", "bf16",
                   "f64", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e3m4",
                   "f8e4m3",
                   "f4e2m1fn", "c64"]


@pytest.mark.parametrize("source", ["f32", "f64", "bf16"])
def test_convert_from_float(source: str) -> None:
    values = SPECIAL + [3e9, -3e9, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 63, 2.0 ** 64, 255.5, 127.5, -128.5,
                        448.0, 464.0, 480.0, 57344.0, 65520.0, 1e-5, 6e-8, -0.7, 0.49999997]
    n = len(values)
    ops = [(f"{d}[{n}]", "convert(p0)") for d in CONVERT_TARGETS if d != source]
    dt = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}[source]
    with np.errstate(all="ignore"):
        check_fusion(tuple_fusion([f"{source}[{n}]"], ops), [np.array(values).astype(dt)], tol=0.0)


@pytest.mark.parametrize("source", ["s32", "u64", "s4", "pred", "s64"])
def test_convert_from_int(source: str) -> None:
    dt = {"s32": np.int32, "u64": np.uint64, "s4": ml_dtypes.int4, "pred": np.bool_, "s64": np.int64}[source]
    if source == "pred":
        values = np.array([False, True, True, False])
    elif source == "s4":
        values = int_array(dt, [-8, -1, 0, 1, 7, 3])
    else:
        info = np.iinfo(dt)
        values = np.array([0, 1, 2 ** 24 + 1, 255, 256, 1000, int(info.max), int(info.min), 77777777],
                          dtype=object).astype(np.float64).astype(dt) if False else \
            np.array([0, 1, 2 ** 24 + 1, 255, 256, 1000, info.max, info.min, 77777777], dtype=dt)
    n = len(values)
    ops = [(f"{d}[{n}]", "convert(p0)") for d in CONVERT_TARGETS + ["f32"] if d != source]
    check_fusion(tuple_fusion([f"{source}[{n}]"], ops), [values], tol=0.0)


def test_convert_narrow_floats_to_f32() -> None:
    kinds = ["f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e3m4", "f4e2m1fn", "f16", "bf16"]
    params = [f"{k}[256]" if k not in ("f16", "bf16") else f"{k}[256]" for k in kinds]
    ops = [("f32[256]", f"convert(p{i})") for i in range(len(kinds))]
    ops += [("f16[256]", "convert(p0)"), ("bf16[256]", "convert(p1)")]
    import hlo_common.hlo.dtypes as d

    args = []
    for k in kinds:
        dt = d.PRIMITIVE_TYPES[k].np_dtype
        codes = np.arange(256, dtype=np.uint16)
        if k in ("f16", "bf16"):
            args.append((codes * 257).astype(np.uint16).view(dt))
        elif k == "f4e2m1fn":
            args.append((codes % 16).astype(np.uint8).view(dt))
        else:
            args.append(codes.astype(np.uint8).view(dt))
    check_fusion(tuple_fusion(params, ops), args, tol=0.0)


def test_bitcast_convert_and_reduce_precision() -> None:
    text = """f {
  p0 = f32[6] parameter(0)
  p1 = u8[6,2] parameter(1)
  a = s32[6] bitcast-convert(p0)
  c = f16[6] bitcast-convert(p1)
  d = f32[6] reduce-precision(p0), exponent_bits=5, mantissa_bits=10
  e = f32[6] reduce-precision(p0), exponent_bits=8, mantissa_bits=7
  g = s16[6] bitcast-convert(c)
  ROOT t = (s32[6], f16[6], f32[6], f32[6], s16[6]) tuple(a, c, d, e, g)
}"""
    p0 = np.array([1.0, -2.5, np.nan, 1e10, 6.1e-5, 65519.0], np.float32)
    p1 = np.arange(12, dtype=np.uint8).reshape(6, 2) * 17
    check_fusion(text, [p0, p1], tol=0.0)


def test_bitcast_convert_to_narrower_type() -> None:
    text = "f { p0 = f64[5] parameter(0) ROOT b = u16[5,4] bitcast-convert(p0) }"
    check_fusion(text, [np.array([1.0, -2.5, np.nan, 1e300, 5e-324])], tol=0.0)


def test_complex_ops() -> None:
    t = "c64[8]"
    ops = [(t, f"{op}(p0, p1)") for op in ("add", "subtract", "multiply", "divide")]
    ops += [(t, "negate(p0)"), ("f32[8]", "abs(p0)"), ("f32[8]", "real(p0)"), ("f32[8]", "imag(p0)"),
            ("pred[8]", "compare(p0, p1), direction=EQ"), ("pred[8]", "compare(p0, p1), direction=NE"),
            (t, "complex(p2, p2)"), ("c128[8]", "convert(p0)"), ("f32[8]", "convert(p0)"), (t, "sign(p0)")]
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(8) + 1j * rng.standard_normal(8)).astype(np.complex64)
    b = a.copy()
    b[:4] = (rng.standard_normal(4) + 1j * rng.standard_normal(4))
    b[7] = 0
    check_fusion(tuple_fusion([t, t, "f32[8]"], ops), [a, b, rng.standard_normal(8).astype(np.float32)])


def test_map_calls_the_scalar_computation() -> None:
    text = """
sq {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, b)
  ROOT s = f32[] subtract(m, a)
}
f {
  p0 = f32[7] parameter(0)
  p1 = f32[7] parameter(1)
  ROOT r = f32[7] map(p0, p1), dimensions={0}, to_apply=sq
}
ENTRY e {
  p0 = f32[7] parameter(0)
  p1 = f32[7] parameter(1)
  ROOT r = f32[7] fusion(p0, p1), kind=kLoop, calls=f
}"""
    check_fusion(text)
