"""Reference interpreter: sort (fast key path and the general comparator path) and topk.

Expectations are Python's stable `sorted` with keys written here, including XLA's floating-point
total order (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN), plus XLA:CPU where jax is installed.
"""

from __future__ import annotations

import math
import struct

import ml_dtypes
import numpy as np
import pytest

from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

RNG = np.random.default_rng(9)


def run(text: str, *args):
    return evaluate(parse_module(text), list(args))


def total_order(v: float) -> int:
    """XLA's TOTALORDER key of an f32, computed from its bits."""
    (bits,) = struct.unpack("<i", struct.pack("<f", v))
    return bits ^ 0x7FFFFFFF if bits < 0 else bits


def compare_comp(t: str, direction: str, ctype: str | None = None, swap: bool = False,
                 payload: bool = False) -> str:
    """Compares operand 0; with `payload`, also takes (ignored) s32 parameters for operand 1."""
    a, b = ("y", "x") if swap else ("x", "y")
    extra = f", type={ctype}" if ctype else ""
    more = "  i = s32[] parameter(2)  j = s32[] parameter(3)" if payload else ""
    return (f"cmp {{ x = {t}[] parameter(0)  y = {t}[] parameter(1){more}  "
            f"ROOT c = pred[] compare({a}, {b}), direction={direction}{extra} }}\n")


def sort_text(comp: str, shapes: list[str], dim: int) -> str:
    params = "\n".join(f"p{k} = {s} parameter({k})" for k, s in enumerate(shapes))
    names = ", ".join(f"p{k}" for k in range(len(shapes)))
    result = shapes[0] if len(shapes) == 1 else "(" + ", ".join(shapes) + ")"
    return (f"HloModule m\n{comp}\nENTRY e "
            f"{{\n{params}\nROOT s = {result} sort({names}), dimensions={{{dim}}}, "
            f"is_stable=true, to_apply=cmp\n}}")


SPECIALS = np.array([1.0, np.nan, -0.0, 3.0, -np.nan, 0.0, -np.inf, 3.0, np.inf, -2.0], np.float32)


@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_sort_total_order_places_nans_and_signed_zeros(direction):
    payload = np.arange(10, dtype=np.int32)
    text = sort_text(compare_comp("f32", direction, "TOTALORDER", payload=True), ["f32[10]", "s32[10]"], 0)
    values, perm = run(text, SPECIALS, payload)
    keys = [total_order(float(v)) for v in SPECIALS]
    want = sorted(range(10), key=lambda i: keys[i], reverse=False)
    if direction == "GT":  # stable descending: ties keep their original order
        want = sorted(range(10), key=lambda i: -keys[i])
    np.testing.assert_array_equal(perm, want)
    assert [math.copysign(1, v) for v in values] == [math.copysign(1, SPECIALS[i]) for i in want]


def test_sort_float_compare_is_stable_on_ties_and_signed_zeros():
    x = np.array([[2.0, -0.0, 1.0, 0.0, 2.0, 1.0]], np.float32)
    payload = np.arange(6, dtype=np.int32).reshape(1, 6)
    text = sort_text(compare_comp("f32", "LT", payload=True), ["f32[1,6]", "s32[1,6]"], 1)
    _, perm = run(text, x, payload)
    np.testing.assert_array_equal(perm[0], [1, 3, 2, 5, 0, 4])  # -0 and +0 compare equal


def test_sort_swapped_parameters_sort_descending_along_dim0():
    x = RNG.integers(-50, 50, (7, 3)).astype(np.int32)
    text = sort_text(compare_comp("s32", "LT", swap=True), ["s32[7,3]"], 0)
    np.testing.assert_array_equal(run(text, x), -np.sort(-x, axis=0))


def test_sort_unsigned_and_bf16():
    u = np.array([3, 2**32 - 1, 0, 7], np.uint32)
    text = sort_text(compare_comp("u32", "LT"), ["u32[4]"], 0)
    np.testing.assert_array_equal(run(text, u), [0, 3, 7, 2**32 - 1])
    b = RNG.standard_normal(9).astype(ml_dtypes.bfloat16)
    text_b = sort_text(compare_comp("bf16", "GT"), ["bf16[9]"], 0)
    np.testing.assert_array_equal(run(text_b, b).astype(np.float32), -np.sort(-b.astype(np.float32)))


def test_sort_jax_canonicalizing_comparator_uses_key_path():
    # jax's comparator maps -0 to +0 and every NaN to +NaN, then compares with TOTALORDER.
    comp = """cmp {
  x = f32[] parameter(0)  y = f32[] parameter(1)  i = s32[] parameter(2)  j = s32[] parameter(3)
  zero = f32[] constant(0)  nan = f32[] constant(nan)
  xz = pred[] compare(x, zero), direction=EQ  xn = pred[] compare(x, x), direction=NE
  x1 = f32[] select(xz, zero, x)  x2 = f32[] select(xn, nan, x1)
  yz = pred[] compare(y, zero), direction=EQ  yn = pred[] compare(y, y), direction=NE
  y1 = f32[] select(yz, zero, y)  y2 = f32[] select(yn, nan, y1)
  ROOT c = pred[] compare(x2, y2), direction=LT, type=TOTALORDER
}
"""
    payload = np.arange(10, dtype=np.int32)
    _, perm = run(sort_text(comp, ["f32[10]", "s32[10]"], 0), SPECIALS, payload)

    def key(i):
        v = float(SPECIALS[i])
        return total_order(float("nan") if v != v else (0.0 if v == 0 else v))

    np.testing.assert_array_equal(perm, sorted(range(10), key=key))


