"""The interpreter on several devices (hlo_common.interpreter.devices): XLA's group modes, each
collective against XLA:CPU on as many host devices, failures that stop every device."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.errors import HloError, InterpreterError
from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter.devices import run_devices

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT c = f32[] add(a, b) }\n"
MAX = "mx { a = f32[] parameter(0) b = f32[] parameter(1) ROOT c = f32[] maximum(a, b) }\n"
MUL = "mul { a = f32[] parameter(0) b = f32[] parameter(1) ROOT c = f32[] multiply(a, b) }\n"

# 2 replicas x 2 partitions; device d = replica d // 2, partition d % 2; each device's value is d.
MODES = f"""HloModule modes, replica_count=2, num_partitions=2
{ADD}
ENTRY e {{
  p = f32[1] parameter(0)
  cross_replica = f32[1] all-reduce(p), replica_groups={{}}, to_apply=add
  replica_and_partition = f32[1] all-reduce(p), channel_id=1, replica_groups={{{{0,1}}}}, to_apply=add
  flattened = f32[2] all-gather(p), channel_id=2, replica_groups={{{{3,0}},{{1,2}}}}, dimensions={{0}}, use_global_device_ids=true
  cross_partition = f32[1] collective-broadcast(p), channel_id=3, replica_groups={{{{1,0}}}}
  permute_replicas = f32[1] collective-permute(p), source_target_pairs={{{{0,1}}}}
  permute_partitions = f32[1] collective-permute(p), channel_id=4, source_target_pairs={{{{1,0}}}}
  r = u32[] replica-id()
  q = u32[] partition-id()
  ROOT t = (f32[1], f32[1], f32[2], f32[1], f32[1], f32[1], u32[], u32[]) tuple(cross_replica, replica_and_partition, flattened, cross_partition, permute_replicas, permute_partitions, r, q)
}}
"""


def test_group_modes_name_replicas_partitions_or_flattened_ids_as_xla_defines_them():
    """Expected values worked out by hand from xla/service/collective_ops_utils.cc's
    GetParticipatingDevices for each mode."""
    out = run_devices(parse_module(MODES), [[np.array([d], np.float32)] for d in range(4)], 2, 2)
    got = [[np.asarray(v).tolist() for v in res] for res in out]
    # cross-replica: devices of one partition (0+2, 1+3); replica-and-partition: all four;
    # flattened ids: groups {3,0} and {1,2} in that order; cross-partition: partition 1 of the
    # same replica broadcasts; permute over replicas 0->1 and over partitions 1->0 (zeros elsewhere)
    assert got == [
        [[2.0], [6.0], [3.0, 0.0], [1.0], [0.0], [1.0], 0, 0],
        [[4.0], [6.0], [1.0, 2.0], [1.0], [0.0], [0.0], 0, 1],
        [[2.0], [6.0], [1.0, 2.0], [3.0], [0.0], [3.0], 1, 0],
        [[4.0], [6.0], [3.0, 0.0], [3.0], [1.0], [0.0], 1, 1],
    ]


EVERY_OP = f"""HloModule every_op, replica_count=4
{ADD}{MAX}{MUL}
addi {{ a = s32[] parameter(0) b = s32[] parameter(1) ROOT c = s32[] add(a, b) }}
ENTRY e {{
  p = f32[4,2] parameter(0)
  s = s32[4] parameter(1)
  si = s32[4] all-reduce(s), replica_groups={{{{0,1}},{{2,3}}}}, to_apply=addi
  ar = (f32[4,2], f32[4,2]) all-reduce(p, p), replica_groups={{{{0,1,2,3}}}}, to_apply=add
  mx = f32[4,2] all-reduce(p), replica_groups={{{{0,2}},{{1,3}}}}, to_apply=mx
  ml = f32[4,2] all-reduce(p), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=mul
  ag = f32[4,4] all-gather(p), replica_groups={{{{1,0}},{{3,2}}}}, dimensions={{1}}
  rs = f32[1,2] reduce-scatter(p), replica_groups={{}}, dimensions={{0}}, to_apply=add
  a2a = f32[4,2] all-to-all(p), replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}
  cp = f32[4,2] collective-permute(p), source_target_pairs={{{{0,3}},{{3,2}},{{2,1}},{{1,0}}}}
  ars = f32[4,2] all-reduce-start(p), replica_groups={{{{0,3}},{{1,2}}}}, to_apply=add
  ard = f32[4,2] all-reduce-done(ars)
  ags = (f32[4,2], f32[8,2]) all-gather-start(p), replica_groups={{{{0,1}},{{2,3}}}}, dimensions={{0}}
  agd = f32[8,2] all-gather-done(ags)
  cps = (f32[4,2], f32[4,2], u32[], u32[]) collective-permute-start(p), source_target_pairs={{{{0,1}},{{1,0}}}}
  cpd = f32[4,2] collective-permute-done(cps)
  ROOT t = ((f32[4,2], f32[4,2]), s32[4], f32[4,2], f32[4,2], f32[4,4], f32[1,2], f32[4,2], f32[4,2], f32[4,2], f32[8,2], f32[4,2]) tuple(ar, si, mx, ml, ag, rs, a2a, cp, ard, agd, cpd)
}}
"""


def test_every_collective_and_its_async_form_matches_xla_cpu_on_4_replicas():
    pytest.importorskip("jax")
    from hlo_run.compare import flatten_leaves
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.xla_cpu_devices import run_on_devices

    module = parse_module(EVERY_OP)
    args = [make_fake_arguments(module, 3, device=d) for d in range(4)]
    ours = run_devices(module, args, 4, 1)
    xla = run_on_devices(EVERY_OP, args, 4, 1)
    for d in range(4):
        for a, e in zip(flatten_leaves(ours[d]), flatten_leaves(xla[d]), strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-6)


def test_a_device_that_never_reaches_the_collective_stops_the_others():
    text = f"""HloModule skip, replica_count=2
{ADD}
only {{ x = f32[] parameter(0) ROOT y = f32[] all-reduce(x), replica_groups={{}}, to_apply=add }}
none {{ x = f32[] parameter(0) ROOT y = f32[] negate(x) }}
ENTRY e {{
  p = f32[] parameter(0)
  r = u32[] replica-id()
  zero = u32[] constant(0)
  first = pred[] compare(r, zero), direction=EQ
  ROOT c = f32[] conditional(first, p, p), true_computation=only, false_computation=none
}}
"""
    with pytest.raises(InterpreterError, match=r"device 0 .*device\(s\) \[1\] of group \[0, 1\] finished"):
        run_devices(parse_module(text), [[np.float32(1)], [np.float32(2)]], 2, 1, timeout=30)


def test_a_failing_device_is_named_and_the_others_stop():
    text = f"""HloModule fail, replica_count=2
{ADD}
add2 {{ a = s32[] parameter(0) b = s32[] parameter(1) ROOT c = s32[] add(a, b) }}
ENTRY e {{
  p = s32[4] parameter(0)
  r = u32[] replica-id()
  one = u32[] constant(1)
  bad = pred[] compare(r, one), direction=EQ
  c = s32[] constant(0)
  t = s32[] constant(7)
  w = s32[4] all-reduce(p), replica_groups={{}}, to_apply=add2
  ROOT x = s32[4] add(w, w)
}}
"""
    module = parse_module(text)
    with pytest.raises(HloError, match="device 1"):
        # device 1 gets an argument of the wrong shape: it fails before the all-reduce
        run_devices(module, [[np.zeros(4, np.int32)], [np.zeros(3, np.int32)]], 2, 1, timeout=30)


def test_a_region_of_any_kind_is_applied_in_group_order():
    """all-reduce folds its region from the group's first member to its last: with the
    non-commutative region 2a + b over group {2,0,3,1} of values d, ((2*2+0)*2+3)*2+1 = 23."""
    text = """HloModule fold, replica_count=4
twice_plus { a = f32[] parameter(0) b = f32[] parameter(1) two = f32[] constant(2)
  m = f32[] multiply(a, two) ROOT s = f32[] add(m, b) }
ENTRY e {
  p = f32[] parameter(0)
  ROOT r = f32[] all-reduce(p), replica_groups={{2,0,3,1}}, to_apply=twice_plus
}
"""
    out = run_devices(parse_module(text), [[np.float32(d)] for d in range(4)], 4, 1)
    assert [float(v) for v in out] == [23.0] * 4
