"""Sharding propagation and spmd-partitioning of while loops (`hlo_opt.spmd.control_rules`,
`hlo_opt.spmd.control_handlers`; XLA's HandleWhile in xla/service/spmd/spmd_partitioner.cc): the
carried tiling reaches the body and condition, which are partitioned on per-device shapes, and
the partitioned program on N interpreter devices gives what the unpartitioned one gives."""

from __future__ import annotations

import numpy as np
from spmd_testlib import collective_opcodes, partition, run_global

from hlo_common.hlo.parser import parse_module

LOOP = """HloModule module
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
body {
  t = (s32[], f32[8,4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  c = f32[8,4] get-tuple-element(t), index=1
  w = f32[4] get-tuple-element(t), index=2
  wb = f32[8,4] broadcast(w), dimensions={1}
  m = f32[8,4] multiply(c, wb)
  h = f32[8,4] tanh(m)
  zero = f32[] constant(0)
  colsum = f32[4] reduce(h, zero), dimensions={0}, to_apply=add
  ROOT out = (s32[], f32[8,4], f32[4]) tuple(next, h, colsum)
}
cond {
  t = (s32[], f32[8,4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
ENTRY entry {
  c0 = f32[8,4] parameter(0), sharding={devices=[4,1]<=[4]}
  w0 = f32[4] parameter(1), sharding={replicated}
  z = s32[] constant(0)
  init = (s32[], f32[8,4], f32[4]) tuple(z, c0, w0)
  loop = (s32[], f32[8,4], f32[4]) while(init), condition=cond, body=body
  ROOT c = f32[8,4] get-tuple-element(loop), index=1, sharding={devices=[4,1]<=[4]}
}"""


def test_loop_body_runs_on_tiles_and_matches_the_unpartitioned_loop():
    from hlo_common.interpreter.evaluator import Evaluator

    module = partition(LOOP, 4, "loop")
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    body = loop.attrs["body"]
    # the carried array is a row tile on each device, inside the loop too
    assert str(loop.shape.tuple_shapes[1]) .startswith("f32[2,4]")
    assert str(body.parameters[0].shape.tuple_shapes[1]).startswith("f32[2,4]")
    # the column sum over the sharded rows is combined inside the body; nothing moves outside
    assert collective_opcodes(body) == ["all-reduce"]
    assert collective_opcodes(module.entry) == []
    channels = [i.attrs.get("channel_id") for c in module.computations for i in c.instructions
                if i.attrs.get("channel_id") is not None]
    assert len(channels) == len(set(channels))
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)]
    expected = Evaluator().evaluate(parse_module(LOOP, "original"), list(args))
    (got,) = run_global(module, args, 4)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_propagation_gives_the_body_and_condition_the_carried_sharding():
    module = partition(LOOP, 4, "loop", passes=("sharding-propagation",))
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    carried = str(loop.sharding)
    assert carried == "{{replicated}, {devices=[4,1]<=[4]}, {replicated}}"
    assert str(loop.attrs["body"].parameters[0].sharding) == carried
    assert str(loop.attrs["body"].root.sharding) == carried
    assert str(loop.attrs["condition"].parameters[0].sharding) == carried
    tanh = next(i for i in loop.attrs["body"].instructions if i.opcode == "tanh")
    assert str(tanh.sharding) == "{devices=[4,1]<=[4]}"


CONDITIONAL = """HloModule module
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
on_true {
  a = f32[8,6] parameter(0)
  ROOT e = f32[8,6] exponential(a)
}
on_false {
  b = f32[8,6] parameter(0)
  zero = f32[] constant(0)
  rows = f32[8] reduce(b, zero), dimensions={1}, to_apply=add
  ROOT r = f32[8,6] broadcast(rows), dimensions={0}
}
ENTRY entry {
  p = pred[] parameter(0)
  x = f32[8,6] parameter(1), sharding={devices=[2,1]0,1}
  y = f32[8,6] parameter(2), sharding={devices=[1,2]0,1}
  ROOT c = f32[8,6] conditional(p, x, y), true_computation=on_true, false_computation=on_false, sharding={devices=[2,1]0,1}
}"""


def test_conditional_branches_run_on_tiles_and_match_the_unpartitioned_one():
    from hlo_common.interpreter.evaluator import Evaluator

    module = partition(CONDITIONAL, 2, "conditional")
    cond = next(i for i in module.entry.instructions if i.opcode == "conditional")
    on_true, on_false = cond.attrs["true_computation"], cond.attrs["false_computation"]
    assert str(on_true.parameters[0].shape).startswith("f32[4,6]")
    # the false branch sums rows split by columns: an all-reduce inside it, then its root is
    # cut to the row tile the conditional returns (no communication)
    assert str(on_false.parameters[0].shape).startswith("f32[8,3]")
    assert collective_opcodes(on_false) == ["all-reduce"]
    assert collective_opcodes(on_true) == [] and collective_opcodes(module.entry) == []
    rng = np.random.default_rng(5)
    for flag in (True, False):
        args = [np.asarray(flag), rng.standard_normal((8, 6)).astype(np.float32),
                rng.standard_normal((8, 6)).astype(np.float32)]
        expected = Evaluator().evaluate(parse_module(CONDITIONAL, "original"), list(args))
        (got,) = run_global(module, args, 2)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


REFINED = """HloModule module
body {
  t = (s32[], f32[8,4], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  c = f32[8,4] get-tuple-element(t), index=1
  x = f32[8,4] get-tuple-element(t), index=2
  s = f32[8,4] add(c, x)
  h = f32[8,4] tanh(s)
  ROOT out = (s32[], f32[8,4], f32[8,4]) tuple(next, h, x)
}
cond {
  t = (s32[], f32[8,4], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
ENTRY entry {
  x0 = f32[8,4] parameter(0), sharding={devices=[4,1]<=[4]}
  zero = f32[] constant(0)
  c0 = f32[8,4] broadcast(zero), dimensions={}
  z = s32[] constant(0)
  init = (s32[], f32[8,4], f32[8,4]) tuple(z, c0, x0)
  loop = (s32[], f32[8,4], f32[8,4]) while(init), condition=cond, body=body
  ROOT c = f32[8,4] get-tuple-element(loop), index=1, sharding={replicated}
}"""


def test_a_carry_split_only_by_the_body_is_refined_and_gathered_once_after_the_loop():
    from hlo_common.interpreter.evaluator import Evaluator

    module = partition(REFINED, 4, "refined")
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    # the zeros carry takes the split of the input it is added to: row tiles through the loop
    assert str(loop.shape.tuple_shapes[1]).startswith("f32[2,4]")
    assert collective_opcodes(loop.attrs["body"]) == []
    assert collective_opcodes(module.entry) == ["all-gather"]
    args = [np.random.default_rng(9).standard_normal((8, 4)).astype(np.float32)]
    expected = Evaluator().evaluate(parse_module(REFINED, "original"), list(args))
    (got,) = run_global(module, args, 4)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
