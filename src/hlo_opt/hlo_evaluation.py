"""Compile-time evaluation of small HLO expressions with the reference interpreter (XLA's
`HloEvaluator::TryEvaluate` / `Evaluate` with substitutions).

`constant_folding` evaluates an instruction whose operands are constants (or broadcasts of them,
or iotas); the while-loop analysis evaluates a loop condition and an induction-variable update
with the variable's current value substituted for its get-tuple-element. Both walk the operand
graph back to constants, evaluating each instruction once with the interpreter's handler.

    >>> value = try_evaluate(instr)                         # None when it cannot be evaluated
    >>> value = try_evaluate(cond_root, {id(indvar_gte): np.int32(3)})
"""

from __future__ import annotations

from typing import Any

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloInstruction

_NEVER = frozenset({"parameter", "rng", "rng-get-and-update-state", "rng-bit-generator", "after-all",
                    "infeed", "recv", "recv-done", "send", "send-done", "custom-call", "while"})


def try_evaluate(instr: HloInstruction, substitutions: dict[int, Any] | None = None,
                 evaluator: Any = None, max_instructions: int = 10_000) -> Any:
    """The value of `instr` computed from constants (and `substitutions`: id(instruction) -> value),
    or None when something on the way is not a constant expression or the interpreter fails."""
    from hlo_common.interpreter import Evaluator

    ev = evaluator or Evaluator()
    subs = substitutions or {}
    values: dict[int, Any] = {}
    order: list[HloInstruction] = []
    stack = [(instr, False)]
    seen: set[int] = set()
    while stack:  # post order over the operands not already known
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen or id(node) in subs:
            continue
        seen.add(id(node))
        if node.opcode in _NEVER or (node.opcode == "constant" and node.literal_unknown):
            return None
        if len(seen) > max_instructions:
            return None
        stack.append((node, True))
        stack.extend((op, False) for op in reversed(node.operands))
    if ev.module is None and instr.parent is not None:
        ev.module = instr.parent.parent
    try:
        for node in order:
            operands = [subs[id(op)] if id(op) in subs else values[id(op)] for op in node.operands]
            values[id(node)] = node.literal if node.opcode == "constant" else \
                ev.evaluate_instruction(node, operands)
    except (HloError, MemoryError, RecursionError):
        return None
    return subs.get(id(instr), values.get(id(instr)))
