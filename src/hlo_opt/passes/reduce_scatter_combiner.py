"""ReduceScatterCombiner ("reduce-scatter-combiner"): independent reduce-scatters over the same
groups, dimension, reducer and element type become one reduce-scatter of a tuple
(xla/service/reduce_scatter_combiner.cc; grouping and threshold: `hlo_opt.collective_combiner_utils`).

Where it sits: last of the three combiners in the `post-fusion optimization` pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.collective_combiner_utils import DEFAULT_THRESHOLD_BYTES, combine_module, reducing_key


@register_pass
@dataclass
class ReduceScatterCombiner(HloPass):
    """reduce-scatter, reduce-scatter (independent, alike) -> reduce-scatter of a tuple."""

    name = "reduce-scatter-combiner"
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES

    def run(self, module: HloModule) -> bool:
        return combine_module(module, "reduce-scatter", lambda i: reducing_key(i, True), self.threshold_bytes)
