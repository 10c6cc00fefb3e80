"""ReduceScatterCombiner ("reduce-scatter-combiner"): independent reduce-scatters over the same
groups, dimension, reducer and element type become one reduce-scatter of a tuple
(xla/service/reduce_scatter_combiner.cc; grouping and threshold: `hlo_opt.collective_combiner_utils`).

Where it sits: last of the three combiners in the `post-fusion optimization` pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.collective_combiner_utils import DEFAULT_THRESHOLD_BYTES, combine_module, group_key
from hlo_opt.passes.all_reduce_combiner import reduction_key


@register_pass
@dataclass
class ReduceScatterCombiner(HloPass):
    """reduce-scatter, reduce-scatter (independent, alike) -> reduce-scatter of a tuple."""

    name = "reduce-scatter-combiner"
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES

    def run(self, module: HloModule) -> bool:
        def key(instr: HloInstruction):
            reduction = reduction_key(instr)
            if reduction is None:
                return None
            return group_key(instr) + (reduction, instr.shape.element_type.name,
                                       tuple(instr.attrs.get("dimensions") or ()))

        return combine_module(module, "reduce-scatter", key, self.threshold_bytes)
