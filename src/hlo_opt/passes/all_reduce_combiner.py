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

from hlo_common.hlo.ir import HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.collective_combiner_utils import DEFAULT_THRESHOLD_BYTES, combine_module, reducing_key


@register_pass
@dataclass
class AllReduceCombiner(HloPass):
    """all-reduce, all-reduce (independent, same groups and reducer) -> all-reduce of a tuple."""

    name = "all-reduce-combiner"
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES

    def run(self, module: HloModule) -> bool:
        return combine_module(module, "all-reduce", lambda i: reducing_key(i, False), self.threshold_bytes)
