"""CopyInsertion ("copy-insertion") and LoopScheduleLinearizer ("loop-schedule-linearizer").

Expected copies are worked out by hand; several cases are XLA's own (`copy_insertion_test.cc`:
SwizzlingWhileWithOneOp, SwizzlingWhileSharedInput, SequentialWhiles, the parameter aliasing
cases), with XLA's expected copy and control-edge counts. Beyond the text, every case is run
through the scheduler and hlo-codegen's buffer assignment, and then executed *inside* that
assignment (tests/helpers/ba_memory_sim.py): if a copy were missing, a value would
be overwritten while still live and the result would differ from the interpreter's.
"""


import pytest
from pass_testlib import check_numerics, check_pass, check_unchanged, run_pass

from ba_memory_sim import run_and_compare  # noqa: E402

from hlo_codegen.buffer_assignment import assign_buffers, check_buffer_assignment, insert_copies  # noqa: E402
from hlo_common.errors import HloError  # noqa: E402
from hlo_common.hlo.parser import parse_module  # noqa: E402
from hlo_opt.passes.copy_insertion import CopyInsertion  # noqa: E402
from hlo_opt.passes.scheduler import HloMemoryScheduler  # noqa: E402


def copies(module, comp=None):
    comps = [module.computation(comp)] if comp else module.computations
    return sum(i.opcode == "copy" for c in comps for i in c.instructions)


def control_edges(module, comp):
    return sum(len(i.control_predecessors) for i in module.computation(comp).instructions)


def runs_in_its_buffers(module, seeds=(0,)) -> int:
    """Schedule, let hlo-codegen add the copies its simpler order-specific rules still ask for
    (returns how many), assign buffers, check the assignment, run inside it and compare."""
    HloMemoryScheduler().run(module)
    added = insert_copies(module)
    ba = assign_buffers(module)
    assert check_buffer_assignment(ba) == []
    for seed in seeds:
        assert run_and_compare(module, ba, seed)
    return added


# -- while loops ---------------------------------------------------------------------------------------
NEGATE_LOOP = """
HloModule negate_loop
body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[8] negate(x)
  ROOT t = (s32[], f32[8]) tuple(i2, x2)
}
cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  a = f32[8] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[8]) tuple(z, a)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}
// The body updates both leaves in place (each old value's only reader is the op writing the new
// one); the init reads a parameter and a constant, which are read-only: both are copied.
// CHECK:      %body
// CHECK-NOT:  copy(
// CHECK:      ENTRY %e
// CHECK-DAG:  %[[A:.*]] = f32[8]{0} copy(%a)
// CHECK-DAG:  %[[Z:.*]] = s32[] copy(%z)
// CHECK:      tuple(%[[Z]], %[[A]])
"""


def test_loop_updated_in_place_copies_only_read_only_inits():
    module = check_pass("copy-insertion", NEGATE_LOOP)
    assert copies(module) == 2 and copies(module, "body") == 0
    check_numerics(NEGATE_LOOP, module)
    assert runs_in_its_buffers(module) == 0


SWIZZLE_ONE_OP = """
HloModule swizzle_one_op
body {
  param = (s32[], s32[]) parameter(0)
  e0 = s32[] get-tuple-element(param), index=0
  e1 = s32[] get-tuple-element(param), index=1
  n = s32[] negate(e1)
  ROOT t = (s32[], s32[]) tuple(n, e0)
}
condition {
  param = (s32[], s32[]) parameter(0)
  c = pred[] constant(false)
  ROOT nc = pred[] not(c)
}
ENTRY e {
  c1 = s32[] constant(1)
  c2 = s32[] constant(2)
  t = (s32[], s32[]) tuple(c1, c2)
  ROOT w = (s32[], s32[]) while(t), condition=condition, body=body
}
// CHECK:      %body
// CHECK-DAG:  %[[P0:.*]] = s32[] copy(%get-tuple-element)
// CHECK-DAG:  %[[P1:.*]] = s32[] copy(%get-tuple-element.1)
// CHECK-DAG:  %[[N:.*]] = s32[] negate(%[[P1]])
// CHECK-DAG:  %[[R0:.*]] = s32[] copy(%[[N]]), control-predecessors={%[[P0]]}
// CHECK-DAG:  %[[R1:.*]] = s32[] copy(%[[P0]]), control-predecessors={%[[P1]]}
// CHECK:      ROOT {{.*}} tuple(%[[R0]], %[[R1]])
"""


