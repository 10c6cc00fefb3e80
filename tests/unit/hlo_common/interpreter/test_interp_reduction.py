"""Reference interpreter: reduce, reduce-window, select-and-scatter, map, scan.

Expectations are numpy written here: `np.sum`-style reductions for the fast paths and explicit
loops over tiny shapes, following XLA's definitions (windows skip padding and base-dilation holes;
select-and-scatter keeps the first selected element), for the general paths. A few cases are
also checked against XLA:CPU when jax is installed.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

RNG = np.random.default_rng(77)


def run(text: str, *args):
    return evaluate(parse_module(text), list(args))


def binary(name: str, t: str, op: str) -> str:
    return f"{name} {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT r = {t}[] {op}(a, b) }}\n"


COMPS = (binary("add", "f32", "add") + binary("sub", "f32", "subtract") + binary("max", "f32", "maximum")
         + binary("addbf", "bf16", "add") + binary("adds8", "s8", "add") + binary("mulu8", "u8", "multiply")
         + binary("and", "pred", "and") + binary("ors", "s32", "or")
         + "ge { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = pred[] compare(a, b), "
           "direction=GE }\n")

ARGMAX = """argmax {
  a = f32[] parameter(0)  ai = s32[] parameter(1)  b = f32[] parameter(2)  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(gt, tie)
  v = f32[] select(pick, a, b)
  i = s32[] select(pick, ai, bi)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
"""


def entry(body: str, comps: str = COMPS) -> str:
    return f"HloModule m\n{comps}\nENTRY e {{\n{body}\n}}\n"


def dims(shape) -> str:
    return ",".join(str(d) for d in shape)


# -- reduce ----------------------------------------------------------------------------------------

def test_reduce_add_over_several_dims():
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    text = entry("p = f32[3,4,5] parameter(0)\nz = f32[] constant(0)\n"
                 "ROOT r = f32[4] reduce(p, z), dimensions={0,2}, to_apply=add")
    np.testing.assert_allclose(run(text, x), x.astype(np.float64).sum(axis=(0, 2)), rtol=1e-5)


def test_reduce_max_propagates_nan_and_uses_init():
    x = np.array([[1, 2, 3], [4, np.nan, 5], [-7, -8, -9]], np.float32)
    text = entry("p = f32[3,3] parameter(0)\nz = f32[] constant(-5)\n"
                 "ROOT r = f32[3] reduce(p, z), dimensions={1}, to_apply=max")
    got = run(text, x)
    assert got[0] == 3 and np.isnan(got[1]) and got[2] == -5


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("rows", [8, 1024])  # one numpy call; blocks of rows on the threads
def test_reduce_bf16_max_and_min_equal_numpys_on_the_widened_values(op, rows):
    """A bf16 max/min widens each block of rows before reducing: NaNs, infinities and signed zeros
    must come out as numpy's reduction of the f32 values gives them."""
    bits = RNG.integers(0, 1 << 16, (rows, 1024), dtype=np.uint32).astype(np.uint16)
    bits[:, 5] = 0x8000  # -0 in every row, +0 in some
    bits[::3, 7] = 0x0000
    bits[::5, 9] = 0x7FC1  # a NaN with a payload
    bits[::7, 9] = 0xFF80  # -inf
    x = bits.view(ml_dtypes.bfloat16)
    comps = binary("m", "bf16", op)
    text = entry(f"p = bf16[{rows},1024] parameter(0)\nz = bf16[] constant(-inf)\n"
                 f"ROOT r = bf16[{rows}] reduce(p, z), dimensions={{1}}, to_apply=m", comps)
    got = run(text, x)
    want = getattr(np, op)(getattr(np, op).reduce(x.astype(np.float32), axis=1), np.float32(-np.inf))
    with np.errstate(invalid="ignore"):  # NaN -> bf16 warns
        want = want.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_reduce_bf16_sum_accumulates_in_f32():
    # 1024 ones: a bf16 running sum stops growing at 256; XLA:CPU (and we) give 1024.
    x = np.ones(1024, ml_dtypes.bfloat16)
    text = entry("p = bf16[1024] parameter(0)\nz = bf16[] constant(0)\n"
                 "ROOT r = bf16[] reduce(p, z), dimensions={0}, to_apply=addbf")
    got = run(text, x)
    assert got.dtype == ml_dtypes.bfloat16 and float(got) == 1024.0


def test_reduce_integers_wrap_exactly():
    x = np.full((2, 10), 100, np.int8)
    text = entry("p = s8[2,10] parameter(0)\nz = s8[] constant(1)\n"
                 "ROOT r = s8[2] reduce(p, z), dimensions={1}, to_apply=adds8")
    want = (1 + 1000) % 256
    want = want - 256 if want > 127 else want
    np.testing.assert_array_equal(run(text, x), [want, want])
    y = np.array([[3, 200, 7]], np.uint8)
    text_mul = entry("p = u8[1,3] parameter(0)\nz = u8[] constant(1)\n"
                     "ROOT r = u8[1] reduce(p, z), dimensions={1}, to_apply=mulu8")
    assert run(text_mul, y)[0] == (3 * 200 * 7) % 256


def test_reduce_pred_and_and_integer_or():
    p = np.array([[True, True], [True, False]])
    text = entry("p = pred[2,2] parameter(0)\nz = pred[] constant(true)\n"
                 "ROOT r = pred[2] reduce(p, z), dimensions={1}, to_apply=and")
    np.testing.assert_array_equal(run(text, p), [True, False])
    q = np.array([1, 2, 8], np.int32)
    text_or = entry("p = s32[3] parameter(0)\nz = s32[] constant(16)\n"
                    "ROOT r = s32[] reduce(p, z), dimensions={0}, to_apply=ors")
    assert run(text_or, q) == 27


@pytest.mark.parametrize("length", [5, 37])  # short, and long enough for the tree when associative
def test_reduce_general_reducer_non_commutative(length):
    # subtract is not associative, so every length folds in element order, as HloEvaluator and
    # XLA:CPU do: ((init - x0) - x1) - ... (exact on small integers).
    x = RNG.integers(-4, 5, (2, length)).astype(np.float32)
    text = entry(f"p = f32[2,{length}] parameter(0)\nz = f32[] constant(0)\n"
                 f"ROOT r = f32[2] reduce(p, z), dimensions={{1}}, to_apply=sub")
    np.testing.assert_array_equal(run(text, x), -x.sum(axis=1))


NESTED_ADD = """nested {
  a0 = f32[] parameter(0)  a1 = f32[] parameter(1)  e0 = f32[] parameter(2)  e1 = f32[] parameter(3)
  sum0 = f32[] add(a0, a1)
  sum1 = f32[] add(e0, e1)
  ROOT t = (f32[], f32[]) tuple(sum0, sum1)
}
"""


def test_reduce_variadic_non_associative_reducer_folds_in_element_order():
    # The corpus module service_gpu_tests reduce_nested: (acc0, acc1, x, y) -> (acc0 + acc1, x + y).
    # Folded in row-major order over dims {0,2}: acc1 holds the previous position's x + y (the
    # init at first), so out0 = init + init + the sum of (x + y) over every reduced position but
    # the last, and out1 = x + y at the last one. Small integers keep it exact.
    a = RNG.integers(-4, 5, (4, 3, 50)).astype(np.float32)
    b = RNG.integers(-4, 5, (4, 3, 50)).astype(np.float32)
    text = entry("a = f32[4,3,50] parameter(0)\nb = f32[4,3,50] parameter(1)\nc = f32[] constant(2)\n"
                 "ROOT d = (f32[3], f32[3]) reduce(a, b, c, c), dimensions={0,2}, to_apply=nested",
                 NESTED_ADD)
    out0, out1 = run(text, a, b)
    pairs = (a + b).transpose(1, 0, 2).reshape(3, -1)  # [kept, reduced positions in row-major order]
    np.testing.assert_array_equal(out0, 2 + 2 + pairs[:, :-1].sum(axis=1))
    np.testing.assert_array_equal(out1, pairs[:, -1])


def test_is_associative_probe():
    from hlo_common.interpreter.evaluator import Evaluator
    from hlo_common.interpreter.reducers import is_associative

    module = parse_module(entry("ROOT p = f32[] parameter(0)", COMPS + ARGMAX + NESTED_ADD))
    comps = {c.name: c for c in module.computations}
    ev = Evaluator()
    verdicts = {name: is_associative(comps[name], ev) for name in ("add", "max", "argmax", "sub", "nested")}
    assert verdicts == {"add": True, "max": True, "argmax": True, "sub": False, "nested": False}


def test_reduce_variadic_argmax_first_index_on_ties():
    x = np.array([[1, 5, 5, 2], [7, 7, 7, 7], [0, -1, 3, 3]], np.float32)
    idx = np.broadcast_to(np.arange(4, dtype=np.int32), x.shape).copy()
    text = entry("p = f32[3,4] parameter(0)\ni = s32[3,4] parameter(1)\n"
                 "z = f32[] constant(-inf)\nzi = s32[] constant(0)\n"
                 "ROOT r = (f32[3], s32[3]) reduce(p, i, z, zi), dimensions={1}, to_apply=argmax", ARGMAX)
    values, indices = run(text, x, idx)
    np.testing.assert_array_equal(values, [5, 7, 3])
    np.testing.assert_array_equal(indices, [1, 0, 2])


def test_reduce_of_empty_dimension_gives_init():
    x = np.zeros((3, 0), np.float32)
    text = entry("p = f32[3,0] parameter(0)\nz = f32[] constant(-2)\n"
                 "ROOT r = f32[3] reduce(p, z), dimensions={1}, to_apply=max")
    np.testing.assert_array_equal(run(text, x), [-2, -2, -2])


# -- reduce-window ---------------------------------------------------------------------------------

def window_positions(out_index, sizes, strides, pads, lhs_dil, rhs_dil, in_shape):
    """Input positions a window at `out_index` reads, row-major, skipping padding and holes."""
    for k in itertools.product(*(range(s) for s in sizes)):
        pos = []
        for x, kk, st, (lo, _), ld, rd, n in zip(out_index, k, strides, pads, lhs_dil, rhs_dil, in_shape):
            p = x * st + kk * rd - lo
            if p % ld or not 0 <= p // ld < n:
                break
            pos.append(p // ld)
        else:
            yield tuple(pos)


def reduce_window_reference(x, init, f, sizes, strides, pads, lhs_dil, rhs_dil):
    out_shape = []
    for n, s, st, (lo, hi), ld, rd in zip(x.shape, sizes, strides, pads, lhs_dil, rhs_dil):
        padded = (n - 1) * ld + 1 + lo + hi
        out_shape.append(max(0, (padded - ((s - 1) * rd + 1)) // st + 1))
    out = np.empty(out_shape, np.float64)
    for o in np.ndindex(*out_shape):
        acc = init
        for pos in window_positions(o, sizes, strides, pads, lhs_dil, rhs_dil, x.shape):
            acc = f(acc, float(x[pos]))
        out[o] = acc
    return out


RW_CASES = [
    # sizes, strides, pads, lhs_dilate, rhs_dilate
    ((2, 3), (1, 1), ((0, 0), (1, 1)), (1, 1), (1, 1)),
    ((3, 2), (2, 3), ((1, 2), (0, 1)), (1, 1), (1, 1)),
    ((2, 2), (1, 1), ((1, 0), (-1, 1)), (2, 1), (1, 2)),
    ((4, 1), (1, 1), ((3, 0), (0, 0)), (1, 1), (1, 1)),  # a cumulative sum (jnp.cumsum)
]


def window_text(sizes, strides, pads, ld, rd) -> str:
    x = "x".join
    return (f"size={x(map(str, sizes))} stride={x(map(str, strides))} "
            f"pad={x(f'{lo}_{hi}' for lo, hi in pads)} lhs_dilate={x(map(str, ld))} "
            f"rhs_dilate={x(map(str, rd))}")


@pytest.mark.parametrize("case", RW_CASES, ids=lambda c: window_text(*c))
@pytest.mark.parametrize("comp, init, f", [
    ("add", 0.0, lambda a, b: a + b), ("max", -np.inf, max), ("sub", 1.0, lambda a, b: a - b),
])
def test_reduce_window_matches_loops(case, comp, init, f):
    x = RNG.integers(-9, 10, (5, 6)).astype(np.float32)
    want = reduce_window_reference(x, init, f, *case)
    init_text = "-inf" if init == -np.inf else repr(init)
    text = entry(f"p = f32[5,6] parameter(0)\nz = f32[] constant({init_text})\n"
                 f"ROOT r = f32[{dims(want.shape)}] reduce-window(p, z), window={{{window_text(*case)}}}, "
                 f"to_apply={comp}")
    np.testing.assert_allclose(run(text, x), want, rtol=1e-6)


def test_reduce_window_variadic_argmax():
    x = RNG.integers(0, 3, (1, 8)).astype(np.float32)
    idx = np.arange(8, dtype=np.int32).reshape(1, 8)
    text = entry("p = f32[1,8] parameter(0)\ni = s32[1,8] parameter(1)\nz = f32[] constant(-inf)\n"
                 "zi = s32[] constant(-1)\nROOT r = (f32[1,3], s32[1,3]) reduce-window(p, i, z, zi), "
                 "window={size=1x3 stride=1x3 pad=0_0x0_1}, to_apply=argmax", ARGMAX)
    values, indices = run(text, x, idx)
    for w in range(3):
        seg = x[0, 3 * w:3 * w + 3]
        assert values[0, w] == seg.max() and indices[0, w] == 3 * w + int(np.argmax(seg))


def test_reduce_window_integer_and_bf16_against_numpy():
    x = RNG.integers(-128, 128, (4, 9), dtype=np.int8)
    text = entry("p = s8[4,9] parameter(0)\nz = s8[] constant(0)\n"
                 "ROOT r = s8[4,3] reduce-window(p, z), window={size=1x3 stride=1x3}, to_apply=adds8")
    want = x.astype(np.int64).reshape(4, 3, 3).sum(axis=2)
    np.testing.assert_array_equal(run(text, x), ((want + 128) % 256 - 128).astype(np.int8))
    y = np.ones((1, 512), ml_dtypes.bfloat16)
    text_bf = entry("p = bf16[1,512] parameter(0)\nz = bf16[] constant(0)\n"
                    "ROOT r = bf16[1,1] reduce-window(p, z), window={size=1x512}, to_apply=addbf")
    assert float(run(text_bf, y)[0, 0]) == 512.0


# -- select-and-scatter ----------------------------------------------------------------------------

def select_and_scatter_reference(operand, source, init, sizes, strides, pads, scatter):
    out = np.full(operand.shape, init, np.float64)
    for s in np.ndindex(*source.shape):
        best = None
        ones = (1,) * len(sizes)
        for pos in window_positions(s, sizes, strides, pads, ones, ones, operand.shape):
            if best is None or not operand[best] >= operand[pos]:
                best = pos
        if best is not None:
            out[best] = scatter(out[best], float(source[s]))
    return out


@pytest.mark.parametrize("pads, strides, comp, f", [
    (((0, 0), (0, 0)), (2, 2), "add", lambda o, s: o + s),
    (((1, 1), (1, 1)), (2, 2), "sub", lambda o, s: o - s),  # overlapping windows, non-commutative
    (((0, 1), (1, 0)), (1, 1), "add", lambda o, s: o + s),
])
def test_select_and_scatter_matches_loops(pads, strides, comp, f):
    operand = RNG.integers(0, 3, (5, 6)).astype(np.float32)  # many ties: the first one must win
    sizes = (3, 3)
    out_shape = [max(0, (n + lo + hi - s) // st + 1)
                 for n, s, st, (lo, hi) in zip((5, 6), sizes, strides, pads)]
    source = RNG.integers(1, 9, out_shape).astype(np.float32)
    want = select_and_scatter_reference(operand, source, 0.5, sizes, strides, pads, f)
    win = f"size=3x3 stride={strides[0]}x{strides[1]} pad={pads[0][0]}_{pads[0][1]}x{pads[1][0]}_{pads[1][1]}"
    text = entry(f"o = f32[5,6] parameter(0)\ns = f32[{dims(out_shape)}] parameter(1)\ni = f32[] "
                 f"constant(0.5)\n"
                 f"ROOT r = f32[5,6] select-and-scatter(o, s, i), window={{{win}}}, select=ge, "
                 f"scatter={comp}")
    np.testing.assert_allclose(run(text, operand, source), want)


# -- map and scan ----------------------------------------------------------------------------------

def test_map_applies_computation_elementwise():
    comp = ("fma { a = f32[] parameter(0)  b = f32[] parameter(1)  m = f32[] multiply(a, b)\n"
            "ROOT r = f32[] add(m, a) }")
    x, y = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((2, 3)).astype(np.float32)
    text = entry("x = f32[2,3] parameter(0)\ny = f32[2,3] parameter(1)\n"
                 "ROOT r = f32[2,3] map(x, y), dimensions={0,1}, to_apply=fma", comp)
    np.testing.assert_allclose(run(text, x, y), x * y + x, rtol=1e-6)


def test_scan_running_sum_with_carry():
    comp = ("body { x = f32[] parameter(0)  c = f32[] parameter(1)  s = f32[] add(x, c)\n"
            "ROOT t = (f32[], f32[]) tuple(s, s) }")
    x = np.arange(1, 7, dtype=np.float32)
    text = entry("x = f32[6] parameter(0)\ninit = f32[] constant(10)\n"
                 "ROOT r = (f32[6], f32[]) scan(x, init), dimensions={0}, num_carries=1, to_apply=body", comp)
    outs, carry = run(text, x)
    np.testing.assert_array_equal(outs, 10 + np.cumsum(x))
    assert carry == 10 + x.sum()


# -- against XLA:CPU -------------------------------------------------------------------------------

XLA_CASES = {
    "reduce_argmax": ("p = f32[6,40] parameter(0)\ni = s32[6,40] iota(), iota_dimension=1\n"
                      "z = f32[] constant(-inf)\nzi = s32[] constant(0)\n"
                      "ROOT r = (f32[6], s32[6]) reduce(p, i, z, zi), dimensions={1}, "
                      "to_apply=argmax", ARGMAX),
    "reduce_window_dilated": ("p = f32[6,40] parameter(0)\nz = f32[] constant(0)\n"
                              "ROOT r = f32[6,37] reduce-window(p, z), window={size=1x3 pad=0_0x1_0 "
                              "lhs_dilate=1x1 "
                              "rhs_dilate=1x2}, to_apply=add", COMPS),
    "select_and_scatter_padded": ("p = f32[6,40] parameter(0)\ns = f32[3,20] parameter(1)\nz = f32[] "
    "constant(0)\n"
                                  "ROOT r = f32[6,40] select-and-scatter(p, s, z), window={size=3x3 "
                                  "stride=2x2 "
                                  "pad=1_1x1_1}, select=ge, scatter=add", COMPS),
}


@pytest.mark.parametrize("name", sorted(XLA_CASES))
def test_against_xla_cpu(name):
    pytest.importorskip("jax", reason="XLA:CPU reference needs jax")
    from hlo_run.xla_cpu import run_hlo_text

    body, comps = XLA_CASES[name]
    text = entry(body, comps)
    module = parse_module(text)
    args = [RNG.integers(-3, 4, p.shape.dims).astype(np.float32) for p in module.entry.parameters]
    got, want = run(text, *args), run_hlo_text(text, args)
    for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
