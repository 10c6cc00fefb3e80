"""ShardingRemover ("sharding-remover"): the sharding markers of a one-partition program go away.

Where it sits: in the `spmd-partitioner` pipeline, before dce (XLA:GPU runs it when the module
has a single partition, so the SPMD partitioner would have nothing to split). JAX writes
`custom-call(x), custom_call_target="Sharding"` to pin a sharding on a value, the
`SPMDFullToShardShape` / `SPMDShardToFullShape` pair around manual regions, and (jax 0.10,
Shardy) `xla.sdy.FuncResultSharding` on each result (`hlo_common.hlo.annotations`). On one
partition each is its operand, so every user (and the root) reads the operand instead:

    %s = f32[8] custom-call(%x), custom_call_target="Sharding", sharding={replicated}
    ROOT %n = f32[8] negate(%s)
      =>  ROOT %n = f32[8] negate(%x)

A marker whose result shape differs from its operand's (a full-to-shard conversion written for
several partitions) cannot go: the program needs the device count its manual region was written
for, which jax passes in its compile options, not in the HLO, so it is a one-line error asking
for `--num-partitions` (issue 17 item 8). Nothing else is touched. On more than one partition the pass does nothing (spmd-partitioning consumes them).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.annotations import SHARDING_MARKERS
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass
from hlo_opt.spmd.config import num_partitions
from hlo_opt.spmd.errors import SpmdError

@register_pass
@dataclass
class ShardingRemover(OpExpanderPass):
    """Replaces Sharding and SPMD shape-conversion custom calls by their operand."""

    name = "sharding-remover"

    def run(self, module) -> bool:
        if num_partitions(module) > 1:  # the partitioner consumes the markers instead
            return False
        return super().run(module)

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return (instr.opcode == "custom-call" and len(instr.operands) == 1
                and instr.attrs.get("custom_call_target") in SHARDING_MARKERS)

    def expand_instruction(self, instr: HloInstruction) -> HloInstruction | None:
        operand = instr.operands[0]
        if operand.shape.dims != instr.shape.dims or operand.shape.element_type != instr.shape.element_type:
            target = instr.attrs.get("custom_call_target")
            raise SpmdError(f"{target} turns {operand.shape} into {instr.shape}: a manual region for "
                            f"several devices, and the module gives no num_partitions (hlo-opt "
                            f"--num-partitions N)", instr)
        if operand.shape != instr.shape:
            return None
        return operand
