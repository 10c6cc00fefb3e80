"""Replacing many instructions in one pass without paying a list removal for each.

`HloComputation.remove_instruction` deletes from the instruction list (linear in its length), so
a pass that replaces k instructions one at a time costs O(k * n). The passes of the
`optimization` pipeline replace through a `DeferredRemoval` instead: uses are redirected at once,
the replaced instructions (and the operands that die with them) are removed in one sweep per
computation at the end (`HloComputation.remove_instructions`).

    removal = DeferredRemoval()
    for dot in dots:
        removal.replace(dot, canonical(dot))
    removal.finish()
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.hlo_utils import has_side_effect, inherit_attributes, relay_control_dependencies


class DeferredRemoval:
    """Redirects uses now; removes dead replaced instructions and their dead operands later."""

    def __init__(self) -> None:
        self._seeds: dict[int, tuple[HloComputation, list[HloInstruction]]] = {}

    def replace(self, old: HloInstruction, new: HloInstruction) -> None:
        """XLA's ReplaceInstruction minus the immediate removal: metadata, frontend attributes and
        sharding move to `new` where it has none, control dependencies are relayed."""
        inherit_attributes(old, new)
        relay_control_dependencies(old, new)
        old.replace_all_uses_with(new)
        self.forget(old)

    def forget(self, instr: HloInstruction) -> None:
        """Mark `instr` as a removal candidate (removed at `finish` if nothing uses it then)."""
        comp = instr.parent
        self._seeds.setdefault(id(comp), (comp, []))[1].append(instr)

    def finish(self) -> None:
        for comp, seeds in self._seeds.values():
            remove_dead(comp, seeds)
        self._seeds = {}


def remove_dead(comp: HloComputation, seeds: list[HloInstruction]) -> None:
    """Remove the `seeds` nobody uses and, transitively, operands left unused (never parameters,
    the root, instructions with control dependencies, or side-effecting operands)."""
    seed_ids = {id(s) for s in seeds}
    dead: set[int] = set()
    order: list[HloInstruction] = []
    work = list(reversed(seeds))
    while work:
        instr = work.pop()
        if id(instr) in dead or instr.parent is not comp or instr is comp.root or instr.opcode == "parameter":
            continue
        if instr.control_predecessors or instr.control_successors:
            continue
        if any(id(u) not in dead for u in instr.users):
            continue
        if id(instr) not in seed_ids and has_side_effect(instr):
            continue
        dead.add(id(instr))
        order.append(instr)
        work.extend(reversed(list(dict.fromkeys(instr.operands))))
    comp.remove_instructions(order)
