"""The HLO IR and its editing helpers (hlo_common.hlo.ir, hlo_common.hlo.ir_edit)."""

from __future__ import annotations

import pytest

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo.shape import Shape

F32 = Shape.array("f32", (4,))

TEXT = """HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  n = f32[4] negate(p)
  x = f32[4] exponential(n)
  m = f32[4] multiply(x, q)
  ROOT r = f32[4] add(m, q)
}"""


def _m() -> HloModule:
    return parse_module(TEXT)


def _names(comp: HloComputation) -> list[str]:
    return [i.name for i in comp.instructions]


# -- names ------------------------------------------------------------------------------------------
def test_unique_name_follows_xla_name_uniquer():
    e = _m().entry
    assert e.unique_name("fresh") == "fresh"
    assert e.unique_name("fresh") == "fresh.1"  # handed out once, so taken
    assert e.unique_name("n") == "n.1"
    assert e.unique_name("n.1") == "n.2"  # the numeric suffix is stripped first
    assert e.unique_name("x.7") == "x.7"


def test_add_instruction_renames_a_taken_name_and_lookup_follows_renames():
    e = _m().entry
    dup = HloInstruction("n", "abs", F32, [e.instruction("p")])
    e.add_instruction(dup)
    assert dup.name == "n.1" and e.instruction("n.1") is dup
    dup.name = "renamed"
    assert e.instruction("renamed") is dup
    with pytest.raises(KeyError):
        e.instruction("n.1")
    assert e.unique_name("renamed") == "renamed.1"


def test_unique_name_is_fast_for_many_names():
    comp = HloComputation("big")
    for _ in range(20000):
        comp.add_instruction(HloInstruction(comp.unique_name("add"), "add", F32))
    assert len(set(_names(comp))) == 20000 and comp.instructions[-1].name == "add.19999"


# -- operands and users ---------------------------------------------------------------------------------
def test_users_follow_operand_edits_with_repeated_operands():
    m = parse_module("ENTRY e { p = f32[4] parameter(0) q = f32[4] parameter(1)\n"
                     "ROOT r = f32[4] multiply(p, p) }")
    p, q, r = m.entry.parameter(0), m.entry.parameter(1), m.entry.root
    assert p.users == [r]
    r.replace_operand(0, q)
    assert p.users == [r] and q.users == [r]  # p is still operand 1
    r.replace_operand(1, q)
    assert p.users == [] and q.users == [r]


def test_replace_all_uses_with_moves_users_and_root():
    e = _m().entry
    m_, q = e.instruction("m"), e.parameter(1)
    r = e.root
    m_.replace_all_uses_with(q)
    assert r.operands == [q, q] and m_.users == []
    r.replace_all_uses_with(q)
    assert e.root is q


# -- removal and replacement -------------------------------------------------------------------------
def test_remove_instruction_and_unused_operands_removes_the_dead_chain_only():
    e = _m().entry
    e.root = e.instruction("m")
    removed = e.remove_instruction_and_unused_operands(e.instruction("r"))
    assert [i.name for i in removed] == ["r"]  # q still feeds m
    e.root = e.instruction("p")
    removed = e.remove_instruction_and_unused_operands(e.instruction("m"))
    assert [i.name for i in removed] == ["m", "x", "n"]  # parameters stay
    assert _names(e) == ["p", "q"]


def test_removal_keeps_side_effects_and_refuses_live_instructions():
    m = parse_module("ENTRY e { p = f32[4] parameter(0)\n"
                     "s = f32[4] custom-call(p), custom_call_target=\"x\", custom_call_has_side_effect=true\n"
                     "n = f32[4] negate(s)\n ROOT r = f32[4] abs(p) }")
    e = m.entry
    e.remove_instruction_and_unused_operands(e.instruction("n"))
    assert "s" in _names(e)
    with pytest.raises(ValueError, match="still has users"):
        e.remove_instruction(e.parameter(0))


def test_replace_instruction_hands_over_uses_and_control_edges():
    m = parse_module("ENTRY e { p = f32[4] parameter(0) a = f32[4] negate(p)\n"
                     "b = f32[4] exponential(a), control-predecessors={a}\n"
                     "ROOT c = f32[4] abs(b), control-predecessors={b} }")
    e = m.entry
    a, b, c = (e.instruction(n) for n in "abc")
    new = HloInstruction("b2", "sqrt", F32, [a])
    e.replace_instruction(b, new)
    assert c.operands == [new] and new.parent is e
    assert new.control_predecessors == [a] and new.control_successors == [c]
    assert "b" not in _names(e) and "a" in _names(e)
    assert _names(e).index("b2") < _names(e).index("c")
    text = print_module(m)
    assert print_module(parse_module(text)) == text


