"""Hand-written modules whose allocations were worked out by hand from XLA's rules.

Each test states the reasoning next to the expectation: value ids follow XLA's post order (DFS from
the root, first operand first; embedded computations first), buffers are visited largest first,
live-out first on ties, then by post-order position.
"""

from __future__ import annotations

import pytest

from hlo_common.errors import HloError
from hlo_common.hlo.parser import parse_module
from hlo_codegen.buffer_assignment import assign_buffers, check_buffer_assignment, insert_copies

REDUCE_ADD = "add {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n"


def assign(text: str, copies: bool = False):
    module = parse_module(text)
    if copies:
        insert_copies(module)
    ba = assign_buffers(module)
    assert check_buffer_assignment(ba) == []
    return module, ba


def instr(module, name, comp=None):
    comps = [module.computation(comp)] if comp else module.computations
    return next(i for c in comps for i in c.instructions if i.name == name)


def test_elementwise_chain_reuses_one_temp_slot():
    # ids: add's x, y, s = 0..2; entry DFS from r: p=3, a=4, b=5, c=6, d=7, z=8, r=9.
    # p (1 KiB) comes first: parameter 0. a..d wait for the heap. r and z are 4 bytes, r is live
    # out: allocation 1; z: constant allocation 2. In the heap each of b, c, d may overwrite its
    # dying elementwise operand, so all four share offset 0 of one 1 KiB temp allocation.
    _, ba = assign(REDUCE_ADD + """ENTRY e {
      p = f32[256] parameter(0)
      a = f32[256] exponential(p)
      b = f32[256] negate(a)
      c = f32[256] sine(b)
      d = f32[256] cosine(c)
      z = f32[] constant(0)
      ROOT r = f32[] reduce(d, z), dimensions={0}, to_apply=add
    }""")
    assert ba.to_string() == """BufferAssignment:
allocation 0: size 1024, parameter 0, shape |f32[256]| at ShapeIndex {}:
 value: <3 p @0> (size=1024,offset=0): f32[256]{0}
allocation 1: size 4, output shape is |f32[]|, maybe-live-out:
 value: <9 r @0> (size=4,offset=0): f32[]
allocation 2: size 4, constant:
 value: <8 z @0> (size=4,offset=0): f32[]
allocation 3: size 1024, preallocated-temp:
 value: <4 a @0> (size=1024,offset=0): f32[256]{0}
 value: <5 b @0> (size=1024,offset=0): f32[256]{0}
 value: <6 c @0> (size=1024,offset=0): f32[256]{0}
 value: <7 d @0> (size=1024,offset=0): f32[256]{0}
"""


def test_temps_live_together_get_disjoint_slots():
    # a and b are both live when c = add(a, b) runs: two 1 KiB slots; c overwrites a (its first
    # operand dies there and add is elementwise).
    m, ba = assign(REDUCE_ADD + """ENTRY e {
      p = f32[256] parameter(0)
      a = f32[256] exponential(p)
      b = f32[256] sine(p)
      c = f32[256] add(a, b)
      z = f32[] constant(0)
      ROOT r = f32[] reduce(c, z), dimensions={0}, to_apply=add
    }""")
    temp = ba.temp_allocation
    assert temp.size == 2048
    sa, sb, sc = (ba.get_slice(instr(m, n)) for n in "abc")
    assert sa == sc and {sa.offset, sb.offset} == {0, 1024} and sa.index == sb.index == temp.index


def test_while_state_is_colocated():
    m = parse_module("""HloModule w
    cond {
      p = (s32[], f32[64]) parameter(0)
      i = s32[] get-tuple-element(p), index=0
      n = s32[] constant(10)
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
      ROOT r = f32[64] get-tuple-element(w), index=1
    }""")
    with pytest.raises(HloError, match="copy insertion"):
        assign_buffers(m)  # the loop would write into constant z
    # z (a constant) and x0 (an entry parameter) are read-only: both init leaves get copies. The
    # body needs none: i1 and x1 overwrite the state they read, elementwise, as its last readers.
    assert insert_copies(m) == 2
    ba = assign_buffers(m)
    assert check_buffer_assignment(ba) == []
    w = instr(m, "w")
    state = ba.get_slice(w, (1,))
    for name, comp, index in [("init", None, (1,)), ("p", "body", (1,)), ("x", "body", ()),
                              ("x1", "body", ()), ("t", "body", (1,)), ("p", "cond", (1,)), ("r", None, ())]:
        target = instr(m, name, comp) if comp else (w.operands[0] if name == "init" else instr(m, name))
        assert ba.get_slice(target, index) == state, name
    assert ba.get_slice(w, (0,)) == ba.get_slice(instr(m, "i1", "body"))
    assert ba.get_slice(w, (0,)) != state
    assert ba.allocation(state.index).maybe_live_out  # r is the output
    assert ba.get_slice(instr(m, "x0")) != state


