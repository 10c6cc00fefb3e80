"""Helpers the shared passes (`hlo_common.passes`) have in common: which computations run as
kernels' callers (the global ones), and the physical order of an array's dimensions."""

from __future__ import annotations

from hlo_common.ir import HloComputation, HloModule
from hlo_common.shape import Shape

CONTROL_FLOW = frozenset({"while", "conditional", "call"})


def global_computations(module: HloModule) -> list[HloComputation]:
    """The entry and every computation it runs as control flow (while, conditional, call)."""
    out: list[HloComputation] = []
    seen: set[int] = set()
    work = [module.entry]
    while work:
        comp = work.pop()
        if id(comp) in seen:
            continue
        seen.add(id(comp))
        out.append(comp)
        for instr in comp.instructions:
            if instr.opcode in CONTROL_FLOW:
                work.extend(reversed(instr.called_computations()))
    return out


def physical_order(shape: Shape) -> list[int]:
    """The non-degenerate dimensions of an array shape, major to minor in memory."""
    return [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]
