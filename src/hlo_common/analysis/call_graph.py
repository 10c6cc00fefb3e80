"""Call contexts and XLA's orders (computation and instruction post orders, flattened sequences).

Buffer assignment (and hlo-opt's copy insertion and scheduler) need three facts about the call
graph, as XLA's `CallGraph` and `GatherComputationsByAllocationType` give them:

- which computations are *global* (the entry and everything reached through `while`, `call`,
  `conditional` and async wrappers: their values get device buffers) and which are *embedded*
  (fusion bodies, reducers, sort comparators, scatter combiners, ...: evaluated inside a kernel,
  no buffers);
- XLA's post orders, which fix the ids of `HloValue`s (`MakeComputationPostOrder`,
  `MakeInstructionPostOrder`), so ids in our dumps match XLA's for modules without control flow;
- the instruction sequence of each global computation: the text order when the module says
  `is_scheduled=true`, otherwise the IR's deterministic `post_order()`.

    >>> contexts = computation_contexts(module)          # doctest: +SKIP
    >>> contexts[module.entry]
    'global'
"""

from __future__ import annotations

from hlo_common.errors import HloError
from hlo_common.hlo.graph import post_order
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule

GLOBAL = "global"
EMBEDDED = "embedded"

# Opcodes whose called computations run as sequential control flow on the host side; everything
# else that calls a computation (fusion, reduce, sort, scatter, map, custom-call, all-reduce, ...)
# runs it inside a kernel.
CONTROL_FLOW_CALLERS = frozenset({"while", "call", "conditional"})
# Async wrappers: their wrapped computation is executed as one operation (treated as embedded: the
# async-start/done pair owns the buffers).
ASYNC_OPCODES = frozenset({"async-start", "async-update", "async-done"})


def xla_called_computations(instr: HloInstruction) -> list[HloComputation]:
    """Called computations in XLA's order (a while lists its body before its condition)."""
    if instr.opcode == "while":
        return [instr.attrs["body"], instr.attrs["condition"]]
    if instr.opcode == "conditional":
        if "branch_computations" in instr.attrs:
            return list(instr.attrs["branch_computations"])
        return [instr.attrs["true_computation"], instr.attrs["false_computation"]]
    return instr.called_computations()


def branch_computations(instr: HloInstruction) -> list[HloComputation]:
    return xla_called_computations(instr)


def xla_instruction_post_order(comp: HloComputation) -> list[HloInstruction]:
    """XLA's `MakeInstructionPostOrder`: DFS from each user-less instruction in text order,
    first operand first, control predecessors before operands."""
    def deps(node: HloInstruction) -> list[HloInstruction]:  # visited last to first
        return list(reversed(node.control_predecessors)) + node.operands

    order = post_order([i for i in comp.instructions if not i.users], deps)
    if len(order) != len(comp.instructions):  # unreachable cycles cannot happen in valid HLO
        seen = {id(i) for i in order}
        order.extend(i for i in comp.instructions if id(i) not in seen)
    return order


def xla_computation_post_order(module: HloModule) -> list[HloComputation]:
    """XLA's `MakeComputationPostOrder`: callees before callers, starting from uncalled computations
    in module order."""
    called: set[int] = set()
    for comp in module.computations:
        for instr in comp.instructions:
            called.update(id(c) for c in xla_called_computations(instr))

    def callees(comp: HloComputation) -> list[HloComputation]:
        return [c for i in comp.instructions for c in xla_called_computations(i)]

    added: set[int] = set()
    order = post_order([c for c in module.computations if id(c) not in called], callees, added)
    # computations only reachable through cycles (invalid HLO)
    order += post_order(module.computations, callees, added)
    return order


