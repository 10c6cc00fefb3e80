"""Post-scheduling copy insertion ("post-scheduling-copy-insertion"): copy removal again, now that
the module has its one schedule (XLA's `RunPostSchedulingCopyInsertion` in `gpu_compiler.cc`, a
step of the compiler rather than a named pass there).

Where it sits: right after `hlo-memory-scheduler`, before the post-scheduling passes. Pre-scheduling
`copy-insertion` may only remove a copy when no order the scheduler could pick lets two values of
one buffer overlap; with the schedule fixed, `SequentialHloOrdering` (each computation's
instruction order) decides instead, and more copies go. The typical case is a while loop whose
body permutes its state (jax's threefry loop rotates three key words and swaps two arrays of
rotation counts every round): copy insertion copies each permuted element at the body's start
and end, and only the schedule shows which of those copies have no overlap to guard.

As XLA: `RemoveUnnecessaryCopies` with the sequential ordering, then `AddSpecialCaseCopies`
(entry results that are constants, read-only parameters or one buffer twice) and HloDCE. The
schedule stays the instruction order: removed copies leave it, special-case copies sit right
after the value they copy. A copy the special cases put back where it was (a loop's constant
init) keeps its name, and the pass then reports no change.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.analysis.call_graph import CallGraph
from hlo_common.hlo.ir import HloComputation, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.passes.copy_insertion import add_special_case_copies
from hlo_opt.passes.copy_remover import remove_unnecessary_copies
from hlo_opt.passes.dce import HloDCE


@register_pass
@dataclass
class PostSchedulingCopyInsertion(HloPass):
    """Removes the copies the module's schedule makes unnecessary (XLA's RunPostSchedulingCopyInsertion)."""

    name = "post-scheduling-copy-insertion"

    def run(self, module: HloModule) -> bool:
        graph = CallGraph(module)
        comps = [c for c in module.computations if graph.is_global(c)]
        if not any(i.opcode == "copy" for c in comps for i in c.instructions):
            return False
        before, names = _structure(comps), [[i.name for i in c.instructions] for c in comps]
        remove_unnecessary_copies(module, sequential=module.is_scheduled)
        add_special_case_copies(module)
        HloDCE().run(module)
        if _structure(comps) != before:
            return True
        for comp, old in zip(comps, names):  # the copies put back get their old names back
            for instr, name in zip(comp.instructions, old):
                if instr.name != name:
                    instr.name = name
        return False


def _structure(comps: list[HloComputation]) -> list:
    """Opcodes, operands and control edges by position: a copy removed and added back where it
    was (a loop's constant init, copied again as a special case) is no change."""
    out = []
    for comp in comps:
        pos = {id(i): k for k, i in enumerate(comp.instructions)}
        out.append((pos[id(comp.root)], [
            (i.opcode, [pos.get(id(o), -1) for o in i.operands],
             sorted(pos.get(id(p), -1) for p in i.control_predecessors)) for i in comp.instructions]))
    return out