def test_swizzling_while_with_one_op_matches_xla():
    # XLA: 6 copies; the body copies both elements at the parameter and at the root, with a
    # control edge from each parameter copy to the root copy of the same element; the init tuple
    # copies both constants. Swapping needs a second buffer, and the dependency order cannot say
    # which element is read last, so none of the body copies can go.
    module = check_pass("copy-insertion", SWIZZLE_ONE_OP)
    assert copies(module) == 6 and copies(module, "body") == 4
    assert control_edges(module, "body") == 2
    w = module.entry.root
    assert [o.opcode for o in w.operands[0].operands] == ["copy", "copy"]
    # (The condition is always true, as in XLA's test: nothing to run.)


SWAP_LOOP = """
HloModule swap
body {
  p = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  y = f32[8] get-tuple-element(p), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[8], f32[8]) tuple(i2, y, x)
}
cond {
  p = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  a = f32[8] parameter(0)
  b = f32[8] exponential(a)
  z = s32[] constant(0)
  init = (s32[], f32[8], f32[8]) tuple(z, a, b)
  w = (s32[], f32[8], f32[8]) while(init), condition=cond, body=body
  g1 = f32[8] get-tuple-element(w), index=1
  g2 = f32[8] get-tuple-element(w), index=2
  s = f32[8] subtract(g1, g2)
  ROOT r = (f32[8], f32[8]) tuple(s, b)
}
"""


def test_swap_loop_keeps_both_values_alive():
    # Three iterations swap x and y: each swapped leaf keeps its parameter and root copies (4 in
    # the body); %b is read after the loop and returned, so the init copies it, as it copies %a
    # (a parameter) and the counter (a constant).
    module, _ = run_pass("copy-insertion", SWAP_LOOP)
    assert copies(module, "body") == 4 and copies(module, "e") == 3
    check_numerics(SWAP_LOOP, module)
    assert runs_in_its_buffers(module) == 0


def test_swizzling_while_with_shared_input_copies_nothing_in_the_body():
    # XLA: both loop elements are the same constant, so swapping them is a no-op; the two copies
    # are on the entry's result (a read-only constant returned at two indices).
    text = SWIZZLE_ONE_OP.split("// CHECK")[0].replace("  n = s32[] negate(e1)\n", "") \
        .replace("tuple(n, e0)", "tuple(e1, e0)").replace("  c2 = s32[] constant(2)\n", "") \
        .replace("tuple(c1, c2)", "tuple(c1, c1)")
    module, _ = run_pass("copy-insertion", text)
    assert copies(module) == 2 and copies(module, "body") == 0
    root = module.entry.root
    assert root.opcode == "tuple" and [o.opcode for o in root.operands] == ["copy", "copy"]


def sequential_whiles(n: int = 3) -> str:
    """XLA's SequentialWhiles: element 0 comes from a parameter into every loop, element 1 passes
    through all bodies, element 2 is negated (in place) and element 3 reversed (not in place)."""
    s = "(s32[42], s32[42], s32[42], s32[42])"
    comps, entry, prev = [], [f"  p{k} = s32[42] parameter({k})" for k in range(4)], ["p1", "p2", "p3"]
    for i in range(n):
        comps.append(f"""body{i} {{
  param = {s} parameter(0)
  e0 = s32[42] get-tuple-element(param), index=0
  e1 = s32[42] get-tuple-element(param), index=1
  e2 = s32[42] get-tuple-element(param), index=2
  e3 = s32[42] get-tuple-element(param), index=3
  neg = s32[42] negate(e2)
  rev = s32[42] reverse(e3), dimensions={{0}}
  ROOT t = {s} tuple(e0, e1, neg, rev)
}}
cond{i} {{
  param = {s} parameter(0)
  c = pred[] constant(false)
  ROOT nc = pred[] not(c)
}}""")
        entry.append(f"  init{i} = {s} tuple(p0, {', '.join(prev)})")
        root = "ROOT " if i == n - 1 else ""
        entry.append(f"  {root}w{i} = {s} while(init{i}), condition=cond{i}, body=body{i}")
        if i != n - 1:
            entry += [f"  g{i}_{k} = s32[42] get-tuple-element(w{i}), index={k}" for k in (1, 2, 3)]
            prev = [f"g{i}_{k}" for k in (1, 2, 3)]
    return "HloModule sequential_whiles\n" + "\n".join(comps) + "\nENTRY e {\n" + "\n".join(entry) + "\n}\n"


def test_sequential_whiles_match_xla():
    text = sequential_whiles()
    module, _ = run_pass("copy-insertion", text)
    # XLA: one copy per body (the reverse cannot run in place), the first loop's init copies the
    # parameters of elements 2 and 3 (read-only), the result copies elements 0 and 1 (parameters).
    assert copies(module) == 4 + 3
    for i in range(3):
        assert copies(module, f"body{i}") == 1
    first = module.entry.instruction("w0")
    assert [o.opcode for o in first.operands[0].operands] == ["parameter", "parameter", "copy", "copy"]
    assert [o.opcode for o in module.entry.root.operands] == [
        "copy", "copy", "get-tuple-element", "get-tuple-element"]


