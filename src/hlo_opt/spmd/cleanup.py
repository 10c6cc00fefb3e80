"""Dead code the partitioner leaves in the per-device entry: a value handled for a consumer that
then read around it (a concatenate reading the array its slices cut, so the uneven slices' own
all-gathers go unused). HloDCE keeps collectives as side effects; these are the partitioner's own,
made for a value nobody reads, so they go too. Calls and custom calls (shard_map bodies with the
user's collectives) and everything else with a side effect stay."""

from __future__ import annotations

from hlo_common.hlo.hlo_utils import has_side_effect
from hlo_common.hlo.ir import HloComputation

OWN_COLLECTIVES = frozenset({"all-gather", "all-reduce", "all-to-all", "collective-permute",
                             "reduce-scatter"})


def remove_dead(comp: HloComputation) -> None:
    for instr in reversed(comp.post_order()):
        if instr is comp.root or instr.users or instr.opcode == "parameter" or instr.control_successors:
            continue
        if instr.opcode in OWN_COLLECTIVES or not has_side_effect(instr):
            comp.remove_instruction(instr)
