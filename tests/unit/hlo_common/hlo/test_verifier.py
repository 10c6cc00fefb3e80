"""The HLO verifier: one broken invariant per test, each checking that the error names the
computation and instruction and says what was found and what was expected."""

from __future__ import annotations

import pytest

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.errors import VerificationError
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.verifier import verify_computation, verify_module

ADD = "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n"
GOOD = ADD + """ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] parameter(1)
  n = f32[4] negate(p)
  ROOT r = f32[] reduce(n, z), dimensions={0}, to_apply=add
}"""


def module(text: str = GOOD):
    return parse_module(text)


def instr(m, name: str, comp: str = "e") -> HloInstruction:
    return next(i for i in m.computation(comp).instructions if i.name == name)


def expect_error(m, computation: str | None, instruction: str | None, *fragments: str, **opts) -> str:
    with pytest.raises(VerificationError) as info:
        verify_module(m, **opts)
    err = info.value
    assert (err.computation, err.instruction) == (computation, instruction), str(err)
    text = str(err)
    assert "expected" in text, text  # and what was found: the fragments below hold the found values
    for f in fragments:
        assert f in text, text
    return text


def test_good_module_verifies() -> None:
    verify_module(module())
    verify_computation(module().entry)
    m = module()
    m.entry.parent = None  # a computation on its own: its callees cannot be checked against a module
    verify_computation(m.entry)


# -- shapes and operand counts ---------------------------------------------------------------------
def test_declared_shape_incompatible_with_inferred() -> None:
    m = module("ENTRY e { p = f32[4] parameter(0)  ROOT r = f32[5] negate(p) }")
    expect_error(m, "e", "r", "found f32[5], expected f32[4]")


def test_declared_element_type_must_match() -> None:
    m = module("ENTRY e { p = f32[4] parameter(0)  ROOT r = s32[4] negate(p) }")
    expect_error(m, "e", "r", "found s32[4], expected f32[4]")


def test_layouts_are_ignored_when_comparing_shapes() -> None:
    verify_module(module("ENTRY e { p = f32[2,3]{0,1} parameter(0)  ROOT r = f32[2,3]{1,0} negate(p) }"))


def test_wrong_operand_count() -> None:
    m = module("ENTRY e { p = f32[4] parameter(0)  ROOT r = f32[4] negate(p) }")
    m.entry.root.append_operand(m.entry.parameters[0])  # a pass that left an extra operand behind
    expect_error(m, "e", "r", "found 2 operands, expected 1 for negate")


def test_mixed_precision_needs_permission() -> None:
    text = "ENTRY e { a = f32[4] parameter(0)  b = bf16[4] parameter(1)  ROOT r = f32[4] add(a, b) }"
    expect_error(module(text), "e", "r", "f32 and bf16")
    verify_module(module(text), allow_mixed_precision=True)


def test_bad_layout() -> None:
    m = module()
    p = instr(m, "p")
    p.shape = p.shape.with_layout((0, 0))
    expect_error(m, "e", "p", "found layout {0,0} on f32[4], expected a permutation")


# -- attributes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("root, fragment", [
    ("f32[2,3] transpose(p), dimensions={1,1}", "expected a permutation of 0..1"),
    ("f32[3] reduce(p, z), dimensions={2}, to_apply=add", "expected dimensions in [0, 2)"),
    ("f32[3] reduce(p, z), dimensions={0,0}, to_apply=add", "repeats a dimension"),
    ("f32[2,3] slice(p), slice={[0:2], [1:4]}", "out of bounds"),
    ("pred[3,2] compare(p, p), direction=LESS", "unknown compare direction 'LESS'"),
])
def test_bad_attributes(root: str, fragment: str) -> None:
    m = module(ADD + f"ENTRY e {{ p = f32[3,2] parameter(0)  z = f32[] parameter(1)  ROOT r = {root} }}")
    expect_error(m, "e", "r", fragment)


# -- called computations ---------------------------------------------------------------------------
def test_foreign_called_computation() -> None:
    m, other = module(), module()
    instr(m, "r").attrs["to_apply"] = other.computation("add")
    expect_error(m, "e", "r", "found to_apply=add, which is not in the module")


def test_called_computation_on_non_caller() -> None:
    m = module()
    instr(m, "n").attrs["to_apply"] = m.computation("add")
    expect_error(m, "e", "n", "found to_apply= on negate, expected no called computations")


