"""AllGatherCombiner ("all-gather-combiner"): independent all-gathers over the same groups along the
same dimension become one all-gather of a tuple (xla/service/all_gather_combiner.cc with
combine_by_dim; the grouping and the byte threshold: `hlo_opt.collective_combiner_utils`).

Where it sits: first of the three combiners in the `post-fusion optimization` pipeline (XLA:GPU's
RunPostFusionPasses). Element types may differ, as XLA:GPU allows. Gathers along different
dimensions stay apart: XLA without combine_by_dim would first move each gathered dimension to the
front; that rewrite is not written.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.collective_combiner_utils import DEFAULT_THRESHOLD_BYTES, combine_module, group_key


@register_pass
@dataclass
class AllGatherCombiner(HloPass):
    """all-gather, all-gather (independent, same groups and dimension) -> all-gather of a tuple."""

    name = "all-gather-combiner"
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES

    def run(self, module: HloModule) -> bool:
        def key(instr: HloInstruction):
            return group_key(instr) + (tuple(instr.attrs.get("dimensions") or ()),)

        return combine_module(module, "all-gather", key, self.threshold_bytes)