DUS_LOOP_WITH_LATE_READER = """
HloModule dus_loop
body {
  p = (s32[], f32[8,4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  buf = f32[8,4] get-tuple-element(p), index=1
  row = f32[4] get-tuple-element(p), index=2
  zero = s32[] constant(0)
  r1 = f32[1,4] reshape(row)
  upd = f32[8,4] dynamic-update-slice(buf, r1, i, zero)
  sl = f32[1,4] slice(buf), slice={[0:1], [0:4]}
  sr = f32[4] reshape(sl)
  row2 = f32[4] add(row, sr)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[8,4], f32[4]) tuple(i2, upd, row2)
}
cond {
  p = (s32[], f32[8,4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(8)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  a = f32[8,4] parameter(0)
  v = f32[4] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[8,4], f32[4]) tuple(z, a, v)
  w = (s32[], f32[8,4], f32[4]) while(init), condition=cond, body=body
  ROOT g = f32[8,4] get-tuple-element(w), index=1
}
"""


def test_unordered_readers_of_old_loop_state_keep_copies():
    # Every changed leaf has a reader of its old value that nothing orders before its writer:
    # the counter (%upd reads i, %i2 writes), the buffer (%sl reads, %upd writes; the update also
    # keeps its own in-place copy, as XLA does without the linearizer) and the row (%r1 reads,
    # %row2 writes): 4 copies in the body, plus the read-only inits (a, v, the counter constant).
    module, _ = run_pass("copy-insertion", DUS_LOOP_WITH_LATE_READER)
    assert copies(module, "body") == 4 and copies(module, "e") == 3
    upd = module.computation("body").instruction("upd")
    assert upd.operands[0].opcode == "copy"
    check_numerics(DUS_LOOP_WITH_LATE_READER, module)
    assert runs_in_its_buffers(module) == 0


def test_linearizer_orders_the_reader_first_and_the_copies_go():
    module = check_pass("loop-schedule-linearizer", DUS_LOOP_WITH_LATE_READER + """
// CHECK: %sl = f32[1,4]{1,0} slice(
// CHECK: %upd = f32[8,4]{1,0} dynamic-update-slice({{.*}}), control-predecessors={%sl}
""")
    CopyInsertion().run(module)
    assert copies(module, "body") == 0
    assert copies(module) == 3  # the read-only inits: a, v and the constant counter
    assert runs_in_its_buffers(module) == 0


def test_linearizer_leaves_a_swap_alone():
    # Each element's reader is the root tuple itself, and the writer is the parameter: every edge
    # would close a cycle.
    check_unchanged("loop-schedule-linearizer", SWIZZLE_ONE_OP.split("// CHECK")[0].replace(
        "  n = s32[] negate(e1)\n", "").replace("tuple(n, e0)", "tuple(e1, e0)"))


# -- conditionals ------------------------------------------------------------------------------------------
CONDITIONAL = """
HloModule cond
on_true {
  t = (f32[4], f32[4]) parameter(0)
  a = f32[4] get-tuple-element(t), index=0
  ROOT e = f32[4] exponential(a)
}
on_false {
  f = (f32[4], f32[4]) parameter(0)
  ROOT b = f32[4] get-tuple-element(f), index=1
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  pr = pred[] parameter(2)
  ops = (f32[4], f32[4]) tuple(x, y)
  c = f32[4] conditional(pr, ops, ops), true_computation=on_true, false_computation=on_false
  ROOT n = f32[4] negate(c)
}
// The false branch returns a parameter's value: its root is copied so the result is a buffer of
// its own; the true branch's exponential is already one.
// CHECK:      %on_true
// CHECK-NOT:  copy(
// CHECK:      %on_false
// CHECK:      ROOT {{.*}} copy(
// CHECK:      ENTRY
"""


def test_conditional_branch_returning_an_operand_is_copied():
    module = check_pass("copy-insertion", CONDITIONAL)
    assert copies(module) == 1
    check_numerics(CONDITIONAL, module)
    assert runs_in_its_buffers(module, seeds=range(4)) == 0  # both branches


# -- in-place operations and aliasing ------------------------------------------------------------------------
DUS_ON_A_PARAMETER = """
HloModule dus_param
ENTRY e {
  p = f32[16] parameter(0)
  u = f32[4] parameter(1)
  i = s32[] parameter(2)
  ROOT d = f32[16] dynamic-update-slice(p, u, i)
}
// The parameter is read-only: the update writes into a copy of it.
// CHECK: %[[C:.*]] = f32[16]{0} copy(%p)
// CHECK: ROOT %d = f32[16]{0} dynamic-update-slice(%[[C]], %u, %i)
"""