def test_sort_general_lexicographic_comparator():
    comp = """cmp {
  a = s32[] parameter(0)  b = s32[] parameter(1)  c = f32[] parameter(2)  d = f32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  gt = pred[] compare(c, d), direction=GT, type=TOTALORDER
  tie = pred[] and(eq, gt)
  ROOT r = pred[] or(lt, tie)
}
"""
    k0 = RNG.integers(0, 3, (2, 21)).astype(np.int32)
    k1 = RNG.integers(0, 4, (2, 21)).astype(np.float32)
    got0, got1 = run(sort_text(comp, ["s32[2,21]", "f32[2,21]"], 1), k0, k1)
    for r in range(2):
        order = sorted(range(21), key=lambda i: (k0[r, i], -k1[r, i]))
        np.testing.assert_array_equal(got0[r], k0[r, order])
        np.testing.assert_array_equal(got1[r], k1[r, order])


def test_sort_general_comparator_on_second_operand_is_stable():
    comp = """cmp {
  a = f32[] parameter(0)  b = f32[] parameter(1)  c = s32[] parameter(2)  d = s32[] parameter(3)
  ROOT r = pred[] compare(c, d), direction=GT
}
"""
    payload = np.arange(13, dtype=np.float32)
    keys = RNG.integers(0, 3, 13).astype(np.int32)
    got_payload, got_keys = run(sort_text(comp, ["f32[13]", "s32[13]"], 0), payload, keys)
    order = sorted(range(13), key=lambda i: -keys[i])
    np.testing.assert_array_equal(got_payload, payload[order])
    np.testing.assert_array_equal(got_keys, keys[order])


@pytest.mark.parametrize("largest", [True, False])
def test_topk_total_order_and_lower_index_on_ties(largest):
    x = np.stack([SPECIALS, np.array([5, 1, 5, 2, 5, 0, 1, 1, 9, 9], np.float32)])
    text = ("HloModule m\nENTRY e {\np = f32[2,10] parameter(0)\n"
            f"ROOT t = (f32[2,4], s32[2,4]) topk(p), k=4, largest={str(largest).lower()}\n}}")
    values, indices = run(text, x)
    for r in range(2):
        keys = [total_order(float(v)) for v in x[r]]
        order = sorted(range(10), key=lambda i: -keys[i] if largest else keys[i])[:4]
        np.testing.assert_array_equal(indices[r], order)
        np.testing.assert_array_equal(values[r].view(np.int32), x[r, order].view(np.int32))
    assert indices.dtype == np.int32


def test_sort_and_topk_against_xla_cpu():
    pytest.importorskip("jax", reason="XLA:CPU reference needs jax")
    from hlo_run.xla_cpu import run_hlo_text

    x = RNG.integers(0, 5, (3, 17)).astype(np.float32)
    x[0, 3], x[1, 4] = np.nan, -0.0
    idx = np.broadcast_to(np.arange(17, dtype=np.int32), (3, 17)).copy()
    text = sort_text(compare_comp("f32", "GT", "TOTALORDER", payload=True), ["f32[3,17]", "s32[3,17]"], 1)
    for g, w in zip(run(text, x, idx), run_hlo_text(text, [x, idx])):
        np.testing.assert_array_equal(g, w)
    text_k = ("HloModule m\nENTRY e {\np = f32[3,17] parameter(0)\n"
              "ROOT t = (f32[3,5], s32[3,5]) topk(p), k=5\n}")
    for g, w in zip(run(text_k, x), run_hlo_text(text_k, [x])):
        np.testing.assert_array_equal(g, w)


def test_bad_sort_and_topk_raise_interpreter_errors_naming_the_instruction():
    from hlo_common.errors import InterpreterError

    text = sort_text(compare_comp("f32", "LT"), ["f32[2,3]"], 0).replace("dimensions={0}", "dimensions={0,1}")
    with pytest.raises(InterpreterError, match=r"%s \(sort\)"):
        run(text, np.zeros((2, 3), np.float32))
    text_k = ("HloModule m\nENTRY e {\np = f32[3] parameter(0)\n"
              "ROOT big = (f32[5], s32[5]) topk(p), k=5\n}")
    with pytest.raises(InterpreterError, match=r"%big \(topk\)"):
        run(text_k, np.zeros(3, np.float32))


def test_comparator_that_bitcasts_f32_to_s32_compares_the_bits():
    # XLA's sort comparators (its ComparisonExpander's total order) bitcast f32 keys to s32 and
    # flip the magnitude bits of negative ones: the comparator must see the bits (xor of floats
    # would be meaningless), giving the float order with -0 before +0.
    text = """HloModule m
key {
  x = f32[] parameter(0)
  i = s32[] bitcast(x)
  zero = s32[] constant(0)
  mask = s32[] constant(2147483647)
  neg = pred[] compare(i, zero), direction=LT
  flipped = s32[] xor(mask, i)
  ROOT k = s32[] select(neg, flipped, i)
}
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ka = s32[] call(a), to_apply=key
  kb = s32[] call(b), to_apply=key
  ROOT lt = pred[] compare(ka, kb), direction=LT
}
ENTRY e {
  p = f32[7] parameter(0)
  ROOT s = f32[7] sort(p), dimensions={0}, to_apply=cmp
}"""
    x = np.array([1.5, -2.0, 0.0, 0.25, -0.0, 3.0, -7.0], np.float32)
    got = run(text, x)
    np.testing.assert_array_equal(got, np.sort(x))
    assert np.signbit(got[2]) and not np.signbit(got[3])  # -0 sorts before +0 in the total order
