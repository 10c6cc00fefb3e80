"""The interpreter's evaluation plans: invariant caching, in-place updates, elementwise regions.

Each rearrangement must leave every value unchanged. Expectations are numpy written here, or the
op-by-op path of the same interpreter (`run_elementwise` evaluates a computation without regions
or caches), compared bit for bit.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo_common.interpreter import Evaluator, evaluate, evaluator, regions
from hlo_common.interpreter.registry import HANDLERS
from hlo_common.hlo.parser import parse_module

RNG = np.random.default_rng(11)
LOOP = """
HloModule m
add { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] add(a, b) }
squares {
  i = s32[] parameter(0)
  io = s32[1000] iota(), iota_dimension=0
  sq = s32[1000] multiply(io, io)
  z = s32[] constant(0)
  total = s32[] reduce(sq, z), dimensions={0}, to_apply=add
  ROOT r = s32[] add(total, i)
}
body {
  p = (s32[], s32[], f32[10]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  acc = s32[] get-tuple-element(p), index=1
  buf = f32[10] get-tuple-element(p), index=2
  one = s32[] constant(1)
  c = s32[] call(i), to_apply=squares
  acc2 = s32[] add(acc, c)
  v = f32[] convert(i)
  u = f32[1] reshape(v)
  buf2 = f32[10] dynamic-update-slice(buf, u, i)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], s32[], f32[10]) tuple(i2, acc2, buf2)
}
cond {
  p = (s32[], s32[], f32[10]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  buf = f32[10] parameter(0)
  z = s32[] constant(0)
  t = (s32[], s32[], f32[10]) tuple(z, z, buf)
  ROOT w = (s32[], s32[], f32[10]) while(t), condition=cond, body=body
}
"""


def test_loop_invariant_values_are_computed_at_most_twice(monkeypatch):
    evaluator._import_handlers()
    calls = []
    iota = HANDLERS["iota"]
    monkeypatch.setitem(HANDLERS, "iota", lambda instr, ops, ev: calls.append(1) or iota(instr, ops, ev))
    buf = np.full(10, -1, np.float32)
    i, acc, out = evaluate(parse_module(LOOP), [buf])
    squares = int((np.arange(1000, dtype=np.int64) ** 2).sum())
    assert i == 10 and acc == np.int64(10 * squares + 45).astype(np.int32)  # s32 wraps
    np.testing.assert_array_equal(out, np.arange(10, dtype=np.float32))
    assert len(calls) == 2  # the first two calls of `squares` (the second one fills the cache)
    np.testing.assert_array_equal(buf, -1)  # the argument was never written


def test_impure_instructions_are_never_cached():
    text = """
    HloModule m
    body {
      p = (s32[], f32[4,3]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      buf = f32[4,3] get-tuple-element(p), index=1
      lo = f32[] constant(0)
      hi = f32[] constant(1)
      r = f32[1,3] rng(lo, hi), distribution=rng_uniform
      z = s32[] constant(0)
      buf2 = f32[4,3] dynamic-update-slice(buf, r, i, z)
      one = s32[] constant(1)
      i2 = s32[] add(i, one)
      ROOT t = (s32[], f32[4,3]) tuple(i2, buf2)
    }
    cond { p = (s32[], f32[4,3]) parameter(0) i = s32[] get-tuple-element(p), index=0
           n = s32[] constant(4) ROOT lt = pred[] compare(i, n), direction=LT }
    ENTRY e { b = f32[4,3] parameter(0) z = s32[] constant(0) t = (s32[], f32[4,3]) tuple(z, b)
              ROOT w = (s32[], f32[4,3]) while(t), condition=cond, body=body }"""
    _, out = evaluate(parse_module(text), [np.zeros((4, 3), np.float32)])
    assert len({tuple(row) for row in out.tolist()}) == 4  # a fresh draw every iteration


def test_update_in_place_never_touches_a_value_still_in_use():
    # `buf` is read after the dynamic-update-slice and the scatter, so both must copy it.
    text = """
    HloModule m
    add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
    ENTRY e {
      p = f32[6] parameter(0)
      buf = f32[6] negate(p)
      u = f32[2] parameter(1)
      i = s32[] parameter(2)
      d = f32[6] dynamic-update-slice(buf, u, i)
      idx = s32[2,1] parameter(3)
      s = f32[6] scatter(buf, idx, u), update_window_dims={}, inserted_window_dims={0},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
      ROOT t = (f32[6], f32[6], f32[6]) tuple(d, s, buf)
    }"""
    p = np.arange(6, dtype=np.float32)
    u = np.array([10, 20], np.float32)
    d, s, buf = run(text, p, u, np.int32(3), np.array([[1], [1]], np.int32))
    np.testing.assert_array_equal(buf, -p)
    np.testing.assert_array_equal(d, [0, -1, -2, 10, 20, -5])
    np.testing.assert_array_equal(s, [0, 29, -2, -3, -4, -5])


def test_exclusive_means_no_other_reference():
    # (verdicts are taken before `assert`: pytest's assertion rewriting keeps references)
    holder = [np.zeros(4)]
    alone = evaluator._exclusive(holder[0])
    view = holder[0][1:]
    seen_by_view = evaluator._exclusive(holder[0])
    del view
    other = holder[0]
    seen_by_name = evaluator._exclusive(holder[0])
    del other
    broadcast = evaluator._exclusive(np.broadcast_to(np.zeros(1), (4,)))
    assert alone and not seen_by_view and not seen_by_name and not broadcast


def run(text: str, *args):
    return evaluate(parse_module(text), list(args))


SOFTMAX = """
HloModule m
max { a = bf16[] parameter(0) b = bf16[] parameter(1) ROOT m = bf16[] maximum(a, b) }
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  x = bf16[64,4096] parameter(0)
  c = bf16[] constant(1.5)
  cb = bf16[64,4096] broadcast(c), dimensions={}
  y = bf16[64,4096] multiply(x, cb)
  ninf = bf16[] constant(-inf)
  m = bf16[64] reduce(y, ninf), dimensions={1}, to_apply=max
  mb = bf16[64,4096] broadcast(m), dimensions={0}
  d = bf16[64,4096] subtract(y, mb)
  e = bf16[64,4096] exponential(d)
  ef = f32[64,4096] convert(e)
  z = f32[] constant(0)
  s = f32[64] reduce(ef, z), dimensions={1}, to_apply=add
  sb = f32[64,4096] broadcast(s), dimensions={0}
  q = f32[64,4096] divide(ef, sb)
  ROOT r = (bf16[64,4096], f32[64,4096]) tuple(y, q)
}"""


def test_regions_around_reductions_match_op_by_op_evaluation(monkeypatch):
    monkeypatch.setattr(regions, "CHUNK_ELEMENTS", 1 << 16)  # slabs of 16 rows
    # y feeds both the max reduce and the subtract that needs the reduce's result: one region
    # could not hold both without a cycle. y is also an output.
    module = parse_module(SOFTMAX)
    x = RNG.standard_normal((64, 4096)).astype(ml_dtypes.bfloat16)
    assert 64 * 4096 >= regions.MIN_ELEMENTS
    y, q = evaluate(module, [x])
    monkeypatch.setattr(regions, "MIN_ELEMENTS", 1 << 62)  # no regions: op by op
    y_ref, q_ref = evaluate(module, [x])
    np.testing.assert_array_equal(y.view(np.uint16), y_ref.view(np.uint16))
    np.testing.assert_array_equal(q.view(np.uint32), q_ref.view(np.uint32))
    yf = (x.astype(np.float32) * np.float32(1.5)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.view(np.uint16), yf.view(np.uint16))
    np.testing.assert_allclose(q.sum(axis=1), 1, rtol=1e-5)


LAYER_NORM_TAIL = """
HloModule m
ENTRY e {
  x = f32[%(rows)d,%(cols)d] parameter(0)
  mean = f32[%(rows)d] parameter(1)
  scale = f32[%(cols)d] parameter(2)
  mb = f32[%(rows)d,%(cols)d] broadcast(mean), dimensions={0}
  sb = f32[%(rows)d,%(cols)d] broadcast(scale), dimensions={1}
  d = f32[%(rows)d,%(cols)d] subtract(x, mb)
  p = f32[%(rows)d,%(cols)d] multiply(d, sb)
  q = f32[%(rows)d,%(cols)d] divide(sb, x)
  ROOT r = (f32[%(rows)d,%(cols)d], f32[%(rows)d,%(cols)d]) tuple(p, q)
}"""


def test_broadcast_rows_and_column_tiles_match_op_by_op_evaluation(monkeypatch):
    """A per-column operand is read from one slab-sized tile (the last, shorter slab reads its
    head), a per-row one row by row with numpy's buffer no longer than a row: the same values."""
    monkeypatch.setattr(regions, "CHUNK_ELEMENTS", 1 << 16)  # slabs of 64 rows; 300 = 4 x 64 + 44
    tiled = []
    original = regions._tiled

    def spy(*a):
        tiled.append(original(*a))
        return tiled[-1]

    monkeypatch.setattr(regions, "_tiled", spy)
    module = parse_module(LAYER_NORM_TAIL % {"rows": 300, "cols": 1024})
    args = [RNG.standard_normal(s).astype(np.float32) for s in [(300, 1024), 300, 1024]]
    got = evaluate(module, args)
    cuts = [cut for _, cut in tiled]
    assert regions.TILE in cuts and (True, False) in cuts and regions._slab_bufsize((300, 1024)) == 1024
    monkeypatch.setattr(regions, "MIN_ELEMENTS", 1 << 62)  # no regions: op by op
    want = evaluate(module, args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))
    np.testing.assert_array_equal(got[0], (args[0] - args[1][:, None]) * args[2])
    assert regions._slab_bufsize((1024, 256)) == 0 and regions._slab_bufsize((64, 8192)) == 0


