"""Compiled runs of region members (`interpreter/region_jit.py`) against the numpy kernels.

Every value a compiled loop computes must be the numpy kernels' bit for bit: each module here runs
with the compiled runs, with the numpy kernels (`region_jit.ENABLED` off) and op by op (no regions),
on operands full of special values (NaNs with payloads, infinities, signed zeros, subnormals,
values near overflow), with every operand form a loop reads (a full slab, a per-row value, a
per-column row as a tile and as a bf16 row, one value, bf16 handed between regions in f32) and a
last slab shorter than the others.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_common.interpreter import evaluate, narrow_jit, region_jit, regions
from hlo_common.hlo.parser import parse_module

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(21)
ROWS, COLS = 100, 2048  # slabs of 32 rows (CHUNK_ELEMENTS below): 32, 32, 32 and 4

F32_CHAIN = """
HloModule m
ENTRY e {
  x = f32[100,2048] parameter(0)
  y = f32[100,2048] parameter(1)
  r = f32[100] parameter(2)
  c = f32[2048] parameter(3)
  s = f32[] parameter(4)
  rb = f32[100,2048] broadcast(r), dimensions={0}
  cb = f32[100,2048] broadcast(c), dimensions={1}
  sb = f32[100,2048] broadcast(s), dimensions={}
  a = f32[100,2048] add(x, rb)
  b = f32[100,2048] subtract(a, cb)
  m = f32[100,2048] multiply(b, sb)
  d = f32[100,2048] divide(m, y)
  n = f32[100,2048] negate(d)
  ab = f32[100,2048] abs(n)
  ex = f32[100,2048] exponential(ab)
  q = f32[100,2048] divide(ex, x)
  w = f32[100,2048] subtract(q, d)
  h = bf16[100,2048] convert(w)
  back = f32[100,2048] convert(h)
  g = f32[100,2048] multiply(back, cb)
  ROOT t = (f32[100,2048], f32[100,2048], bf16[100,2048]) tuple(g, d, h)
}"""

BF16_CHAIN = """
HloModule m
mx { p = bf16[] parameter(0) q = bf16[] parameter(1) ROOT m = bf16[] maximum(p, q) }
ENTRY e {
  x = bf16[100,2048] parameter(0)
  y = bf16[100,2048] parameter(1)
  r = bf16[100] parameter(2)
  c = bf16[2048] parameter(3)
  s = bf16[] parameter(4)
  rb = bf16[100,2048] broadcast(r), dimensions={0}
  cb = bf16[100,2048] broadcast(c), dimensions={1}
  sb = bf16[100,2048] broadcast(s), dimensions={}
  a = bf16[100,2048] add(x, rb)
  m = bf16[100,2048] multiply(a, cb)
  d = bf16[100,2048] divide(m, y)
  ex = bf16[100,2048] exponential(d)
  th = bf16[100,2048] tanh(ex)
  u = bf16[100,2048] subtract(th, sb)
  nn = bf16[100,2048] negate(u)
  lg = bf16[100,2048] log(nn)
  ab = bf16[100,2048] abs(lg)
  cv = f32[100,2048] convert(ab)
  z = bf16[] constant(0)
  mx = bf16[100] reduce(d, z), dimensions={1}, to_apply=mx
  mb = bf16[100,2048] broadcast(mx), dimensions={0}
  after = bf16[100,2048] subtract(d, mb)
  ROOT t = (f32[100,2048], bf16[100,2048], bf16[100,2048], bf16[100,2048]) tuple(cv, d, u, after)
}"""

SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3e-39, 3.3e38, -3.3e38, 1.0,
                     -1.0, 0.5, 88.0, -104.0], np.float32)


def _operand(shape, dtype) -> np.ndarray:
    """Normal values with a tenth of them special (a NaN with a payload among them)."""
    a = (RNG.standard_normal(shape) * 4).astype(np.float32).reshape(-1)
    picks = RNG.random(a.size) < 0.1
    a[picks] = RNG.choice(SPECIALS, picks.sum())
    if a.size > 7:
        a.view(np.uint32)[7] = 0x7FA01234  # a signaling NaN with a payload
    with np.errstate(invalid="ignore"):
        return a.reshape(shape).astype(dtype)


def _bits(value) -> list[np.ndarray]:
    leaves = value if isinstance(value, tuple) else (value,)
    return [leaf.view(np.uint16 if leaf.dtype.itemsize == 2 else np.uint32) for leaf in leaves]


def _assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """The same bits, except that a NaN may be another NaN: which NaN an operation on two NaNs
    (or an invalid one) gives differs between numpy's own loops (region_jit's docstring)."""
    exponent = np.uint16(0x7F80) if got.dtype == np.uint16 else np.uint32(0x7F800000)
    mantissa = ~exponent & (np.uint16(0x7FFF) if got.dtype == np.uint16 else np.uint32(0x7FFFFFFF))
    got_nan = ((got & exponent) == exponent) & ((got & mantissa) != 0)
    want_nan = ((want & exponent) == exponent) & ((want & mantissa) != 0)
    np.testing.assert_array_equal(got_nan, want_nan)
    np.testing.assert_array_equal(np.where(got_nan, 0, got), np.where(want_nan, 0, want))
    assert got_nan.any()  # the operands made NaNs


def _three_ways(monkeypatch, text: str, args: list) -> list:
    """The module's value with compiled runs (asserting some ran), with numpy kernels, op by op."""
    monkeypatch.setattr(regions, "CHUNK_ELEMENTS", 1 << 16)
    module = parse_module(text)
    bound = []
    original = region_jit.bind

    def spy(*a):
        bound.append(original(*a))
        return bound[-1]

    monkeypatch.setattr(region_jit, "bind", spy)
    compiled = evaluate(module, args)
    assert any(bound), "no compiled run was used"
    monkeypatch.setattr(region_jit, "ENABLED", False)
    kernels = evaluate(module, args)
    monkeypatch.setattr(regions, "MIN_ELEMENTS", 1 << 62)
    op_by_op = evaluate(module, args)
    return [_bits(compiled), _bits(kernels), _bits(op_by_op)]


