"""AllReduceCombiner ("all-reduce-combiner"): independent all-reduces over the same groups with the
same reduction and element type become one all-reduce of a tuple (xla/service/all_reduce_combiner.cc;
the grouping and the byte threshold: `hlo_opt.collective_combiner_utils`).

Where it sits: the `post-fusion optimization` pipeline, after the all-gather combiner and before
the reduce-scatter combiner, as gpu_compiler.cc's RunPostFusionPasses orders them; one collective
then pays one launch and one synchronization instead of several. (XLA:GPU then also flattens the
combined operands into one contiguous buffer, AllReduceContiguous; that pass is not written: the
runtime issues one call per operand of a combined all-reduce.)
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.collective_combiner_utils import DEFAULT_THRESHOLD_BYTES, combine_module, group_key


def reduction_key(instr: HloInstruction) -> tuple | None:
    """The reducer as text without names (`add` of two f32 scalars), so two copies of one
    reduction region match."""
    comp = instr.attrs.get("to_apply")
    if comp is None:
        return None
    return tuple((i.opcode, i.shape.to_string(), tuple(comp.instructions.index(o) for o in i.operands))
                 for i in comp.instructions)


@register_pass
@dataclass
class AllReduceCombiner(HloPass):
    """all-reduce, all-reduce (independent, same groups and reducer) -> all-reduce of a tuple."""

    name = "all-reduce-combiner"
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES

    def run(self, module: HloModule) -> bool:
        def key(instr: HloInstruction):
            reduction = reduction_key(instr)
            if reduction is None:
                return None
            return group_key(instr) + (reduction, instr.shape.element_type.name)

        return combine_module(module, "all-reduce", key, self.threshold_bytes)
