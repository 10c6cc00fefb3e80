"""AllReduceSimplifier ("all-reduce-simp"): collectives in which every device meets only
itself do nothing but copy (xla/service/all_reduce_simplifier.cc): an all-reduce, an all-gather or
a reduce-scatter over groups of one device, for the module's replica and partition counts, is
replaced by its operand (a reshape where the shapes' dims differ only by size-1 dims, as a
gather of one piece does). XLA also folds an all-reduce of a value its replication analysis
proves equal on every device; that analysis is not written here.

Where it sits: first in the `collective-optimizations` pipeline, after SPMD partitioning (which
writes a collective over a mesh axis of size 1 where a sharding leaves one).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.errors import HloError
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.replica_groups import device_groups
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.passes.single_device_collectives import module_devices

SIMPLIFIED = ("all-reduce", "all-gather", "reduce-scatter")


@register_pass
@dataclass
class AllReduceSimplifier(HloPass):
    """all-reduce / all-gather / reduce-scatter among one device -> its operand."""

    name = "all-reduce-simp"

    def run(self, module: HloModule) -> bool:
        replicas, partitions = module_devices(module)
        changed = False
        for comp in non_fusion_computations(module):
            for instr in [i for i in comp.instructions if i.opcode in SIMPLIFIED]:
                if _alone(instr, replicas, partitions):
                    changed |= _replace(instr)
        return changed


def _alone(instr: HloInstruction, replicas: int, partitions: int) -> bool:
    if len(instr.operands) != 1 or not instr.shape.is_array:
        return False
    try:
        groups = device_groups(instr, replicas, partitions)
    except (ValueError, HloError):  # groups the verifier did not check: leave the op alone
        return False
    return all(len(g) == 1 for g in groups)


def _replace(instr: HloInstruction) -> bool:
    operand, comp = instr.operands[0], instr.parent
    if operand.shape.dims == instr.shape.dims:
        if operand.shape.to_string() != instr.shape.to_string():
            return False  # another layout: leave it to the copy the collective makes
        comp.replace_instruction(instr, operand, remove_dead_operands=False)
        return True
    if operand.shape.num_elements != instr.shape.num_elements:
        return False
    reshape = comp.add_new_instruction("reshape", [operand], instr.shape)
    comp.replace_instruction(instr, reshape, remove_dead_operands=False)
    return True
