"""hlo_common.analysis: the SSA form of the dataflow, the call graph's nesting queries, the
dependency ordering copy insertion reasons with, and the scheduler's memory model.

Every expectation is read off the small modules below by hand.
"""

from hlo_common.analysis.call_graph import CallGraph
from hlo_common.analysis.dataflow import HloDataflowAnalysis
from hlo_common.analysis.ordering import Constraint, DependencyHloOrdering, ReachabilityMap
from hlo_common.analysis.schedule_memory import ScheduleMemoryModel
from hlo_common.hlo.parser import parse_module

LOOP = """
HloModule loop
body {
  p = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  y = f32[8] get-tuple-element(p), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[8] negate(x)
  ROOT t = (s32[], f32[8], f32[8]) tuple(i2, x2, y)
}
cond {
  p = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
on_true {
  a = f32[8] parameter(0)
  ROOT e = f32[8] exponential(a)
}
on_false {
  b = f32[8] parameter(0)
  ROOT s = f32[8] sine(b)
}
ENTRY e {
  a = f32[8] parameter(0)
  pr = pred[] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[8], f32[8]) tuple(z, a, a)
  w = (s32[], f32[8], f32[8]) while(init), condition=cond, body=body
  g1 = f32[8] get-tuple-element(w), index=1
  g2 = f32[8] get-tuple-element(w), index=2
  c = f32[8] conditional(pr, g1, g2), true_computation=on_true, false_computation=on_false
  ROOT r = f32[8] add(c, g2)
}
"""


def test_ssa_form_puts_phis_where_loop_state_changes():
    m = parse_module(LOOP)
    df = HloDataflowAnalysis.run(m, ssa_form=True)
    w, body = m.entry.instruction("w"), m.computation("body")
    # Leaves 0 and 1 change in the body: phis at the while and at both parameters.
    for idx in ((0,), (1,)):
        for instr in (w, body.parameter(0), m.computation("cond").parameter(0)):
            v = df.unique_value(instr, idx)
            assert v is not None and v.is_phi and v.instruction is instr
    # Leaf 2 passes through: the loop holds the init's value (the parameter %a) everywhere.
    a = m.entry.instruction("a")
    assert df.unique_value(w, (2,)).instruction is a
    assert df.unique_value(body.root, (2,)).instruction is a
    # The conditional's branches return different values: a phi at the conditional.
    c = df.unique_value(m.entry.instruction("c"))
    assert c.is_phi and c.instruction.name == "c"
    # Every position holds exactly one value.
    assert all(len(vs) <= 1 for sets in df.value_sets.values() for vs in sets.values())


def test_non_ssa_form_holds_unions():
    m = parse_module(LOOP)
    df = HloDataflowAnalysis.run(m)
    names = sorted(v.instruction.name for v in df.value_set(m.entry.instruction("w"), (1,)))
    assert names == ["a", "x2"]
    assert not any(v.is_phi for v in df.values)


def test_call_graph_nesting_and_nearest_ancestors():
    m = parse_module(LOOP)
    cg = CallGraph(m)
    w = m.entry.instruction("w")
    x2 = m.computation("body").instruction("x2")
    lt = m.computation("cond").instruction("lt")
    assert cg.ancestor_in(x2, m.entry) is w
    assert cg.is_nested_in(x2, m.computation("body")) and not cg.is_nested_in(x2, m.computation("cond"))
    assert cg.nearest_ancestors(x2, lt) == (w, w)
    assert cg.nearest_ancestors(x2, m.entry.instruction("r")) == (w, m.entry.instruction("r"))
    assert cg.depth[m.computation("on_true")] == 1


def test_dependency_ordering_constraints():
    m = parse_module(LOOP)
    df = HloDataflowAnalysis.run(m, ssa_form=True)
    o = DependencyHloOrdering(m, df)
    e, body, cond = m.entry, m.computation("body"), m.computation("cond")
    init, w, r, z = (e.instruction(n) for n in ("init", "w", "r", "z"))
    assert o.execution_constraint(init, w) is Constraint.RUN_BEFORE_START
    assert o.execution_constraint(r, init) is Constraint.RUN_AFTER
    assert o.execution_constraint(w, w) is Constraint.IS_SAME
    # The condition runs before the body (both nested in the same while).
    assert o.execution_constraint(cond.instruction("lt"), body.instruction("x2")) is Constraint.RUN_BEFORE_END
    # Branches are exclusive, ordered by branch index.
    te, fs = m.computation("on_true").root, m.computation("on_false").root
    assert o.execution_constraint(te, fs) is Constraint.RUN_EXCLUSIVE_BEFORE
    assert o.execution_constraint(fs, te) is Constraint.RUN_EXCLUSIVE_AFTER
    # Nothing orders the counter constant against the parameter %pr.
    assert o.execution_constraint(z, e.instruction("pr")) is Constraint.UNORDERED
    assert o.executes_before(init, r) and not o.executes_before(r, init)


def test_phi_values_are_defined_where_they_logically_occur():
    m = parse_module(LOOP)
    df = HloDataflowAnalysis.run(m, ssa_form=True)
    o = DependencyHloOrdering(m, df)
    body = m.computation("body")
    param_phi = df.unique_value(body.parameter(0), (1,))
    x2 = df.unique_value(body.instruction("x2"))
    while_phi = df.unique_value(m.entry.instruction("w"), (1,))
    assert o.is_defined_before(param_phi, x2)      # a body parameter phi precedes the body
    assert o.is_defined_before(x2, while_phi)      # a while phi follows everything in the loop
    assert not o.is_defined_before(while_phi, x2)
    # x2's only use, the body's root, comes before the while phi (defined after the loop).
    assert o.uses_before_value_definition(x2.uses, while_phi)


def test_reachability_map():
    m = parse_module(LOOP)
    body = m.computation("body")
    r = ReachabilityMap(body)
    p, x2, i2, t = (body.instruction(n) for n in ("p", "x2", "i2", "t"))
    assert r.is_reachable(p, t) and r.is_reachable(x2, t)
    assert not r.is_reachable(x2, i2) and not r.is_reachable(t, p)


def test_schedule_memory_buffers_and_peak():
    m = parse_module(LOOP)
    model = ScheduleMemoryModel(m)
    entry = model.computation(m.entry)
    # No copies were inserted, so the loop state shares the parameter's buffer: entry buffers
    # (f32[8] = 32 bytes) are {a, x2}, the counter {z, i2} (s32, 4 bytes), the conditional's
    # result {e, s}, r, and pr (1 byte).
    assert sorted(entry.sizes) == [1, 4, 32, 32, 32]
    # In text order: a 32 + pr 1 + counter 4 up to the while (the counter's last reader); then c
    # 32 and r 32 (c dies at r, r is the result): 32 + 1 + 32 + 32.
    assert entry.peak_memory(list(m.entry.instructions), {}) == 97
