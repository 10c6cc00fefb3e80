"""How deep a module's computations call each other, and the limit the tools accept.

Where it sits: the parser checks every module it builds (`check_call_depth`), so each tool
refuses, with FILE:LINE:COL, a module whose calls, fusions, conditionals and while loops nest
deeper than MAX_CALL_DEPTH before any pass, compiler or interpreter walks it. Those walks recurse
once or more per level (the interpreter evaluates a called computation inside its caller; copy
insertion and the dataflow analyses follow values through every level, quadratically or worse in
the depth: 150 nested whiles took hlo-opt 8 s, 300 took 51 s), so a 10,000-deep chain ended in a
Python RecursionError or never finished. The deepest of XLA's own test modules nests 9 levels
(the entry computation counting as one), real models rarely more than 20; MAX_CALL_DEPTH leaves a
wide margin while every tool still handles it in seconds.
"""

from __future__ import annotations

from hlo_common.hlo.ir import COMPUTATION_ATTRS, HloComputation, HloInstruction, HloModule

MAX_CALL_DEPTH = 128


def _callees(instr: HloInstruction) -> list[HloComputation]:
    out = []
    for key in COMPUTATION_ATTRS:
        value = instr.attrs.get(key)
        if value is None:
            continue
        for c in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(c, HloComputation):
                out.append(c)
    return out


def call_depths(module: HloModule) -> dict[int, tuple[int, HloInstruction | None]]:
    """id(computation) -> (levels of computations from it down to its deepest leaf, counting
    itself; the instruction that calls the next computation of that deepest chain). Computed
    without recursion; a computation that calls itself counts once (the verifier refuses it)."""
    depths: dict[int, tuple[int, HloInstruction | None]] = {}
    for comp in module.computations:  # a stack of (computation, expanded?) instead of recursion
        stack = [(comp, False)]
        while stack:
            c, expanded = stack.pop()
            if id(c) in depths:
                continue
            if not expanded:
                stack.append((c, True))
                stack.extend((callee, False) for i in c.instructions for callee in _callees(i)
                             if callee is not c and id(callee) not in depths)
                continue
            best: tuple[int, HloInstruction | None] = (1, None)
            for i in c.instructions:
                for callee in _callees(i):
                    below = depths.get(id(callee), (0, None))[0] if callee is not c else 0
                    if below + 1 > best[0]:
                        best = (below + 1, i)
            depths[id(c)] = best
    return depths


def too_deep_call(module: HloModule, limit: int = MAX_CALL_DEPTH) -> HloInstruction | None:
    """The call instruction at level `limit` of the module's deepest chain of calls (the one
    that opens level limit + 1), or None when the chain is at most `limit` levels deep."""
    if module.entry is None:
        return None
    depths = call_depths(module)
    depth, via = depths[id(module.entry)]
    if depth <= limit:
        return None
    comp, level = module.entry, 1
    while via is not None and level < limit:
        comp = next(c for c in _callees(via) if depths.get(id(c), (0, None))[0] == depths[id(comp)][0] - 1)
        via = depths[id(comp)][1]
        level += 1
    return via