# -- creation and cloning -------------------------------------------------------------------------
def test_add_new_instruction_infers_the_shape():
    e = _m().entry
    p = e.parameter(0)
    zero = e.add_new_instruction("constant", shape=Shape.array("f32", ()), literal=0.0)
    total = e.add_new_instruction("reduce", [p, zero],
                                  attrs={"dimensions": (0,), "to_apply": e.parent.computation("add")})
    assert str(total.shape) == "f32[]"  # f32[4] reduced over dimension 0
    cmp = e.add_new_instruction("compare", [p, p], attrs={"direction": "LT"}, name="lt")
    assert str(cmp.shape) == "pred[4]{0}" and cmp.name == "lt"
    assert e.add_new_instruction("negate", [p]).name == "negate"
    assert e.add_new_instruction("negate", [p]).name == "negate.1"


def test_create_rejects_unknown_opcodes():
    with pytest.raises(ValueError, match="unknown opcode 'addd'"):
        HloInstruction.create("addd", [], F32)


def test_clone_copies_attributes_but_not_graph_position():
    m = parse_module('ENTRY e { p = f32[4] parameter(0), sharding={replicated}\n'
                     'ROOT t = f32[4] transpose(p), dimensions={0}, metadata={op_name="x"}, '
                     'backend_config={"k":{"v":1}}, frontend_attributes={a="b"} }')
    t = m.entry.root
    twin = t.clone()
    assert twin.name == "t.clone" and twin.parent is None and twin.operands == t.operands
    assert twin.attrs == t.attrs and twin.metadata == t.metadata
    assert twin.frontend_attributes == t.frontend_attributes
    assert twin.backend_config_data == t.backend_config_data
    twin.backend_config_data["k"]["v"] = 2
    assert t.backend_config_data == {"k": {"v": 1}}  # a deep copy
    other = twin.clone_with_new_operands([m.entry.parameter(0)], shape=Shape.array("f32", (4,)))
    assert other.name == "t.clone.clone" and other.opcode == "transpose"


def test_clone_computation_is_deep_and_keeps_order_and_control_edges():
    m = parse_module("ENTRY e { p = f32[4] parameter(0) a = f32[4] negate(p)\n"
                     "ROOT b = f32[4] abs(p), control-predecessors={a} }")
    e = m.entry
    copy = e.clone()
    assert copy.name == "e.clone" and _names(copy) == _names(e)
    assert all(x is not y for x, y in zip(copy.instructions, e.instructions))
    assert copy.root.name == "b" and copy.root.operands[0] is copy.parameter(0)
    assert copy.root.control_predecessors == [copy.instruction("a")]
    m.add_computation(copy)
    text = print_module(m)
    assert print_module(parse_module(text)) == text


def test_module_computation_helpers():
    m = _m()
    extra = HloComputation("add")
    m.add_computation(extra)
    assert extra.name == "add.1"
    with pytest.raises(ValueError, match="cannot remove the entry"):
        m.remove_computation(m.entry)
    add = m.computation("add")
    call = m.entry.add_new_instruction("call", [m.entry.parameter(0), m.entry.parameter(1)],
                                       shape=F32, attrs={"to_apply": add})
    with pytest.raises(ValueError, match="still called"):
        m.remove_computation(add)
    m.entry.remove_instruction(call)
    m.remove_computation(add)
    assert [c.name for c in m.computations] == ["e", "add.1"]


# -- orders -------------------------------------------------------------------------------------------
def test_post_order_puts_operands_first_and_keeps_a_valid_order():
    e = _m().entry
    assert [i.name for i in e.post_order()] == _names(e)
    e.instructions.reverse()  # an invalid order: users first
    order = [i.name for i in e.post_order()]
    for instr in e.instructions:
        for op in instr.operands:
            assert order.index(op.name) < order.index(instr.name)
    assert order == [i.name for i in e.post_order()]  # deterministic


def test_computation_post_order_is_callees_first_entry_last():
    m = parse_module("""c2 { p = f32[] parameter(0) ROOT n = f32[] negate(p) }
c1 { p = f32[] parameter(0) ROOT c = f32[] call(p), to_apply=c2 }
unused { ROOT z = f32[] constant(0) }
ENTRY e { p = f32[] parameter(0) ROOT c = f32[] call(p), to_apply=c1 }""")
    m.computations.reverse()
    assert [c.name for c in m.computation_post_order()] == ["unused", "c2", "c1", "e"]
