"""Which instruction must run before which: XLA's `HloReachabilityMap` and `DependencyHloOrdering`
(`xla/hlo/analysis/hlo_ordering.cc`), over a module in SSA dataflow form.

Where it sits: hlo-opt's `copy-insertion` asks it, before any schedule exists, whether removing a
copy could let two values that share a buffer be live at once *in any order the scheduler may
pick*; only orders forced by operands and control dependencies count. After scheduling,
`post-scheduling-copy-insertion` asks `SequentialHloOrdering`, which knows the one order chosen.

- `ReachabilityMap`: per computation, a bitset of predecessors (operands and control
  predecessors, transitively) for every instruction; Python ints as bitsets, built in post order.
- `DependencyHloOrdering.execution_constraint(a, b)`: the relation of two instructions, possibly
  in different (nested) computations, found through their nearest ancestors in one computation:
  a while's condition runs before its body, a conditional's branches are mutually exclusive (and
  ordered by branch index, as XLA defines it so that buffers can be shared among branches).
- `is_defined_before`, `uses_before_value_definition`: XLA's rules for values, with phi values
  placed where they logically occur (a body parameter phi before everything in the body, a while
  phi after everything in the loop).

    >>> ordering = DependencyHloOrdering(module, ssa_dataflow)   # doctest: +SKIP
    >>> ordering.executes_before(a, b)
    True
"""

from __future__ import annotations

from enum import Enum

from hlo_common.analysis.call_graph import CallGraph, xla_called_computations, xla_instruction_post_order
from hlo_common.analysis.dataflow import HloDataflowAnalysis, HloUse, HloValue
from hlo_common.analysis.sharing import can_share_operand_buffer_with_user
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule


class ReachabilityMap:
    """`is_reachable(a, b)`: is there a path of operand / control edges from `a` to `b`?"""

    def __init__(self, comp: HloComputation):
        self.index: dict[int, int] = {}
        self.predecessors: list[int] = []
        for k, instr in enumerate(xla_instruction_post_order(comp)):
            self.index[id(instr)] = k
            bits = 0
            for dep in instr.operands + instr.control_predecessors:
                j = self.index.get(id(dep))
                if j is not None:
                    bits |= self.predecessors[j] | (1 << j)
            self.predecessors.append(bits)

    def is_reachable(self, a: HloInstruction, b: HloInstruction) -> bool:
        ia, ib = self.index.get(id(a)), self.index.get(id(b))
        if ia is None or ib is None:
            return False
        return ia == ib or bool((self.predecessors[ib] >> ia) & 1)


class Constraint(Enum):
    """XLA's HloOrdering::ExecutionConstraint, read as "a ... b"."""

    IS_SAME = "is-same"
    RUN_BEFORE_START = "run-before-start"      # a finishes before b starts
    RUN_BEFORE_END = "run-before-end"          # a runs inside b, before b ends (b calls a)
    RUN_EXCLUSIVE_BEFORE = "run-exclusive-before"  # exclusive branches, a's index lower
    RUN_EXCLUSIVE_AFTER = "run-exclusive-after"
    RUN_AFTER = "run-after"
    UNORDERED = "unordered"


_BEFORE = (Constraint.RUN_BEFORE_START, Constraint.RUN_BEFORE_END, Constraint.RUN_EXCLUSIVE_BEFORE)