DUS = """ENTRY e {
  p0 = f32[16,128] parameter(0)
  p1 = f32[1,128] parameter(1)
  i = s32[] parameter(2)
  z = s32[] constant(0)
  a = f32[16,128] exponential(p0)
  d = f32[16,128] dynamic-update-slice(%s, p1, i, z)
  %s
}"""


def test_dus_updates_a_dying_operand_in_place():
    m, ba = assign(DUS % ("a", "ROOT r = f32[16,128] negate(d)"))
    assert ba.shares_slice(instr(m, "d"), (), instr(m, "a"), ())


def test_dus_does_not_clobber_an_operand_used_later():
    text = DUS % ("a", "n = f32[16,128] negate(d)\n  ROOT t = (f32[16,128], f32[16,128]) tuple(n, a)")
    m, ba = assign(text)
    assert not ba.shares_slice(instr(m, "d"), (), instr(m, "a"), ())
    m, ba = assign(text, copies=True)  # copy insertion gives the DUS its own copy of a to update
    d = instr(m, "d")
    assert d.operands[0].opcode == "copy" and ba.shares_slice(d, (), d.operands[0], ())


def test_dus_never_writes_into_a_parameter():
    m, ba = assign(DUS % ("p0", "ROOT r = f32[16,128] negate(d)"))
    assert ba.get_slice(instr(m, "d")).index != ba.get_slice(instr(m, "p0")).index


def test_input_output_alias_shares_the_parameter_allocation():
    # {p0, s} is one live-out buffer visited first (1 KiB each, live out first): allocation 0.
    m, ba = assign("""HloModule io, input_output_alias={ {}: (0, {}, may-alias) }
    ENTRY e {
      p0 = f32[256] parameter(0)
      p1 = f32[256] parameter(1)
      ROOT s = f32[256] add(p0, p1)
    }""")
    assert ba.to_string().splitlines()[1:4] == [
        "allocation 0: size 1024, parameter 0, shape |f32[256]| at ShapeIndex {}, output shape is |f32[256]|,"
        " maybe-live-out:",
        " value: <0 p0 @0> (size=1024,offset=0): f32[256]{0}",
        " value: <2 s @0> (size=1024,offset=0): f32[256]{0}"]
    assert ba.allocation(0).parameter_has_alias and not ba.allocation(0).is_readonly


def test_input_output_alias_copies_a_result_that_reads_the_parameter_too_long():
    # reverse reads p0 while writing s: s cannot live in p0's buffer, its copy can.
    m = parse_module("""HloModule io, input_output_alias={ {}: (0, {}) }
    ENTRY e {
      p0 = f32[256] parameter(0)
      ROOT s = f32[256] reverse(p0), dimensions={0}
    }""")
    assert insert_copies(m) == 1
    ba = assign_buffers(m)
    root = m.entry.root
    assert root.opcode == "copy" and ba.shares_slice(root, (), instr(m, "p0"), ())
    assert not ba.shares_slice(instr(m, "s"), (), instr(m, "p0"), ())


def test_conditional_branch_roots_share_the_result():
    m, ba = assign("""HloModule c
    b0 {
      p = f32[64] parameter(0)
      ROOT n = f32[64] negate(p)
    }
    b1 {
      p = f32[64] parameter(0)
      ROOT e = f32[64] exponential(p)
    }
    ENTRY e {
      c = pred[] parameter(0)
      x = f32[64] parameter(1)
      k = f32[64] conditional(c, x, x), true_computation=b0, false_computation=b1
      ROOT r = f32[64] sine(k)
    }""")
    k = ba.get_slice(instr(m, "k"))
    assert ba.get_slice(instr(m, "n", "b0")) == k == ba.get_slice(instr(m, "e", "b1"))


def test_forwarding_positions_and_tuple_outputs():
    m, ba = assign("""ENTRY e {
      p = f32[8] parameter(0)
      n = f32[8] negate(p)
      t = (f32[8], f32[8]) tuple(n, p)
      g = f32[8] get-tuple-element(t), index=0
      b = f32[2,4] bitcast(g)
      ROOT o = (f32[2,4], f32[8]) tuple(b, p)
    }""")
    sn = ba.get_slice(instr(m, "n"))
    assert ba.get_slice(instr(m, "t"), (0,)) == ba.get_slice(instr(m, "g")) == sn
    assert ba.get_slice(instr(m, "b")) == ba.get_slice(instr(m, "o"), (0,)) == sn
    param_alloc = ba.allocation(ba.get_slice(instr(m, "o"), (1,)).index)
    assert param_alloc.is_entry_computation_parameter and param_alloc.maybe_live_out
    assert not ba.has_slice(instr(m, "t"), ())  # tuples are not device buffers here