def computation_contexts(module: HloModule) -> dict[HloComputation, str]:
    """GLOBAL or EMBEDDED for every computation reachable from the entry (unreachable ones are
    absent). Raises HloError when a computation is both, or when a control-flow computation has
    more than one call site (XLA requires a flattened call graph)."""
    contexts: dict[HloComputation, str] = {module.entry: GLOBAL}
    call_sites: dict[int, int] = {}
    work = [module.entry]
    while work:
        comp = work.pop()
        ctx = contexts[comp]
        for instr in comp.instructions:
            for callee in xla_called_computations(instr):
                sequential = instr.opcode in CONTROL_FLOW_CALLERS and ctx == GLOBAL
                if instr.opcode in CONTROL_FLOW_CALLERS and ctx == EMBEDDED:
                    raise HloError(f"computation {comp.name} calls %{instr.name} ({instr.opcode}) but runs "
                                   "inside a kernel; control flow needs a global computation")
                want = GLOBAL if sequential else EMBEDDED
                if sequential:
                    call_sites[id(callee)] = call_sites.get(id(callee), 0) + 1
                    if call_sites[id(callee)] > 1:
                        raise HloError(f"computation {callee.name} is called from more than one "
                                       "while/call/conditional; buffer assignment needs a flattened "
                                       "call graph (clone the computation per call site)")
                have = contexts.get(callee)
                if have is None:
                    contexts[callee] = want
                    work.append(callee)
                elif have != want:
                    raise HloError(f"computation {callee.name} is called both as control flow and "
                                   "inside a kernel (conflicting allocation requirements)")
    return contexts


def instruction_sequence(comp: HloComputation, is_scheduled: bool) -> list[HloInstruction]:
    """The order instructions of a global computation run in."""
    return list(comp.instructions) if is_scheduled else comp.post_order()


class CallGraph:
    """Where each global computation is called from (XLA's `CallGraph`, control-flow part) in a
    module whose call graph is flattened: every while/call/conditional computation has exactly
    one call site. Answers nesting questions: `ancestor_in(instr, comp)` is `instr` itself, or
    the instruction of `comp` that (transitively) runs it."""

    def __init__(self, module: HloModule):
        self.module = module
        self.contexts = computation_contexts(module)
        self.caller: dict[HloComputation, HloInstruction] = {}
        self.depth: dict[HloComputation, int] = {module.entry: 0}
        work = [module.entry]
        while work:
            comp = work.pop()
            for instr in comp.instructions:
                if instr.opcode not in CONTROL_FLOW_CALLERS:
                    continue
                for callee in xla_called_computations(instr):
                    if callee not in self.caller:
                        self.caller[callee] = instr
                        self.depth[callee] = self.depth[comp] + 1
                        work.append(callee)

    def is_global(self, comp: HloComputation) -> bool:
        return self.contexts.get(comp) == GLOBAL

    def ancestor_in(self, instr: HloInstruction, comp: HloComputation) -> HloInstruction | None:
        """`instr`, or the call site in `comp` that runs it; None when `instr` is not nested in `comp`."""
        while instr.parent is not comp:
            site = self.caller.get(instr.parent)
            if site is None:
                return None
            instr = site
        return instr

    def is_nested_in(self, instr: HloInstruction, comp: HloComputation) -> bool:
        return self.ancestor_in(instr, comp) is not None

    def nearest_ancestors(self, a: HloInstruction, b: HloInstruction
                          ) -> tuple[HloInstruction, HloInstruction] | tuple[None, None]:
        """XLA's NearestAncestorsInSameComputation: the call sites (or the instructions themselves)
        of `a` and `b` that sit in one computation, or (None, None) if their chains never meet."""
        da, db = self.depth.get(a.parent), self.depth.get(b.parent)
        if da is None or db is None:
            return None, None
        while da > db:
            a, da = self.caller[a.parent], da - 1
        while db > da:
            b, db = self.caller[b.parent], db - 1
        while a.parent is not b.parent:
            if a.parent not in self.caller or b.parent not in self.caller:
                return None, None
            a, b = self.caller[a.parent], self.caller[b.parent]
        return a, b
