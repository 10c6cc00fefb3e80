"""The interpreter's elementwise ops and conversions against XLA:CPU (through jax) on edge values.

One module per element type holds every op (a tuple result), so each type costs one XLA compile.
Known, deliberate differences are kept out of the inputs: XLA:CPU flushes denormals to zero (the
interpreter keeps IEEE denormals, as XLA's HloEvaluator does) and XLA:CPU's integer power only
looks at the exponent's low 6 bits (the interpreter is exact modulo 2^bits).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

pytest.importorskip("jax")

FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, 3e38, -3e38, np.inf, -np.inf,
               np.nan, 100.0, -100.0, 3.7, -3.7, 7.0, 2.0, 1e-3]
EXACT_UNARY = ["abs", "negate", "sign", "ceil", "floor", "round-nearest-even", "round-nearest-afz"]
APPROX_UNARY = ["exponential", "exponential-minus-one", "log", "log-plus-one", "sine", "cosine", "tan",
                "tanh", "sqrt", "rsqrt", "cbrt", "logistic", "erf"]
# Binary inputs avoid +-3e38, whose quotients are denormals that XLA:CPU flushes to zero.
BINARY_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.7, np.inf, -np.inf, np.nan, 2.0, -3.0, 7.0, 1e30]
FLOAT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2"]
INT_UNARY = ["not", "popcnt", "count-leading-zeros", "negate"]
INT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and", "or", "xor",
              "shift-left", "shift-right-logical", "shift-right-arithmetic"]


def _xla(text: str, inputs):
    from hlo_run.xla_cpu import XlaCpuExecutable

    return XlaCpuExecutable.compile(text, allow_excess_precision=False).run(inputs)


def _assert_same(want, got, label, rtol=0.0):
    assert want.dtype == got.dtype and want.shape == got.shape, label
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=label)
        return
    w, g = want.astype(np.float64), got.astype(np.float64)
    nan = np.isnan(w)
    np.testing.assert_array_equal(np.isnan(g), nan, err_msg=label)
    if rtol:
        np.testing.assert_allclose(g[~nan], w[~nan], rtol=rtol, atol=1e-30, err_msg=label)
    else:
        np.testing.assert_array_equal(g[~nan], w[~nan], err_msg=label)
        np.testing.assert_array_equal(np.signbit(g[~nan]), np.signbit(w[~nan]), err_msg=label)


SLOW = pytest.mark.slow


@pytest.mark.parametrize("t, approx", [
    ("f32", False), ("bf16", False),
    *(pytest.param(t, False, marks=SLOW) for t in ("f64", "f16")),
    *(pytest.param(t, True, marks=SLOW) for t in ("f32", "bf16", "f64", "f16")),
])
def test_float_ops_match_xla_cpu(t, approx):
    """Exact ops always; the transcendental ones (slow for XLA to compile) in the slow tier."""
    np_t = PRIMITIVE_TYPES[t].np_dtype
    with np.errstate(over="ignore"):
        x = np.array(FLOAT_EDGES, np.float64).astype(np_t)
        pairs = list(itertools.product(BINARY_EDGES, BINARY_EDGES))
        a = np.array([p[0] for p in pairs], np.float64).astype(np_t)
        b = np.array([p[1] for p in pairs], np.float64).astype(np_t)
    n, m = x.size, a.size
    lines, names = [], []
    for op in APPROX_UNARY if approx else EXACT_UNARY:
        lines.append(f"u_{len(names)} = {t}[{n}] {op}(x)")
        names.append((op, f"{t}[{n}]"))
    for op in FLOAT_BINARY if not approx else ("power", "atan2"):
        lines.append(f"u_{len(names)} = {t}[{m}] {op}(a, b)")
        names.append((op, f"{t}[{m}]"))
    for d, ty in itertools.product(["LT", "EQ", "GE"], ["FLOAT", "TOTALORDER"]) if not approx else ():
        lines.append(f"u_{len(names)} = pred[{m}] compare(a, b), direction={d}, type={ty}")
        names.append((f"compare {d} {ty}", f"pred[{m}]"))
    shape = "(" + ", ".join(s for _, s in names) + ")"
    text = (f"HloModule m\nENTRY e {{\n x = {t}[{n}] parameter(0)\n a = {t}[{m}] parameter(1)\n"
            f" b = {t}[{m}] parameter(2)\n " + "\n ".join(lines) +
            f"\n ROOT r = {shape} tuple(" + ", ".join(f"u_{i}" for i in range(len(names))) + ")\n}")
    want = _xla(text, [x, a, b])
    got = evaluate(parse_module(text), [x, a, b])
    low = t in ("bf16", "f16")
    for (op, _), w, g in zip(names, want, got):
        rtol = (2e-2 if low else 2e-6) if op in APPROX_UNARY or op in ("power", "atan2") else 0.0
        _assert_same(w, g, f"{op} {t}", rtol)


def _int_values(t: str) -> list[int]:
    et = PRIMITIVE_TYPES[t]
    if et.kind == "signed":
        lo, hi = -(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1
    else:
        lo, hi = 0, (1 << et.bits) - 1
    vals = {0, 1, 2, 3, 7, lo, hi, et.bits - 1, et.bits, et.bits + 1, -1, -7, -2}
    return sorted(v for v in vals if lo <= v <= hi)


@pytest.mark.parametrize(
    "t", ["s32", "u8", "s4"] + [pytest.param(t, marks=SLOW) for t in ("s8", "s64", "u32", "u64", "u4")])
def test_integer_ops_match_xla_cpu(t):
    et = PRIMITIVE_TYPES[t]
    dt = np.uint64 if et.kind == "unsigned" else np.int64
    vals = _int_values(t)
    x = np.array(vals, dt).astype(et.np_dtype)
    pairs = list(itertools.product(vals, vals))
    a = np.array([p[0] for p in pairs], dt).astype(et.np_dtype)
    b = np.array([p[1] for p in pairs], dt).astype(et.np_dtype)
    small = np.array([p[1] % 40 for p in pairs], dt).astype(et.np_dtype)  # power: exponents < 64
    n, m = x.size, a.size
    lines, names = [], []
    for op in INT_UNARY:
        lines.append(f"u_{len(names)} = {t}[{n}] {op}(x)")
        names.append((op, f"{t}[{n}]"))
    for op in INT_BINARY:
        lines.append(f"u_{len(names)} = {t}[{m}] {op}(a, b)")
        names.append((op, f"{t}[{m}]"))
    lines.append(f"u_{len(names)} = {t}[{m}] power(a, s)")
    names.append(("power", f"{t}[{m}]"))
    for d in ["LT", "GE", "NE"]:
        lines.append(f"u_{len(names)} = pred[{m}] compare(a, b), direction={d}")
        names.append((f"compare {d}", f"pred[{m}]"))
    shape = "(" + ", ".join(s for _, s in names) + ")"
    text = (f"HloModule m\nENTRY e {{\n x = {t}[{n}] parameter(0)\n a = {t}[{m}] parameter(1)\n"
            f" b = {t}[{m}] parameter(2)\n s = {t}[{m}] parameter(3)\n " + "\n ".join(lines) +
            f"\n ROOT r = {shape} tuple(" + ", ".join(f"u_{i}" for i in range(len(names))) + ")\n}")
    want = _xla(text, [x, a, b, small])
    got = evaluate(parse_module(text), [x, a, b, small])
    for (op, _), w, g in zip(names, want, got):
        _assert_same(w, g, f"{op} {t}")


CONVERT_TYPES = ["pred", "s8", "s32", "s64", "u8", "u32", "u64", "s4", "f16", "bf16", "f32", "f64",
                 "f8e4m3fn", "f8e5m2"]
CONVERT_FLOATS = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 127.5, 128.0, -129.0, 255.0, 256.0, 65536.0, 3e9,
                  -3e9, 1e19, -1e19, 2.0**31, 2.0**63, -2.0**63, 2.0**64, np.inf, -np.inf, np.nan, 3e38, 33.3,
                  16777217.0]


def _convert_input(src: str) -> np.ndarray:
    et = PRIMITIVE_TYPES[src]
    if et.is_float:
        with np.errstate(over="ignore"):
            return np.array(CONVERT_FLOATS, np.float64).astype(et.np_dtype)
    if et.is_pred:
        return np.array([True, False, True])
    return np.array(_int_values(src), np.uint64 if et.kind == "unsigned" else np.int64).astype(et.np_dtype)


@pytest.mark.parametrize("src", ["f32", "bf16", "s32"] + [pytest.param(t, marks=SLOW) for t in CONVERT_TYPES
                                                          if t not in ("f32", "bf16", "s32")])
def test_conversions_match_xla_cpu(src):
    x = _convert_input(src)
    dsts = [d for d in CONVERT_TYPES if d != src]
    lines = [f"u_{i} = {d}[{x.size}] convert(p)" for i, d in enumerate(dsts)]
    shape = "(" + ", ".join(f"{d}[{x.size}]" for d in dsts) + ")"
    text = (f"HloModule m\nENTRY e {{\n p = {src}[{x.size}] parameter(0)\n " + "\n ".join(lines) +
            f"\n ROOT r = {shape} tuple(" + ", ".join(f"u_{i}" for i in range(len(dsts))) + ")\n}")
    want = _xla(text, [x])
    got = evaluate(parse_module(text), [x])
    for dst, w, g in zip(dsts, want, got):
        _assert_same(w, g, f"convert {src}->{dst}")