@pytest.mark.parametrize("prelude, root, fragment", [
    # a reducer of one input must take 2 scalars
    ("red { a = f32[] parameter(0)  ROOT n = f32[] negate(a) }\n",
     "f32[] reduce(p, z), dimensions={0}, to_apply=red", "takes 1 parameters, expected 2"),
    # ... and return one scalar
    ("red { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT t = (f32[], f32[]) tuple(a, b) }\n",
     "f32[] reduce(p, z), dimensions={0}, to_apply=red", "tuple of 2, expected 1 elements"),
    # a while condition returns pred[]
    ("c { s = f32[4] parameter(0)  ROOT k = f32[] constant(1) }\n"
     "b { s = f32[4] parameter(0)  ROOT n = f32[4] negate(s) }\n",
     "f32[4] while(p), condition=c, body=b", "returns f32[], expected pred[]"),
    # a while body keeps the loop state's shape
    ("c { s = f32[4] parameter(0)  ROOT k = pred[] constant(true) }\n"
     "b { s = f32[4] parameter(0)  ROOT k = f32[] constant(1) }\n",
     "f32[4] while(p), condition=c, body=b", "returns f32[], expected the loop state f32[4]"),
    # each conditional branch takes one parameter
    ("b0 { x = f32[4] parameter(0)  y = f32[4] parameter(1)  ROOT n = f32[4] negate(x) }\n"
     "b1 { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) }\n",
     "f32[4] conditional(i, p, p), branch_computations={b0, b1}", "takes 2 parameters, expected 1"),
    # a sort comparator returns pred[]
    ("cmp { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n",
     "f32[4] sort(p), dimensions={0}, to_apply=cmp", "returns f32[], expected pred[]"),
])
def test_called_computation_signatures(prelude: str, root: str, fragment: str) -> None:
    m = module(prelude + "ENTRY e { p = f32[4] parameter(0)  z = f32[] parameter(1)  i = s32[] parameter(2)\n"
               f"  ROOT r = {root} }}")
    expect_error(m, "e", "r", fragment)


def test_fusion_parameters_must_match_operands() -> None:
    m = module("f { x = f32[3] parameter(0)  ROOT n = f32[3] negate(x) }\n"
               "ENTRY e { p = f32[4] parameter(0)  ROOT r = f32[3] fusion(p), kind=kLoop, calls=f }")
    expect_error(m, "e", "r", "operand 0 is f32[4] but parameter 0 of f is f32[3]")


def test_fusion_with_more_parameters_than_operands() -> None:
    m = module("f { x = f32[4] parameter(0)  y = f32[4] parameter(1)  ROOT a = f32[4] add(x, y) }\n"
               "ENTRY e { p = f32[4] parameter(0)  ROOT r = f32[4] fusion(p), kind=kLoop, calls=f }")
    expect_error(m, "e", "r", "takes 2 parameters, expected 1")


def test_fused_computation_without_dead_code() -> None:
    m = module("f { x = f32[4] parameter(0)  d = f32[4] exponential(x)  ROOT n = f32[4] negate(x) }\n"
               "ENTRY e { p = f32[4] parameter(0)  ROOT r = f32[4] fusion(p), kind=kLoop, calls=f }")
    expect_error(m, "f", "d", "found an instruction without users in a fused computation")


# -- structure -------------------------------------------------------------------------------------
def test_user_list_missing_a_user() -> None:
    m = module()
    instr(m, "p").users.clear()
    expect_error(m, "e", "n", "found operand %p, whose users do not include it")


def test_user_list_with_a_stranger() -> None:
    m = module()
    instr(m, "z").users.append(instr(m, "n"))
    expect_error(m, "e", "z", "found %n in its users, but %n does not use it")


def test_operand_from_another_computation() -> None:
    m = module()
    a = instr(m, "a", "add")
    n = instr(m, "n")
    n.operands[0] = a
    a.users.append(n)
    # Computations are checked in module order: `add` sees the stray user first.
    expect_error(m, "add", "a", "found user %n in e, expected users in this computation")
    a.users.remove(n)
    expect_error(m, "e", "n", "found operand 0 %a in add, expected an instruction of this computation")


