"""The collective passes after fusion (issue 17 item 5): all-gather, all-reduce and reduce-scatter
combiners, async-collective-creator and the scheduler's placement of starts and dones. Cases after
XLA's all_reduce_combiner_test.cc, all_gather_combiner_test.cc, reduce_scatter_combiner_test.cc and
async_collective_creator_test.cc; every rewritten module gives, on 2 interpreter devices, what the
original gives."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.interpreter.devices import run_devices
from hlo_opt.passes.all_gather_combiner import AllGatherCombiner
from hlo_opt.passes.all_reduce_combiner import AllReduceCombiner
from hlo_opt.passes.async_collective_creator import AsyncCollectiveCreator
from hlo_opt.passes.reduce_scatter_combiner import ReduceScatterCombiner
from hlo_opt.passes.scheduler import HloMemoryScheduler

REGIONS = """add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
add2 { x = f32[] parameter(0) y = f32[] parameter(1) ROOT z = f32[] add(x, y) }
mx { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] maximum(a, b) }
"""
G = "channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true"


def module(body: str, params: str = "p = f32[8,4] parameter(0)\n  q = f32[16] parameter(1)"):
    return parse_module(f"HloModule m, num_partitions=2\n{REGIONS}ENTRY e {{\n  {params}\n  {body}\n}}\n")


def opcodes(m) -> list[str]:
    return sorted(i.opcode for i in m.entry.instructions if i.opcode not in ("parameter", "constant"))


def same_on_two_devices(before: str, after) -> None:
    rng = np.random.default_rng(0)
    original = parse_module(before)
    args = [[rng.standard_normal(p.shape.dims).astype(np.float32) for p in original.entry.parameters]
            for _ in range(2)]
    want = run_devices(original, args, 1, 2)
    got = run_devices(after, args, 1, 2)
    for w, g in zip(want, got):
        for a, b in zip(w if isinstance(w, tuple) else (w,), g if isinstance(g, tuple) else (g,)):
            np.testing.assert_allclose(b, a, rtol=1e-6)


def test_independent_all_reduces_become_one_of_a_tuple():
    m = module(f"a = f32[8,4] all-reduce(p), {G}, to_apply=add\n"
               f"  b = f32[16] all-reduce(q), {G.replace('id=1', 'id=2')}, to_apply=add2\n"
               "  ROOT t = (f32[8,4], f32[16]) tuple(a, b)")
    before = print_module(m)
    assert AllReduceCombiner().run(m)
    (ar,) = [i for i in m.entry.instructions if i.opcode == "all-reduce"]
    assert ar.shape.to_string() == "(f32[8,4]{1,0}, f32[16]{0})" and len(ar.operands) == 2
    assert opcodes(m) == ["all-reduce", "get-tuple-element", "get-tuple-element", "tuple"]
    same_on_two_devices(before, m)


@pytest.mark.parametrize("second, why", [
    (f"b = f32[16] all-reduce(q), {G}, to_apply=mx", "another reduction"),
    ("b = f32[16] all-reduce(q), channel_id=2, replica_groups={{0},{1}}, use_global_device_ids=true, "
     "to_apply=add", "other groups"),
    ("b = f32[16] all-reduce(q), replica_groups={}, to_apply=add", "no channel: cross-replica"),
])
def test_unlike_all_reduces_stay_apart(second, why):
    m = module(f"a = f32[8,4] all-reduce(p), {G}, to_apply=add\n  {second}\n"
               "  ROOT t = (f32[8,4], f32[16]) tuple(a, b)")
    assert not AllReduceCombiner().run(m), why


def test_an_all_reduce_of_another_all_reduce_is_not_combined_with_it():
    m = module(f"a = f32[16] all-reduce(q), {G}, to_apply=add\n"
               "  n = f32[16] negate(a)\n"
               f"  b = f32[16] all-reduce(n), {G}, to_apply=add\n"
               f"  c = f32[16] all-reduce(q), {G}, to_apply=add\n"
               "  ROOT t = (f32[16], f32[16], f32[16]) tuple(a, b, c)")
    before = print_module(m)
    assert AllReduceCombiner().run(m)
    # a and c are independent and combine; b reads a and stays alone
    shapes = sorted(i.shape.to_string() for i in m.entry.instructions if i.opcode == "all-reduce")
    assert shapes == ["(f32[16]{0}, f32[16]{0})", "f32[16]{0}"]
    same_on_two_devices(before, m)


def test_the_byte_threshold_closes_a_group():
    body = "\n  ".join(f"a{k} = f32[16] all-reduce(q), {G}, to_apply=add" for k in range(5))
    m = module(body + "\n  ROOT t = (f32[16], f32[16], f32[16], f32[16], f32[16]) tuple(a0, a1, a2, a3, a4)")
    assert AllReduceCombiner(threshold_bytes=2 * 64).run(m)  # two 64-byte operands per group
    sizes = sorted(len(i.operands) for i in m.entry.instructions if i.opcode == "all-reduce")
    assert sizes == [1, 2, 2]


def test_all_gathers_combine_by_dimension_and_reduce_scatters_by_reducer():
    m = module(f"a = f32[16,4] all-gather(p), {G}, dimensions={{0}}\n"
               f"  b = f32[32] all-gather(q), {G}, dimensions={{0}}\n"
               f"  c = f32[8,8] all-gather(p), {G}, dimensions={{1}}\n"
               f"  r = f32[4,4] reduce-scatter(p), {G}, dimensions={{0}}, to_apply=add\n"
               f"  s = f32[8] reduce-scatter(q), {G}, dimensions={{0}}, to_apply=add2\n"
               "  ROOT t = (f32[16,4], f32[32], f32[8,8], f32[4,4], f32[8]) tuple(a, b, c, r, s)")
    before = print_module(m)
    assert AllGatherCombiner().run(m) and ReduceScatterCombiner().run(m)
    gathers = sorted(len(i.operands) for i in m.entry.instructions if i.opcode == "all-gather")
    scatters = [len(i.operands) for i in m.entry.instructions if i.opcode == "reduce-scatter"]
    assert gathers == [1, 2] and scatters == [2]  # the gather along dim 1 stays alone
    same_on_two_devices(before, m)


def test_async_pairs_have_xlas_shapes():
    m = module(f"a = f32[8,4] all-reduce(p), {G}, to_apply=add\n"
               f"  g = f32[32] all-gather(q), {G.replace('id=1', 'id=2')}, dimensions={{0}}\n"
               "  c = f32[16] collective-permute(q), channel_id=3, source_target_pairs={{0,1},{1,0}}\n"
               "  ROOT t = (f32[8,4], f32[32], f32[16]) tuple(a, g, c)")
    before = print_module(m)
    assert AsyncCollectiveCreator().run(m)
    starts = {i.opcode: i.shape.to_string() for i in m.entry.instructions if i.opcode.endswith("-start")}
    assert starts == {"all-reduce-start": "f32[8,4]{1,0}", "all-gather-start": "(f32[16]{0}, f32[32]{0})",
                      "collective-permute-start": "(f32[16]{0}, f32[16]{0})"}
    dones = {i.opcode: i.shape.to_string() for i in m.entry.instructions if i.opcode.endswith("-done")}
    assert dones == {"all-reduce-done": "f32[8,4]{1,0}", "all-gather-done": "f32[32]{0}",
                     "collective-permute-done": "f32[16]{0}"}
    same_on_two_devices(before, m)


def test_a_combined_all_gather_start_holds_operands_then_results():
    m = module(f"a = f32[16,4] all-gather(p), {G}, dimensions={{0}}\n"
               f"  b = f32[32] all-gather(q), {G}, dimensions={{0}}\n"
               "  ROOT t = (f32[16,4], f32[32]) tuple(a, b)")
    before = print_module(m)
    assert AllGatherCombiner().run(m) and AsyncCollectiveCreator().run(m)
    (start,) = [i for i in m.entry.instructions if i.opcode == "all-gather-start"]
    assert start.shape.to_string() == "((f32[8,4]{1,0}, f32[16]{0}), (f32[16,4]{1,0}, f32[32]{0}))"
    same_on_two_devices(before, m)


def test_the_scheduler_starts_early_and_waits_late():
    m = module(f"e = f32[16] exponential(q)\n"
               "  x = f32[8,4] negate(p)\n"
               "  y = f32[8,4] multiply(x, x)\n"
               f"  a = f32[16] all-reduce(e), {G}, to_apply=add\n"
               "  ROOT t = (f32[16], f32[8,4]) tuple(a, y)")
    assert AsyncCollectiveCreator().run(m) and HloMemoryScheduler().run(m)
    order = [i.opcode for i in m.entry.instructions if i.opcode not in ("parameter",)]
    # the all-reduce starts right after the exponential it reads and is waited for only by the root,
    # so the negate and the multiply run while it is under way
    assert order.index("all-reduce-start") == order.index("exponential") + 1
    assert order.index("all-reduce-done") == order.index("tuple") - 1
    assert order.index("all-reduce-start") < order.index("multiply") < order.index("all-reduce-done")
    again = [i.name for i in m.entry.instructions]
    HloMemoryScheduler().run(m)
    assert [i.name for i in m.entry.instructions] == again  # rescheduling changes nothing


def test_collectives_among_one_device_are_their_operand():
    from hlo_opt.passes.all_reduce_simplifier import AllReduceSimplifier

    m = module("a = f32[8,4] all-reduce(p), channel_id=1, replica_groups={{0},{1}}, use_global_device_ids=true, "
               "to_apply=add\n"
               "  g = f32[16] all-gather(q), channel_id=2, replica_groups={{0},{1}}, use_global_device_ids=true, "
               "dimensions={0}\n"
               f"  k = f32[16] all-reduce(q), {G}, to_apply=add\n"
               "  ROOT t = (f32[8,4], f32[16], f32[16]) tuple(a, g, k)")
    before = print_module(m)
    assert AllReduceSimplifier().run(m)
    # the two over groups of one go; the one over both devices stays
    assert opcodes(m) == ["all-reduce", "tuple"]
    same_on_two_devices(before, m)


def test_groups_that_depend_on_each_other_crosswise_are_not_both_combined():
    """a1 and a2 (sum) are independent, and so are b1 and b2 (max); but b2 reads a1 and a2 reads
    b1, so combining both pairs would close a cycle (the verifier checks there is none)."""
    from hlo_common.hlo_pass.pipeline import verify

    m = module(f"a1 = f32[16] all-reduce(q), {G}, to_apply=add\n"
               f"  b1 = f32[16] all-reduce(q), {G}, to_apply=mx\n"
               "  x = f32[16] negate(a1)\n"
               "  y = f32[16] negate(b1)\n"
               f"  b2 = f32[16] all-reduce(x), {G}, to_apply=mx\n"
               f"  a2 = f32[16] all-reduce(y), {G}, to_apply=add\n"
               "  ROOT t = (f32[16], f32[16]) tuple(a2, b2)")
    before = print_module(m)
    assert AllReduceCombiner().run(m)
    verify(m, "after combining")
    assert sorted(len(i.operands) for i in m.entry.instructions if i.opcode == "all-reduce") == [1, 1, 2]
    same_on_two_devices(before, m)
