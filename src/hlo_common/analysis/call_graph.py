"""Call contexts and XLA's orders (computation and instruction post orders, flattened sequences).

Buffer assignment (and hlo-opt's copy insertion and scheduler) need three facts about the call graph, as XLA's `CallGraph` and
`GatherComputationsByAllocationType` give them:

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
from hlo_common.ir import HloComputation, HloInstruction, HloModule

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
    order: list[HloInstruction] = []
    state: dict[int, int] = {}  # id -> 1 visiting, 2 visited
    for start in comp.instructions:
        if start.users:
            continue
        stack = [start]
        while stack:
            node = stack[-1]
            st = state.get(id(node))
            if st is not None:
                stack.pop()
                if st == 1:
                    state[id(node)] = 2
                    order.append(node)
                continue
            state[id(node)] = 1
            for op in reversed(node.operands):
                if id(op) not in state:
                    stack.append(op)
            for op in node.control_predecessors:
                if id(op) not in state:
                    stack.append(op)
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
    order: list[HloComputation] = []
    added: set[int] = set()

    def visit(comp: HloComputation) -> None:
        stack = [(comp, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if id(node) in added:
                continue
            added.add(id(node))
            stack.append((node, True))
            callees = [c for i in node.instructions for c in xla_called_computations(i)]
            for c in reversed(callees):
                if id(c) not in added:
                    stack.append((c, False))

    for comp in module.computations:
        if id(comp) not in called:
            visit(comp)
    for comp in module.computations:  # computations only reachable through cycles (invalid HLO)
        if id(comp) not in added:
            visit(comp)
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
