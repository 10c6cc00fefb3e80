"""OpExpanderPass (XLA's `op_expander_pass.h`): the base of the passes that replace one kind of
instruction by a graph of simpler ones (`logistic-expander`, `batchnorm_expander`,
`select-and-scatter-expander`, `gather_expander`, `rng-expander`, ...).

A subclass says which instructions it wants (`instruction_matches_pattern`) and builds the
replacement next to the instruction (`expand_instruction`, returning the new root or None to
decline). The base collects every match of the non-fusion computations first, then expands them
one by one and replaces each with its expansion (control dependencies relayed); the old
instructions and their now-dead operands are removed together at the end. No class here is
registered: it is not a pass.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.deferred_removal import DeferredRemoval
from hlo_common.hlo_pass.pass_base import HloPass


class OpExpanderPass(HloPass):
    """Expands every instruction that `instruction_matches_pattern` into `expand_instruction`'s graph."""

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:  # pragma: no cover
        raise NotImplementedError

    def expand_instruction(self, instr: HloInstruction) -> HloInstruction | None:  # pragma: no cover
        raise NotImplementedError

    def run(self, module: HloModule) -> bool:
        matches = [instr for comp in non_fusion_computations(module) for instr in comp.post_order()
                   if self.instruction_matches_pattern(instr)]
        changed = False
        removal = DeferredRemoval()
        for instr in matches:
            if instr.parent is None:
                continue
            new_root = self.expand_instruction(instr)
            if new_root is None:
                continue
            if new_root is not instr:
                removal.replace(instr, new_root)
            changed = True
        removal.finish()
        return changed
