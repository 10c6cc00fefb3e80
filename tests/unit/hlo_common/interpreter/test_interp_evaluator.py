"""The interpreter's driver: instruction order, errors, argument checks, map_computation, reducers."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_common.errors import InterpreterError
from hlo_common.interpreter import Evaluator, evaluate
from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.interpreter.registry import HANDLERS
from hlo_common.hlo.parser import parse_module


def run(text: str, *args):
    return evaluate(parse_module(text), list(args))


def test_entry_with_tuple_result_and_called_computation():
    out = run("""
    HloModule m
    sq { x = f32[3] parameter(0) ROOT m = f32[3] multiply(x, x) }
    ENTRY e {
      p = f32[3] parameter(0)
      c = f32[3] call(p), to_apply=sq
      n = f32[3] negate(p)
      ROOT t = (f32[3], f32[3]) tuple(c, n)
    }""", np.array([1, 2, -3], np.float32))
    assert isinstance(out, tuple)
    np.testing.assert_array_equal(out[0], [1, 4, 9])
    np.testing.assert_array_equal(out[1], [-1, -2, 3])


def test_dead_code_is_not_evaluated():
    # infeed would raise; it is not needed by the root.
    out = run("""
    ENTRY e {
      p = f32[2] parameter(0)
      tok = token[] after-all()
      dead = ((f32[2]), token[]) infeed(tok)
      ROOT n = f32[2] negate(p)
    }""", np.array([1, 2], np.float32))
    np.testing.assert_array_equal(out, [-1, -2])


def test_unknown_opcode_names_the_instruction(monkeypatch):
    monkeypatch.delitem(HANDLERS, "negate")
    with pytest.raises(InterpreterError, match=r"%n \(negate\).*cannot evaluate opcode 'negate'"):
        run("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }", np.zeros(2, np.float32))


def test_handler_failure_is_wrapped_with_the_instruction_name(monkeypatch):
    def broken(instr, operands, ev):
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(HANDLERS, "negate", broken)
    with pytest.raises(InterpreterError, match=r"%n \(negate\) in computation e: ZeroDivisionError: boom"):
        run("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }", np.zeros(2, np.float32))


def test_handler_result_with_wrong_dtype_is_reported(monkeypatch):
    monkeypatch.setitem(HANDLERS, "negate", lambda i, ops, ev: ops[0].astype(np.float64))
    with pytest.raises(InterpreterError, match=r"%n.*float64\[2\], expected f32\[2\]"):
        run("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }", np.zeros(2, np.float32))


@pytest.mark.parametrize("args, message", [
    ([], "takes 1 argument"),
    ([np.zeros(3, np.float32)], r"expects f32\[2\]"),
    ([np.zeros(2, np.int32)], r"expects f32\[2\].*int32"),
])
def test_bad_arguments(args, message):
    with pytest.raises(InterpreterError, match=message):
        run("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }", *args)


def test_list_arguments_are_converted():
    out = run("ENTRY e { p = s32[2] parameter(0) ROOT n = s32[2] negate(p) }", [3, -4])
    np.testing.assert_array_equal(out, np.array([-3, 4], np.int32))


def test_numpy_warnings_are_silenced():
    with np.errstate(all="raise"):
        out = run("ENTRY e { p = f32[2] parameter(0) q = f32[2] parameter(1) ROOT d = f32[2] divide(p, q) }",
                  np.array([1, 0], np.float32), np.array([0, 0], np.float32))
    assert out[0] == np.inf and np.isnan(out[1])


def test_operand_values_are_not_modified():
    x = np.arange(4, dtype=np.float32)
    run("""
    ENTRY e {
      p = f32[4] parameter(0) u = f32[1] constant({9}) i = s32[] constant(1)
      ROOT d = f32[4] dynamic-update-slice(p, u, i)
    }""", x)
    np.testing.assert_array_equal(x, [0, 1, 2, 3])


_REDUCERS = """
HloModule m
add_rev { a = bf16[] parameter(0) b = bf16[] parameter(1) ROOT s = bf16[] add(b, a) }
max_s32 { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] maximum(a, b) }
or_pred { a = pred[] parameter(0) b = pred[] parameter(1) ROOT s = pred[] or(a, b) }
add_pred { a = pred[] parameter(0) b = pred[] parameter(1) ROOT s = pred[] add(a, b) }
and_f32 { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] maximum(a, a) }
sub { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] subtract(a, b) }
three { a = f32[] parameter(0) b = f32[] parameter(1) c = f32[] parameter(2) ROOT s = f32[] add(a, b) }
argmax {
  a = f32[] parameter(0) i = s32[] parameter(1) b = f32[] parameter(2) j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  v = f32[] select(gt, a, b) k = s32[] select(gt, i, j)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
ENTRY e { ROOT c = f32[] constant(0) }
"""


@pytest.mark.parametrize("name, kind", [
    ("add_rev", "add"), ("max_s32", "maximum"), ("or_pred", "or"), ("add_pred", "or"),
    ("and_f32", None), ("sub", None), ("three", None), ("argmax", None),
])
def test_classify_reducer(name, kind):
    assert classify_reducer(parse_module(_REDUCERS).computation(name)) == kind


def test_map_computation_vectorized_matches_per_element():
    m = parse_module(_REDUCERS)
    ev = Evaluator()
    comp = m.computation("argmax")
    assert ev.is_vectorizable(comp)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32)
    i, j = rng.integers(0, 100, (2, 3, 4)).astype(np.int32)
    v, k = ev.map_computation(comp, [a, i, b, j])
    np.testing.assert_array_equal(v, np.where(a > b, a, b))
    np.testing.assert_array_equal(k, np.where(a > b, i, j))
    pv, pk = ev._map_per_element(comp, [a, i, b, j], a.shape)
    np.testing.assert_array_equal(v, pv)
    np.testing.assert_array_equal(k, pk)


def test_map_computation_rounds_bf16_once_per_op():
    m = parse_module(_REDUCERS)
    a = np.array([1, 256, 0.1], ml_dtypes.bfloat16)
    b = np.array([2 ** -9, 1, 0.2], ml_dtypes.bfloat16)
    (out,) = Evaluator().map_computation(m.computation("add_rev"), [a, b])
    expected = (a.astype(np.float32) + b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))


def test_map_computation_falls_back_for_non_elementwise_bodies():
    m = parse_module("""
    HloModule m
    body {
      a = f32[] parameter(0)
      b = f32[2] broadcast(a), dimensions={}
      r = f32[2] reverse(b), dimensions={0}
      s = f32[1] slice(r), slice={[0:1]}
      ROOT o = f32[] reshape(s)
    }
    ENTRY e { ROOT c = f32[] constant(0) }""")
    ev = Evaluator()
    comp = m.computation("body")
    assert not ev.is_vectorizable(comp)
    x = np.array([[1, 2], [3, 4]], np.float32)
    (out,) = ev.map_computation(comp, [x])
    np.testing.assert_array_equal(out, x)


def test_map_computation_broadcasts_constant_results():
    m = parse_module("""
    HloModule m
    one { a = f32[] parameter(0) b = f32[] parameter(1) ROOT c = f32[] constant(1) }
    ENTRY e { ROOT c = f32[] constant(0) }""")
    (out,) = Evaluator().map_computation(m.computation("one"), [np.zeros((2, 3), np.float32)] * 2)
    assert out.shape == (2, 3) and (out == 1).all()


def test_evaluate_instruction_on_given_operand_values():
    m = parse_module("ENTRY e { p = s32[3] parameter(0) q = s32[3] parameter(1) "
                     "ROOT d = s32[3] divide(p, q) }")
    out = Evaluator().evaluate_instruction(m.entry.root, [np.int32([7, -7, 1]), np.int32([2, 2, 0])])
    assert out.dtype == np.int32 and out.tolist() == [3, -3, -1]
    with pytest.raises(InterpreterError, match=r"%d \(divide\)"):
        Evaluator().evaluate_instruction(m.entry.root, [np.int32([1]), np.float32([1])])