DUS_ON_A_TEMPORARY = """
HloModule dus_temp
ENTRY e {
  p = f32[16] parameter(0)
  u = f32[4] parameter(1)
  i = s32[] parameter(2)
  x = f32[16] exponential(p)
  d = f32[16] dynamic-update-slice(x, u, i)
  s = f32[16] sine(x)
  ROOT t = (f32[16], f32[16]) tuple(d, s)
}
// %s reads %x and nothing orders it before %d: %d updates a copy.
// CHECK: %[[C:.*]] = f32[16]{0} copy(%x)
// CHECK: %d = f32[16]{0} dynamic-update-slice(%[[C]], %u, %i)
"""


def test_dynamic_update_slice_of_a_parameter_copies_it():
    module = check_pass("copy-insertion", DUS_ON_A_PARAMETER)
    assert copies(module) == 1
    check_numerics(DUS_ON_A_PARAMETER, module)
    assert runs_in_its_buffers(module) == 0


def test_dynamic_update_slice_of_a_value_read_elsewhere_copies_it():
    module = check_pass("copy-insertion", DUS_ON_A_TEMPORARY)
    assert copies(module) == 1
    check_numerics(DUS_ON_A_TEMPORARY, module)
    assert runs_in_its_buffers(module) == 0


def test_dynamic_update_slice_of_a_dying_value_needs_no_copy():
    check_unchanged("copy-insertion", DUS_ON_A_TEMPORARY.split("//")[0].replace(
        "  s = f32[16] sine(x)\n", "  s = f32[16] sine(p)\n"))


ALIASED_IO = """
HloModule aliased, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  n0 = f32[8] negate(p0)
  ROOT t = (f32[8], f32[8]) tuple(n0, p1)
}
// Output {0} lives in parameter 0's buffer: the negate may write over its operand there (XLA's
// ParameterAndParallelOpsWithPartialAliasing needs no copy). Output {1} returns a read-only
// parameter: copied (XLA's ParameterWithPartialAliasing).
// CHECK:      %[[C:.*]] = f32[8]{0} copy(%p1)
// CHECK:      ROOT {{.*}} tuple(%n0, %[[C]])
"""


def test_aliased_output_runs_in_its_parameter():
    module = check_pass("copy-insertion", ALIASED_IO)
    assert copies(module) == 1
    check_numerics(ALIASED_IO, module)


def test_aliased_output_written_while_the_parameter_is_read_later_gets_a_copy():
    text = """
HloModule aliased_late, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  p0 = f32[8] parameter(0)
  n0 = f32[8] negate(p0)
  s = f32[8] sine(p0)
  ROOT t = (f32[8], f32[8]) tuple(n0, s)
}
"""
    module, _ = run_pass("copy-insertion", text)
    # %s reads %p0 and is not ordered before %n0, which writes the aliased output: one copy.
    assert copies(module) == 1
    check_numerics(text, module)


def test_root_returning_a_parameter_twice_is_copied_twice():
    text = """
HloModule twice
ENTRY e {
  p = f32[8] parameter(0)
  ROOT t = (f32[8], f32[8]) tuple(p, p)
}
// CHECK: ROOT {{.*}} tuple(%copy{{.*}}, %copy{{.*}})
"""
    module = check_pass("copy-insertion", text)
    assert copies(module) == 2


def test_no_control_flow_and_no_in_place_op_changes_nothing():
    check_unchanged("copy-insertion", """
HloModule plain
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] exponential(p)
  b = f32[8] sine(a)
  ROOT n = f32[8] add(a, b)
}
""")


def test_a_removable_copy_already_in_the_module_is_removed():
    text = """
HloModule extra_copy
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] exponential(p)
  b = f32[8] copy(a)
  ROOT n = f32[8] negate(b)
}
// CHECK:     ROOT %n = f32[8]{0} negate(%a)
// CHECK-NOT: copy(
"""
    module = check_pass("copy-insertion", text)
    check_numerics(text, module)


def test_a_layout_changing_copy_stays():
    check_unchanged("copy-insertion", """
HloModule transpose_copy
ENTRY e {
  p = f32[8,4]{1,0} parameter(0)
  a = f32[8,4]{1,0} exponential(p)
  b = f32[8,4]{0,1} copy(a)
  ROOT n = f32[8,4]{0,1} negate(b)
}
""")


def test_unflattened_call_graph_is_an_error():
    text = """
HloModule shared_body
body {
  p = (s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[]) tuple(i2)
}
cond {
  p = (s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  z = s32[] parameter(0)
  init = (s32[]) tuple(z)
  w1 = (s32[]) while(init), condition=cond, body=body
  w2 = (s32[]) while(w1), condition=cond, body=body
  ROOT r = s32[] get-tuple-element(w2), index=0
}
"""
    with pytest.raises(HloError, match="flattened"):
        CopyInsertion().run(parse_module(text))