def test_region_membership_avoids_cycles():
    from hlo_common.interpreter.plan import Plan, _reachable_post_order, _invariant_instructions

    module = parse_module(SOFTMAX)
    order = _reachable_post_order(module.entry)
    found = regions.find_regions(order, _invariant_instructions(order))
    names = [sorted(m.name for m in r.members) for r in found]
    assert ["y"] in names and ["d", "e", "ef"] in names and ["q"] in names
    Plan(module.entry, evaluator._plan_handler)  # scheduling would raise on a cycle


def test_plan_is_rebuilt_when_the_computation_changes():
    module = parse_module("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }")
    ev = Evaluator()
    x = np.array([1, 2], np.float32)
    np.testing.assert_array_equal(ev.evaluate(module, [x]), -x)
    comp = module.entry
    p = comp.parameters[0]
    from hlo_common.hlo.ir import HloInstruction

    new_root = HloInstruction("a", "add", p.shape, [p, p])
    comp.add_instruction(new_root)
    comp.root = new_root
    np.testing.assert_array_equal(ev.evaluate(module, [x]), 2 * x)


def test_loop_buffer_is_updated_in_place_after_the_first_iteration(monkeypatch):
    # The state tuple is handed to the body, so from the second iteration on nothing but the
    # dynamic-update-slice refers to the buffer: it may write into it. The first iteration's
    # buffer is the caller's argument, which must be copied.
    evaluator._import_handlers()
    owned = []
    dus = HANDLERS["dynamic-update-slice"]

    def recording(instr, operands, ev):
        owned.append(ev.owns(operands[0]))
        return dus(instr, operands, ev)

    monkeypatch.setitem(HANDLERS, "dynamic-update-slice", recording)
    buf = np.full(10, -1, np.float32)
    _, _, out = evaluate(parse_module(LOOP), [buf])
    np.testing.assert_array_equal(out, np.arange(10, dtype=np.float32))
    np.testing.assert_array_equal(buf, -1)
    assert owned == [False] + [True] * 9
