"""Executing modules inside their buffer assignment gives the interpreter's results.

`ba_memory_sim.MemoryExecutor` keeps every value only in its slice of garbage-initialized device
memory; a slot reused too early, a missing copy around a while loop, or a colocation that clobbers
a live value changes the result. Each module here stresses one such hazard.
"""

from __future__ import annotations

import pytest
from ba_memory_sim import run_and_compare

from hlo_common.hlo.parser import parse_module
from hlo_codegen.buffer_assignment import assign_buffers, check_buffer_assignment, insert_copies

ADD = "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = f32[] add(a, b)\n}\n"
COND_LT = """cond {
  p = %s parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
"""

MODULES = {
    "diamond": ADD + """ENTRY e {
      p = f32[256] parameter(0)
      a = f32[256] exponential(p)
      b = f32[256] sine(p)
      c = f32[256] add(a, b)
      d = f32[256] negate(c)
      t = f32[16,16] bitcast(d)
      u = f32[16,16] transpose(t), dimensions={1,0}
      ROOT o = (f32[16,16], f32[256]) tuple(u, a)
    }""",
    # The body reads the old counter after the new one exists: the new value needs a copy.
    "while_reads_old_state": COND_LT % "(s32[], f32[8])" + """body {
      p = (s32[], f32[8]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      x = f32[8] get-tuple-element(p), index=1
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      fi = f32[] convert(i)
      b = f32[8] broadcast(fi), dimensions={}
      x1 = f32[8] add(x, b)
      ROOT t = (s32[], f32[8]) tuple(i1, x1)
    }
    ENTRY e {
      x0 = f32[8] parameter(0)
      z = s32[] constant(0)
      w = (s32[], f32[8]) while((s32[], f32[8]) tuple(z, x0)), condition=cond, body=body
      ROOT r = f32[8] get-tuple-element(w), index=1
    }""",
    # Three state elements rotate every iteration: needs temporaries, not just copies.
    "while_rotates_state": COND_LT % "(s32[], f32[4], f32[4], f32[4])" + """body {
      p = (s32[], f32[4], f32[4], f32[4]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      a = f32[4] get-tuple-element(p), index=1
      b = f32[4] get-tuple-element(p), index=2
      c = f32[4] get-tuple-element(p), index=3
      ROOT t = (s32[], f32[4], f32[4], f32[4]) tuple(i1, b, c, a)
    }
    ENTRY e {
      x = f32[4] parameter(0)
      y = f32[4] parameter(1)
      z = s32[] constant(0)
      k = f32[4] constant({1, 2, 3, 4})
      init = (s32[], f32[4], f32[4], f32[4]) tuple(z, x, y, k)
      w = (s32[], f32[4], f32[4], f32[4]) while(init), condition=cond, body=body
      g = f32[4] get-tuple-element(w), index=1
      ROOT o = (f32[4], f32[4], f32[4]) tuple(g, x, k)
    }""",
    # The loop updates a row of its state in place with a DUS; the init is used after the loop.
    "while_dus_state": COND_LT % "(s32[], f32[5,8])" + """body {
      p = (s32[], f32[5,8]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      x = f32[5,8] get-tuple-element(p), index=1
      zero = s32[] constant(0)
      row = f32[1,8] dynamic-slice(x, i, zero), dynamic_slice_sizes={1,8}
      e = f32[1,8] exponential(row)
      x1 = f32[5,8] dynamic-update-slice(x, e, i, zero)
      one = s32[] constant(1)
      i1 = s32[] add(i, one)
      ROOT t = (s32[], f32[5,8]) tuple(i1, x1)
    }
    ENTRY e {
      x0 = f32[5,8] parameter(0)
      a = f32[5,8] negate(x0)
      z = s32[] constant(0)
      w = (s32[], f32[5,8]) while((s32[], f32[5,8]) tuple(z, a)), condition=cond, body=body
      r = f32[5,8] get-tuple-element(w), index=1
      ROOT s = f32[5,8] subtract(r, a)
    }""",
    "conditional_passes_operand_through": """b0 {
      p = f32[8] parameter(0)
      ROOT n = f32[8] negate(p)
    }
    b1 {
      ROOT p = f32[8] parameter(0)
    }
    ENTRY e {
      c = pred[] parameter(0)
      x = f32[8] parameter(1)
      k = f32[8] conditional(c, x, x), true_computation=b0, false_computation=b1
      s = f32[8] sine(k)
      ROOT o = (f32[8], f32[8]) tuple(s, x)
    }""",
    "call_and_alias": """HloModule m, input_output_alias={ {0}: (0, {}) }
    callee {
      a = f32[16] parameter(0)
      b = f32[16] parameter(1)
      m = f32[16] multiply(a, b)
      ROOT t = (f32[16], f32[16]) tuple(m, a)
    }
    ENTRY e {
      p0 = f32[16] parameter(0)
      p1 = f32[16] parameter(1)
      c = (f32[16], f32[16]) call(p0, p1), to_apply=callee
      g0 = f32[16] get-tuple-element(c), index=0
      g1 = f32[16] get-tuple-element(c), index=1
      r = f32[16] reverse(g1), dimensions={0}
      ROOT o = (f32[16], f32[16]) tuple(r, g0)
    }""",
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_runs_correctly_in_assigned_memory(name):
    module = parse_module(MODULES[name])
    insert_copies(module)
    ba = assign_buffers(module)
    assert check_buffer_assignment(ba) == []
    for seed in (0, 1):
        assert run_and_compare(module, ba, seed), f"{name} (seed {seed})"


def test_a_wrong_assignment_is_noticed():
    # Sanity check of the oracle itself: put b onto a's slot while both are live.
    module = parse_module(MODULES["diamond"])
    ba = assign_buffers(module)
    named = {v.instruction.name: v for v in ba.dataflow.values}
    a, b = named["a"], named["b"]
    alloc_a, alloc_b = ba.allocation_of[a], ba.allocation_of[b]
    del alloc_b.assigned[b]
    alloc_a.assigned[b] = alloc_a.assigned[a]
    ba.allocation_of[b] = alloc_a
    assert not run_and_compare(module, ba)