class DependencyHloOrdering:
    """XLA's DependencyHloOrdering: a runs before b iff a path of dependencies forces it."""

    def __init__(self, module: HloModule, dataflow: HloDataflowAnalysis):
        self.module = module
        self.dataflow = dataflow
        self.call_graph = CallGraph(module)
        self._reach: dict[HloComputation, ReachabilityMap] = {}

    def reachability(self, comp: HloComputation) -> ReachabilityMap:
        r = self._reach.get(comp)
        if r is None:
            r = self._reach[comp] = ReachabilityMap(comp)
        return r

    def _before_in_same_computation(self, a: HloInstruction, b: HloInstruction) -> bool:
        return a is not b and self.reachability(a.parent).is_reachable(a, b)

    def _branch_of(self, instr: HloInstruction, conditional: HloInstruction) -> int:
        for j, branch in enumerate(xla_called_computations(conditional)):
            if self.call_graph.is_nested_in(instr, branch):
                return j
        return -1

    def execution_constraint(self, a: HloInstruction, b: HloInstruction) -> Constraint:
        if a is b:
            return Constraint.IS_SAME
        a_anc, b_anc = self.call_graph.nearest_ancestors(a, b)
        if a_anc is None:
            return Constraint.UNORDERED
        if a_anc is b_anc and a_anc.opcode == "while":
            body, cond = a_anc.attrs["body"], a_anc.attrs["condition"]
            if self.call_graph.is_nested_in(a, cond) and self.call_graph.is_nested_in(b, body):
                return Constraint.RUN_BEFORE_END
        if a_anc is b_anc and a_anc.opcode == "conditional":
            ja, jb = self._branch_of(a, a_anc), self._branch_of(b, a_anc)
            if ja == -1 and jb == -1:
                return Constraint.IS_SAME
            if jb == -1:
                return Constraint.RUN_BEFORE_END
            if ja == -1:
                return Constraint.RUN_AFTER
            if ja < jb:
                return Constraint.RUN_EXCLUSIVE_BEFORE
            if jb < ja:
                return Constraint.RUN_EXCLUSIVE_AFTER
        if self._before_in_same_computation(a_anc, b_anc):
            return Constraint.RUN_BEFORE_START
        if self._before_in_same_computation(b_anc, a_anc):
            return Constraint.RUN_AFTER
        return Constraint.UNORDERED

    def executes_before(self, a: HloInstruction, b: HloInstruction) -> bool:
        return self.execution_constraint(a, b) in _BEFORE

    # -- values -------------------------------------------------------------------------------------
    def _nested(self, instr: HloInstruction, comp: HloComputation) -> bool:
        return self.call_graph.is_nested_in(instr, comp)

    def is_defined_before(self, a: HloValue, b: HloValue) -> bool:
        """XLA's HloOrdering::IsDefinedBefore, phi values included."""
        entry = self.module.entry
        ad, bd = a.instruction, b.instruction
        if bd.opcode == "parameter" and bd.parent is entry:
            return False
        if ad.opcode == "parameter" and ad.parent is entry:
            return True
        a_param_phi = a.is_phi and ad.opcode == "parameter"
        b_param_phi = b.is_phi and bd.opcode == "parameter"
        if a_param_phi and not b_param_phi and self._nested(bd, ad.parent):
            return True
        if b_param_phi and self._nested(ad, bd.parent):
            return False
        if b.is_phi and bd.opcode == "while" and (self._nested(ad, bd.attrs["body"])
                                                   or self._nested(ad, bd.attrs["condition"])):
            return True
        if b.is_phi and bd.opcode == "conditional":
            if any(self._nested(ad, c) for c in xla_called_computations(bd)):
                return True
        return self.executes_before(ad, bd)

    def uses_before_value_definition(self, uses: list[HloUse], value: HloValue) -> bool:
        """XLA's UsesBeforeValueDefinition (use_is_always_before_def_in_same_instr=false)."""
        state = {"exclusive": False, "escaped": False}
        return all(self._use_before_definition(use, value, state) for use in uses)

    def _use_before_definition(self, use: HloUse, value: HloValue, state: dict) -> bool:
        user, vdef = use.instruction, value.instruction
        c = self.execution_constraint(user, vdef)
        if c is Constraint.IS_SAME:
            operand = user.operands[use.operand_number]
            if may_write_over_operand(operand, use.operand_index, vdef, value.index):
                return True
        elif c is Constraint.RUN_EXCLUSIVE_AFTER:
            if not state["escaped"]:
                state["exclusive"] = True
                return True
        elif c in _BEFORE:
            return True
        return self._use_before_definition_special(use, value, state)

    def _use_before_definition_special(self, use: HloUse, value: HloValue, state: dict) -> bool:
        """Uses at control flow that logically precede a definition inside it (or a phi after it)."""
        user, vdef = use.instruction, value.instruction
        if user.opcode == "while":
            if self._nested(vdef, user.attrs["body"]):
                return True
            cond = user.attrs["condition"]
            if self._nested(vdef, cond):
                return vdef is cond.parameter(0)
        if vdef.opcode == "while" and (self._nested(user, vdef.attrs["body"])
                                       or self._nested(user, vdef.attrs["condition"])):
            return True
        if user.opcode == "call" and self._nested(vdef, user.attrs["to_apply"]):
            return True
        if user.opcode == "conditional":
            for branch in xla_called_computations(user):
                if not self._nested(vdef, branch):
                    continue
                operand = user.operands[use.operand_number]
                if operand.opcode != "tuple" and not self.dataflow.defines_value(operand, ()):
                    if any(u.instruction.is_root for u in value.uses):
                        state["escaped"] = True
                if not state["exclusive"]:
                    return True
            if vdef is user:
                return True
        return False

    def is_root_of(self, value: HloValue, comp: HloComputation) -> bool:
        return any(p.instruction is comp.root for p in value.positions)


class SequentialHloOrdering(DependencyHloOrdering):
    """XLA's SequentialHloOrdering: the module is scheduled, so within one computation a runs
    before b iff the schedule (here the computation's instruction order) puts a first; across
    computations the rules of the dependency ordering apply unchanged."""

    def __init__(self, module: HloModule, dataflow: HloDataflowAnalysis):
        super().__init__(module, dataflow)
        self._position = {id(i): k for comp in module.computations for k, i in enumerate(comp.instructions)}

    def _before_in_same_computation(self, a: HloInstruction, b: HloInstruction) -> bool:
        return self._position[id(a)] < self._position[id(b)]


def may_write_over_operand(operand: HloInstruction, operand_index, user: HloInstruction, user_index) -> bool:
    """XLA's CanShareOperandBufferWithUser as copy removal sees it: a copy is elementwise in XLA, so
    it may write over its operand (buffer assignment's `sharing` rule keeps copies apart)."""
    if user.opcode == "copy":
        return operand.shape.subshape(operand_index) == user.shape.subshape(user_index)
    return can_share_operand_buffer_with_user(operand, operand_index, user, user_index)
