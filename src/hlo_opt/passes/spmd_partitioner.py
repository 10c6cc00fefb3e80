"""SpmdPartitioner ("spmd-partitioning"): the entry computation, sharded by sharding-propagation,
rewritten as the program each of the N partitions runs (xla/service/spmd/spmd_partitioner.cc,
dot_handler.cc; the GSPMD paper, arXiv 2105.04663).

Where it sits: in the `spmd-partitioner` pipeline after sharding-propagation, only when the module
has num_partitions > 1. Every value becomes its per-device tile (parameters take their local
shapes, the `sharding=` kept as XLA keeps it), and each instruction is handled by its kind
(`hlo_opt.spmd.handlers`): its operands are resharded to the layout it needs
(`hlo_opt.spmd.reshard`: all-to-all, dynamic-slice at partition-id offsets, all-gather) and it
runs on the local shapes; a dot picks the iteration-space tiling that moves the fewest bytes and
all-reduces partial sums over a sharded contraction; a reduce over sharded dims combines the
partial results with an all-reduce of its reducer. An op without a handler yet runs whole on
every device on replicated operands, which is correct if not fast. The root is resharded to its
sharding, which the new root keeps so that runners can gather the results.

The bodies, conditions and branches of the entry's loops and conditionals are partitioned too
(`hlo_opt.spmd.control_handlers`); other called computations are kept (they run whole inside
the ops that call them); `Sharding` custom calls in them become their operands, as on one
partition. Collectives the partitioner made for values nobody reads are removed
(`hlo_opt.spmd.cleanup`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.hlo_computation import HloComputation
from hlo_common.hlo.ir import HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.spmd.builder import SpmdBuilder
from hlo_opt.spmd.cleanup import remove_dead
from hlo_opt.spmd.config import needs_partitioning, num_partitions
from hlo_opt.spmd.handlers import Partitioner


@register_pass
@dataclass
class SpmdPartitioner(HloPass):
    """Rewrites the sharded entry computation into the per-partition program."""

    name = "spmd-partitioning"

    def run(self, module: HloModule) -> bool:
        if not needs_partitioning(module):
            return False
        n = num_partitions(module)
        old = module.entry
        new = HloComputation(f"{old.name}_spmd")
        module.add_computation(new)
        partitioner = Partitioner(SpmdBuilder(module, new, n))
        params = sorted(old.parameters, key=lambda p: p.parameter_number)
        for instr in params + [i for i in old.post_order() if i.opcode != "parameter"]:
            partitioner.handle(instr)
        new.root = partitioner.root(old.root)
        new.root.sharding = old.root.sharding
        remove_dead(new)
        module.add_computation(new, entry=True)
        module.remove_computation(old)
        params = sorted(new.parameters, key=lambda p: p.parameter_number)
        module.entry_computation_layout = ([p.shape for p in params], new.root.shape)
        _strip_sharding_calls(module)
        return True


def _strip_sharding_calls(module: HloModule) -> None:
    for comp in module.computations:
        if comp is module.entry:
            continue
        for instr in list(comp.instructions):
            if instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == "Sharding" \
                    and len(instr.operands) == 1 and instr.operands[0].shape == instr.shape:
                comp.replace_instruction(instr, instr.operands[0])
