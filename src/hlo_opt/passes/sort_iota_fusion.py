"""SortIotaFusion ("sort-iota-fusion"): a sort that reads iotas computes them in its own kernel.

Where it sits: the `fusion` pipeline, right before priority fusion (XLA's
`xla/service/gpu/transforms/sort_iota_fusion.cc`, added in `fusion_pipeline.cc`). `jnp.argsort`
and the stable-sort tie-breaker sort an iota beside the keys; without this pass the iota is a
loop kernel of its own whose output the sort reads back. Every sort of a computation that is
not a fusion body with at least one iota operand is wrapped in a kCustom fusion (XLA's sort
fusion: no backend config; hlo-codegen's sort emitter takes it, the fusion analysis sees the
sort root) and each distinct iota operand is fused into it. An iota with other users stays for
them; one that only the sort read is removed.

    %i = s32[1024,1024] iota(), iota_dimension=1
    %s = (f32[1024,1024], s32[1024,1024]) sort(%x, %i), dimensions={1}, to_apply=%cmp
      =>
    %fused_computation { %param_0 = f32[1024,1024] parameter(0)
                         %i.1 = s32[1024,1024] iota(), iota_dimension=1
                         ROOT %s.1 = (..) sort(%param_0, %i.1), dimensions={1}, to_apply=%cmp }
    %fusion = (..) fusion(%x), kind=kCustom, calls=%fused_computation

Priority fusion and multi-output fusion leave kCustom fusions alone, so nothing else joins the
sort (as in XLA).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.fusion.fusion_utils import FusionEditor


def iota_operands(sort: HloInstruction) -> list[HloInstruction]:
    """The sort's distinct iota operands, in operand order."""
    return list(dict.fromkeys(o for o in sort.operands if o.opcode == "iota"))


@register_pass
@dataclass
class SortIotaFusion(HloPass):
    """Sorts with iota operands become kCustom fusions that compute the iotas themselves."""

    name = "sort-iota-fusion"

    def run(self, module: HloModule) -> bool:
        sorts = [i for comp in non_fusion_computations(module) for i in comp.post_order()
                 if i.opcode == "sort" and iota_operands(i)]
        if not sorts:
            return False
        editor = FusionEditor(module)
        for sort in sorts:
            iotas = iota_operands(sort)
            fusion = editor.wrap_in_fusion(sort, "kCustom")
            for iota in iotas:
                editor.fuse_producer_into_consumer(iota, fusion)
        editor.flush()
        return True
