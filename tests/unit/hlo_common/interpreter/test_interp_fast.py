"""Reference interpreter: the specialized handlers of `fast.py` agree with the general ones.

The general handlers are checked against numpy and XLA:CPU elsewhere; here every specialization
runs next to the registered handler of its opcode on edge values (type limits, -0, inf, NaN,
shift amounts around the width and negative ones), on scalars (the numpy-scalar path) and on
arrays, and both must give the same dtype, shape and bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.interpreter import evaluator, fast
from hlo_common.interpreter.registry import HANDLERS
from hlo_common.hlo.parser import parse_module

evaluator._import_handlers()

INT_TYPES = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"]
FLOAT_TYPES = ["f32", "f64"]
BINARY = ["add", "subtract", "multiply", "and", "or", "xor", "maximum", "minimum", "divide"]
SHIFTS = ["shift-left", "shift-right-logical", "shift-right-arithmetic"]


def edge_values(t: str) -> np.ndarray:
    dt = PRIMITIVE_TYPES[t].np_dtype
    if t in FLOAT_TYPES:
        return np.array([0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.25, np.inf, -np.inf, np.nan, 3e38, 1e-40], dt)
    info = np.iinfo(dt)
    bits = info.bits
    raw = [0, 1, -1, 2, 3, bits - 1, bits, bits + 1, 100, info.min, info.max, info.max - 1, info.min + 1]
    return np.array([v % (1 << bits) for v in raw], np.uint64).astype(dt)  # wrapped into the type


def instruction(op: str, t: str, n: int, extra: str = "", result: str | None = None):
    shape = f"{t}[{n}]" if n else f"{t}[]"
    out = (f"{result}[{n}]" if n else f"{result}[]") if result else shape
    module = parse_module(f"ENTRY e {{ a = {shape} parameter(0) b = {shape} parameter(1) "
                          f"ROOT r = {out} {op}(a, b){extra} }}")
    return module.entry.root


def assert_same(got, want, label: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, label
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=label)
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(got[ok].view(np.uint8), want[ok].view(np.uint8), err_msg=label)
    else:
        np.testing.assert_array_equal(got, want, err_msg=label)


def check_pairs(instr, values: np.ndarray, label: str) -> None:
    handler = fast.specialize(instr)
    assert handler is not None, label
    general = HANDLERS[instr.opcode]
    a = np.repeat(values, len(values))
    b = np.tile(values, len(values))
    with np.errstate(all="ignore"):
        if instr.shape.rank:
            assert_same(handler(instr, [a, b], None), general(instr, [a, b], None), label)
        else:
            for x, y in zip(a[:60], b[:60]):
                x0, y0 = np.array(x), np.array(y)
                got, want = handler(instr, [x0, y0], None), general(instr, [x0, y0], None)
                assert_same(got, want, f"{label} {x} {y}")


@pytest.mark.parametrize("t", INT_TYPES + FLOAT_TYPES)
@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("n", [0, 4])
def test_binary_specializations_match_general_handlers(op, t, n):
    values = edge_values(t)
    instr = instruction(op, t, n)
    if fast.specialize(instr) is None:
        assert (op in ("and", "or", "xor", "maximum", "minimum") and t in FLOAT_TYPES) or \
            (op == "divide" and t in INT_TYPES)
        return
    check_pairs(instr, values, f"{op} {t}")


@pytest.mark.parametrize("t", INT_TYPES + FLOAT_TYPES)
@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
def test_compare_specializations_match(t, direction):
    for n in (0, 4):
        instr = instruction("compare", t, n, f", direction={direction}", result="pred")
        check_pairs(instr, edge_values(t), f"compare {direction} {t}")
    total = instruction("compare", "f32", 4, ", direction=LT, type=TOTALORDER", result="pred")
    assert fast.specialize(total) is None  # the total order stays with the general handler


@pytest.mark.parametrize("t", INT_TYPES)
@pytest.mark.parametrize("op", SHIFTS)
def test_shift_specializations_match(t, op):
    for n in (0, 4):
        check_pairs(instruction(op, t, n), edge_values(t), f"{op} {t}")


@pytest.mark.parametrize("src, dst", [("s32", "s8"), ("u8", "s64"), ("s64", "f32"), ("f64", "f32"),
                                      ("u64", "f64"), ("f32", "f64")])
def test_convert_specializations_match(src, dst):
    instr = parse_module(f"ENTRY e {{ a = {src}[13] parameter(0) ROOT r = {dst}[13] convert(a) }}").entry.root
    x = edge_values(src)[:13]
    assert_same(fast.specialize(instr)(instr, [x], None), HANDLERS["convert"](instr, [x], None), src + dst)
    saturating = parse_module("ENTRY e { a = f32[2] parameter(0) ROOT r = s8[2] convert(a) }").entry.root
    assert fast.specialize(saturating) is None


def test_narrow_and_pred_types_keep_the_general_handlers():
    for t in ("bf16", "f16", "s4", "pred"):
        assert fast.specialize(instruction("add", t, 4)) is None


def test_small_scalar_broadcast_is_materialized_large_stays_a_view():
    small = parse_module("ENTRY e { a = u32[] parameter(0) ROOT r = u32[3,2] broadcast(a), dimensions={} }")
    x = np.array(7, np.uint32)
    out = fast.specialize(small.entry.root)(small.entry.root, [x], None)
    np.testing.assert_array_equal(out, np.full((3, 2), 7, np.uint32))
    large = parse_module("ENTRY e { a = u32[] parameter(0) "
                         "ROOT r = u32[100,100] broadcast(a), dimensions={} }")
    assert fast.specialize(large.entry.root) is None