def test_embedded_computations_get_no_buffers():
    # ids: the fused computation's a=0, e=1 count, so the entry's p=2, f=3 (as in XLA's dumps).
    m, ba = assign("""fused {
      a = f32[8] parameter(0)
      ROOT e = f32[8] exponential(a)
    }
    ENTRY e {
      p = f32[8] parameter(0)
      ROOT f = f32[8] fusion(p), kind=kLoop, calls=fused
    }""")
    assert sorted(v.short_string() for v in ba.dataflow.values) == ["<2 p @0>", "<3 f @0>"]
    with pytest.raises(HloError, match="no slice for %e"):
        ba.get_slice(instr(m, "e", "fused"))


def test_custom_call_output_to_operand_aliasing():
    text = """ENTRY e {
      p = f32[8] parameter(0)
      x = f32[8] exponential(p)
      ROOT cc = f32[8] custom-call(%s), custom_call_target="foo", output_to_operand_aliasing={{}: (0, {})}
    }"""
    m, ba = assign(text % "x")
    assert ba.shares_slice(instr(m, "cc"), (), instr(m, "x"), ())
    m = parse_module(text % "p")
    with pytest.raises(HloError, match="copy insertion"):
        assign_buffers(m)  # the call would overwrite the caller's parameter
    assert insert_copies(m) == 1
    ba = assign_buffers(m)
    cc = m.entry.root
    assert cc.operands[0].opcode == "copy" and ba.shares_slice(cc, (), cc.operands[0], ())
    assert not ba.shares_slice(cc, (), instr(m, "p"), ())


def test_schedule_is_text_order_when_scheduled():
    m, ba = assign("""HloModule s, is_scheduled=true
    ENTRY e {
      p = f32[8] parameter(0)
      b = f32[8] sine(p)
      a = f32[8] exponential(p)
      ROOT c = f32[8] add(a, b)
    }""")
    assert [i.name for i in ba.live_range.flattened] == ["p", "b", "a", "c"]


def test_bad_input_output_alias_raises_hlo_error():
    m = parse_module("""HloModule io, input_output_alias={ {}: (3, {}) }
    ENTRY e {
      p0 = f32[4] parameter(0)
      ROOT n = f32[4] negate(p0)
    }""")
    with pytest.raises(HloError, match="parameter 3"):
        assign_buffers(m)
    m.set_header_attr("input_output_alias", "{ {}: 0 }")
    with pytest.raises(HloError, match="malformed input_output_alias"):
        assign_buffers(m)


def test_assignment_is_deterministic():
    text = REDUCE_ADD + """ENTRY e {
      p = f32[64,64] parameter(0)
      a = f32[64,64] exponential(p)
      b = f32[64,64] transpose(a), dimensions={1,0}
      c = f32[64,64] add(a, b)
      z = f32[] constant(0)
      r = f32[64] reduce(c, z), dimensions={1}, to_apply=add
      ROOT o = (f32[64], f32[64,64]) tuple(r, b)
    }"""
    assert assign(text)[1].to_string() == assign(text)[1].to_string()


def test_fusion_with_dus_root_updates_its_operand_in_place():
    # The fused DUS writes into fused parameter 0; the operand a dies at the fusion: one slice.
    m, ba = assign("""fused {
      buf = f32[8,16] parameter(0)
      upd = f32[1,16] parameter(1)
      i = s32[] parameter(2)
      z = s32[] constant(0)
      ROOT d = f32[8,16] dynamic-update-slice(buf, upd, i, z)
    }
    ENTRY e {
      p = f32[8,16] parameter(0)
      u = f32[1,16] parameter(1)
      i = s32[] parameter(2)
      a = f32[8,16] exponential(p)
      f = f32[8,16] fusion(a, u, i), kind=kLoop, calls=fused
      ROOT r = f32[8,16] negate(f)
    }""")
    assert ba.shares_slice(instr(m, "f"), (), instr(m, "a"), ())


def test_scatter_updates_a_dying_operand_in_place():
    m, ba = assign("""add {
      x = f32[] parameter(0)
      y = f32[] parameter(1)
      ROOT s = f32[] add(x, y)
    }
    ENTRY e {
      p = f32[8,4] parameter(0)
      idx = s32[2,1] parameter(1)
      upd = f32[2,4] parameter(2)
      a = f32[8,4] exponential(p)
      sc = f32[8,4] scatter(a, idx, upd), update_window_dims={1}, inserted_window_dims={0},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
      ROOT r = f32[8,4] negate(sc)
    }""")
    assert ba.shares_slice(instr(m, "sc"), (), instr(m, "a"), ())


def test_opt_barrier_forwards_its_operand():
    m, ba = assign("""ENTRY e {
      p = f32[8] parameter(0)
      n = f32[8] negate(p)
      t = (f32[8], f32[8]) tuple(n, p)
      o = (f32[8], f32[8]) opt-barrier(t)
      g = f32[8] get-tuple-element(o), index=0
      ROOT s = f32[8] sine(g)
    }""")
    assert ba.get_slice(instr(m, "o"), (0,)) == ba.get_slice(instr(m, "g")) == ba.get_slice(instr(m, "n"))
    assert ba.get_slice(instr(m, "o"), (1,)) == ba.get_slice(instr(m, "p"))