def test_root_not_in_computation() -> None:
    m = module()
    m.entry.root = instr(m, "s", "add")
    expect_error(m, "e", "s", "found root %s, which is not one of its instructions")


def test_parameter_numbers_must_be_dense() -> None:
    m = module()
    instr(m, "z").parameter_number = 5
    expect_error(m, "e", None, "found parameter numbers [0, 5], expected 0..1 each once")


def test_instruction_names_unique_in_computation() -> None:
    m = module()
    instr(m, "n").name = "p"
    expect_error(m, "e", "p", "found the name p twice")


def test_cycle() -> None:
    m = module("ENTRY e { p = f32[4] parameter(0)  a = f32[4] negate(p)  ROOT b = f32[4] negate(a) }")
    a, b = instr(m, "a"), instr(m, "b")
    a.replace_operand(0, b)
    with pytest.raises(VerificationError, match="found a cycle through %[ab], expected an acyclic graph") \
            as info:
        verify_module(m)
    assert info.value.computation == "e" and info.value.instruction in ("a", "b")


def test_unscheduled_module_may_list_instructions_out_of_order() -> None:
    m = module()
    comp = m.entry
    comp.instructions.reverse()
    verify_module(m)


def test_scheduled_module_uses_before_definition() -> None:
    m = module("HloModule m, is_scheduled=true\n" + GOOD)
    verify_module(m)
    comp = m.entry
    n = instr(m, "n")
    comp.instructions.remove(n)
    comp.instructions.append(n)
    expect_error(m, "e", "r", "found a use of %n before its definition", "scheduled")


def test_entry_computation_layout_must_agree() -> None:
    text = "HloModule m, entry_computation_layout={(f32[4]{0})->s32[4]{0}}\n" \
           "ENTRY e { p = f32[4] parameter(0)  ROOT r = f32[4] negate(p) }"
    expect_error(module(text), "e", "r", "found root shape f32[4]{0}, expected s32[4]{0}")


def test_entry_computation_layout_layouts_when_layout_sensitive() -> None:
    text = "HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{1,0}}\n" \
           "ENTRY e { p = f32[2,3]{1,0} parameter(0)  ROOT r = f32[2,3] negate(p) }"
    verify_module(module(text))
    expect_error(module(text), "e", "p", "found parameter 0 f32[2,3]{1,0}, expected f32[2,3]{0,1}",
                 layout_sensitive=True)


def test_start_without_done() -> None:
    m = module("ENTRY e { p = f32[4] parameter(0)  s = (f32[4], f32[4], u32[]) copy-start(p)\n"
               "  ROOT r = f32[4] negate(p) }")
    expect_error(m, "e", "s", "found users: none; expected exactly one copy-done")


def test_done_without_start() -> None:
    m = module("ENTRY e { p = (f32[4], f32[4], u32[]) parameter(0)  ROOT r = f32[4] copy-done(p) }")
    expect_error(m, "e", "r", "found operand %p (parameter), expected copy-start")


def test_called_computations_not_in_module_list() -> None:
    m = module()
    stray = HloComputation("stray")
    x = HloInstruction("x", "parameter", Shape.array(PRIMITIVE_TYPES["f32"], ()))
    x.parameter_number = 0
    stray.add_instruction(x)
    stray.root = x
    instr(m, "r").attrs["to_apply"] = stray
    expect_error(m, "e", "r", "found to_apply=stray, which is not in the module")


def test_verifier_is_linear() -> None:
    """A chain of 12000 negates costs about 4x the function calls of one of 3000 (counted, not timed:
    a count does not depend on the machine's load)."""
    from hlo_common.hlo.ir import HloModule

    def chain(n: int) -> HloModule:
        f32 = Shape.array(PRIMITIVE_TYPES["f32"], (8,))
        comp = HloComputation("e")
        prev = HloInstruction("n0", "parameter", f32)
        prev.parameter_number = 0
        comp.add_instruction(prev)
        for i in range(1, n):
            prev = comp.add_instruction(HloInstruction(f"n{i}", "negate", f32, [prev]))
        comp.root = prev
        m = HloModule("m")
        m.add_computation(comp, entry=True)
        return m

    from work_count import python_calls

    small = python_calls(lambda: verify_module(chain(3000)))
    large = python_calls(lambda: verify_module(chain(12000)))
    assert large < 5 * small, (small, large)  # 4x the instructions; quadratic would be ~16x
