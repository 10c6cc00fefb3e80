"""The checker accepts sound assignments and catches each kind of corruption."""

from __future__ import annotations

import pytest

from hlo_common.errors import VerificationError
from hlo_common.hlo.parser import parse_module
from hlo_codegen.buffer_assignment import (
    assign_buffers, check_buffer_assignment, insert_copies, verify_buffer_assignment)

DIAMOND = """add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[256] parameter(0)
  a = f32[256] exponential(p)
  b = f32[256] sine(p)
  c = f32[256] add(a, b)
  d = f32[256] negate(c)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(d, z), dimensions={0}, to_apply=add
}"""


def diamond():
    m = parse_module(DIAMOND)
    ba = assign_buffers(m)
    assert check_buffer_assignment(ba) == []
    named = {v.instruction.name: v for v in ba.dataflow.values}
    return m, ba, named


def move(ba, value, offset):
    alloc = ba.allocation_of[value]
    alloc.assigned[value] = (offset, alloc.assigned[value][1])


def test_sound_assignment_with_in_place_hand_offs_passes():
    _, ba, v = diamond()
    temp = ba.temp_allocation
    # c overwrites a, d overwrites c: three values, one slot, touching live ranges.
    assert temp.assigned[v["a"]][0] == temp.assigned[v["c"]][0] == temp.assigned[v["d"]][0]
    verify_buffer_assignment(ba)


def test_overlapping_live_values_are_caught():
    _, ba, v = diamond()
    move(ba, v["b"], ba.temp_allocation.assigned[v["a"]][0])  # b onto a while both are live
    problems = check_buffer_assignment(ba)
    assert any("overlap" in p and "<" in p for p in problems)
    with pytest.raises(VerificationError, match="overlap"):
        verify_buffer_assignment(ba)


def test_disjoint_lifetimes_may_share_but_live_ones_may_not():
    # b lives [2, 3] (read by c at 3) and d lives [4, 6]: d may take b's slot. a lives [1, 3]:
    # putting it on b's slot is an overlap.
    _, ba, v = diamond()
    temp = ba.temp_allocation
    move(ba, v["d"], temp.assigned[v["b"]][0])
    assert check_buffer_assignment(ba) == []  # b is dead when d is written
    move(ba, v["a"], temp.assigned[v["b"]][0])
    assert check_buffer_assignment(ba)


def test_slice_outside_allocation_is_caught():
    _, ba, v = diamond()
    ba.temp_allocation.size -= 1
    assert any("outside allocation" in p for p in check_buffer_assignment(ba))


def test_misaligned_temp_is_caught():
    _, ba, v = diamond()
    temp = ba.temp_allocation
    temp.size += 256
    move(ba, v["b"], temp.assigned[v["b"]][0] + 128)
    assert any("not 256-byte aligned" in p for p in check_buffer_assignment(ba))


def test_value_without_allocation_is_caught():
    m, ba, v = diamond()
    del ba.temp_allocation.assigned[v["b"]]
    problems = check_buffer_assignment(ba)
    assert any("in 0 allocations" in p for p in problems)
    assert any("%b[] maps to 0 slices" in p for p in problems)


def test_temp_in_read_only_parameter_allocation_is_caught():
    m, ba, v = diamond()
    param_alloc = ba.allocation_of[v["p"]]
    del ba.temp_allocation.assigned[v["b"]]
    param_alloc.assigned[v["b"]] = (0, 1024)
    ba.allocation_of[v["b"]] = param_alloc
    problems = check_buffer_assignment(ba)
    assert any("read-only allocation" in p for p in problems)
    assert any("overlap" in p for p in problems)  # p is live to the end


def test_live_out_flag_and_parameter_flags_are_checked():
    m, ba, v = diamond()
    ba.allocation_of[v["r"]].maybe_live_out = False
    ba.allocation_of[v["p"]].parameter_number = 1
    problems = check_buffer_assignment(ba)
    assert any("not flagged maybe-live-out" in p for p in problems)
    assert any("not in its parameter allocation" in p for p in problems)


def test_colocated_values_must_stay_together():
    m = parse_module("""HloModule w
    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT c = f32[] add(a, b)
    }
    cond {
      p = (s32[], f32[64]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      n = s32[] constant(4)
      ROOT lt = pred[] compare(i, n), direction=LT
    }
    body {
      p = (s32[], f32[64]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      x = f32[64] get-tuple-element(p), index=1
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      x1 = f32[64] exponential(x)
      ROOT t = (s32[], f32[64]) tuple(i1, x1)
    }
    ENTRY e {
      x0 = f32[64] parameter(0)
      z = s32[] constant(0)
      init = (s32[], f32[64]) tuple(z, x0)
      w = (s32[], f32[64]) while(init), condition=cond, body=body
      g = f32[64] get-tuple-element(w), index=1
      zf = f32[] constant(0)
      ROOT s = f32[] reduce(g, zf), dimensions={0}, to_apply=add
    }""")
    insert_copies(m)
    ba = assign_buffers(m)
    assert check_buffer_assignment(ba) == []
    x1 = next(v for v in ba.dataflow.values if v.instruction.name == "x1")
    alloc = ba.allocation_of[x1]
    alloc.size += 512
    alloc.assigned[x1] = (alloc.size - 256, 256)
    assert any("colocated values" in p for p in check_buffer_assignment(ba))
