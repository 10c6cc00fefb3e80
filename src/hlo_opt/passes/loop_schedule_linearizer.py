"""LoopScheduleLinearizer ("loop-schedule-linearizer"): control edges that let a while body update
its loop state in place.

Where it sits: `pre-scheduling-copy-insertion`, right before `copy-insertion` (XLA:
`loop_schedule_linearizer.cc`). Copy insertion keeps a loop-state copy whenever some reader of the
old state value is not ordered before the instruction that writes the new one; this pass adds
that order as a control edge (reader before writer) wherever it creates no cycle, so the copy
can go.

For every while loop (whose body has no asynchronous collectives) and every array leaf k of its
state where the body's parameter and root each hold one value (SSA form) and the two differ:
every instruction of the body that reads the parameter's value at k gets a control edge to the
instruction defining the root's value at k, unless it is that instruction, sits in another
computation, or the edge would close a cycle. Declines: loops whose state is passed through
unchanged or is ambiguous.

    %g = f32[8,4] get-tuple-element(%p), index=1
    %s = f32[1,4] slice(%g), ...                       %s = ... slice(%g), ...
    %u = f32[8,4] dynamic-update-slice(%g, ...)   =>   %u = ... dynamic-update-slice(%g, ...),
    ROOT %t = (..., f32[8,4]) tuple(..., %u)                 control-predecessors={%s}
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.analysis.dataflow import HloDataflowAnalysis
from hlo_common.hlo.graph import depth_first
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass

_ASYNC_COLLECTIVE = frozenset({
    "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done", "send", "send-done", "recv", "recv-done",
    "async-start", "async-done",
})


def _reaches(source: HloInstruction, target: HloInstruction) -> bool:
    """Is there a path of users / control successors from `source` to `target`?"""
    return any(node is target
               for node in depth_first([source], lambda node: node.users + node.control_successors))


def _linearize_loop(df: HloDataflowAnalysis, w: HloInstruction) -> bool:
    body = w.attrs["body"]
    root, param = body.root, body.parameter(0)
    changed = False
    for idx in df.array_leaves(w):
        at_root, at_input = df.value_set(root, idx), df.value_set(param, idx)
        if len(at_root) != 1 or len(at_input) != 1 or at_root[0] is at_input[0]:
            continue
        write = at_root[0].instruction
        for use in at_input[0].uses:
            read = use.instruction
            if read is write or read.parent is not write.parent or write in read.control_successors:
                continue
            if _reaches(write, read):
                continue  # the edge would close a cycle: the copy stays
            read.add_control_dependency_to(write)
            changed = True
    return changed


@register_pass
@dataclass
class LoopScheduleLinearizer(HloPass):
    """Adds control edges (old-state readers before the new-state writer) so loop state updates in place."""

    name = "loop-schedule-linearizer"

    def run(self, module: HloModule) -> bool:
        loops = [i for c in module.computations for i in c.instructions if i.opcode == "while"]
        loops = [w for w in loops if not any(i.opcode in _ASYNC_COLLECTIVE
                                             for i in w.attrs["body"].instructions)]
        if not loops:
            return False
        df = HloDataflowAnalysis.run(module, ssa_form=True)
        changed = False
        for w in loops:
            if df.is_global(w.parent):
                changed |= _linearize_loop(df, w)
        return changed