needs_llvm = pytest.mark.skipif(not narrow_jit.available(), reason="llvmlite cannot compile here")


@needs_llvm
@pytest.mark.parametrize("dtype, text", [(np.float32, F32_CHAIN), (BF16, BF16_CHAIN)], ids=["f32", "bf16"])
def test_compiled_runs_match_the_numpy_kernels_bit_for_bit(monkeypatch, dtype, text):
    args = [_operand(s, dtype) for s in [(ROWS, COLS), (ROWS, COLS), (ROWS,), (COLS,), ()]]
    compiled, kernels, op_by_op = _three_ways(monkeypatch, text, args)
    for got, numpy_kernels, plain in zip(compiled, kernels, op_by_op):
        _assert_same_bits(got, numpy_kernels)
        _assert_same_bits(got, plain)


@needs_llvm
def test_runs_split_at_members_numpy_computes_and_store_what_is_read_later():
    module = parse_module(F32_CHAIN)
    from hlo_common.interpreter import evaluator
    from hlo_common.interpreter.plan import Plan

    plan = Plan(module.entry, evaluator._plan_handler)
    (region,) = [s[0].__self__ for s in plan.variant_steps if hasattr(s[0], "__self__")
                 and isinstance(s[0].__self__, regions.Region)]
    runs = region.compiled_runs()
    names = [[region.members[k].name for k in range(r.start, r.end)] for r in runs]
    assert names == [["a", "b", "m", "d", "n", "ab"], ["q", "w", "h", "back", "g"]]
    stored = [[region.members[s].name for s, _ in r.stores] for r in runs]
    assert stored == [["d", "ab"], ["h", "g"]]  # d: read by w and an output; ab: by the exp


def test_disabled_runs_are_not_planned(monkeypatch):
    monkeypatch.setattr(region_jit, "ENABLED", False)
    assert region_jit.plan_runs([], set(), set(), set(), set()) == []


RESTARTED = """
HloModule m
ENTRY e {
  x = f32[512,512] parameter(0)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[8] rng(lo, hi), distribution=rng_uniform
  s = u64[2] rng-get-and-update-state(), delta=4
  h = f32[] constant(0.5)
  hb = f32[512,512] broadcast(h), dimensions={}
  y = f32[512,512] multiply(x, hb)
  ROOT t = (f32[8], u64[2], f32[512,512]) tuple(r, s, y)
}"""


def test_a_restarted_evaluator_runs_as_a_fresh_one():
    """`Evaluator.restart` keeps the plans (and the compiled runs their regions bound) but starts
    the generators over: every run gives what a fresh evaluator gives."""
    from hlo_common.interpreter import Evaluator

    module = parse_module(RESTARTED)
    x = RNG.standard_normal((512, 512)).astype(np.float32)
    fresh = Evaluator().evaluate(module, [x])
    ev = Evaluator()
    runs = []
    for _ in range(3):
        ev.restart()
        runs.append(ev.evaluate(module, [x]))
    plans = dict(ev._plans)
    for run in runs:
        for got, want in zip(run, fresh):
            np.testing.assert_array_equal(got, want)
    ev.evaluate(module, [x])  # without a restart the generators go on
    assert not np.array_equal(ev.evaluate(module, [x])[0], fresh[0]) and ev._plans == plans


def test_a_last_table_lookup_runs_in_a_scalar_loop_over_the_row():
    """(the bf16 chain above runs both forms: `ex` ends its run, `lg` does not)"""
    full, table = (region_jit.FULL, "f32"), ("table", "u32")
    sub = ("subtract", (("i", 0), ("i", 0)), True, -1)
    last = region_jit.loop_ir((full, table), (sub, ("log", (("m", 0),), False, 1)), ((1, "f32"),))
    inside = region_jit.loop_ir((full, table), (("log", (("i", 0),), False, 1), sub), ((1, "f32"),))
    narrowed = region_jit.loop_ir((full, table), (sub, ("log", (("m", 0),), False, 1)), ((1, "bf16"),))
    assert "look:" in last and "look:" not in inside and "look:" not in narrowed
