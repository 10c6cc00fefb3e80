"""ReductionDegenerateDimRemover ("reduction-degenerate-dim-remover"): size-1 dimensions are dropped
from reduce inputs and results (`xla/service/gpu/transforms/reduction_degenerate_dim_remover.cc`).

Where it sits: "hlo normalization", after layout_normalization and before the other reduction
normalizers, so that the reduction emitters see only dimensions that matter.

    r = f32[1,8]{1,0} reduce(f32[1,8,1,16]{3,2,1,0} x, z), dimensions={2,3}
    becomes
    b = f32[8,16]{1,0} bitcast(x)
    r' = f32[8]{0} reduce(b, z), dimensions={1}
    r = f32[1,8]{1,0} bitcast(r')

Dropping a size-1 dim keeps the physical order, so the bitcasts move no data. A reduce over
size-1 dims only becomes a bitcast of its input (the init value is assumed to be the reducer's
identity, as XLA assumes). Declines reduces whose inputs have no size-1 dims.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.layout_util import drop_degenerate_dimensions, make_bitcast
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.reduction_utils import (
    bitcast_outputs, make_reduce, reduce_inits, reduce_inputs, reduce_output_shapes,
)


def remove_degenerate_dims(reduce: HloInstruction) -> bool:
    inputs, out_shapes = reduce_inputs(reduce), reduce_output_shapes(reduce)
    shape = inputs[0].shape
    if not shape.is_array or 1 not in shape.dims:
        return False
    reduced = set(reduce.attrs.get("dimensions", ()))
    kept_reduced, shift = [], 0
    for d in range(shape.rank):
        if shape.dims[d] == 1:
            shift += 1
        elif d in reduced:
            kept_reduced.append(d - shift)
    comp = reduce.parent
    if not kept_reduced:
        parts = [make_bitcast(x, s, before=reduce) for x, s in zip(inputs, out_shapes)]
        result = parts[0] if len(parts) == 1 else comp.add_new_instruction(
            "tuple", parts, Shape.tuple_of(out_shapes), before=reduce)
        comp.replace_instruction(reduce, result)
        return True
    new_inputs = [make_bitcast(x, drop_degenerate_dimensions(x.shape), before=reduce) for x in inputs]
    new_shapes = [drop_degenerate_dimensions(s) for s in out_shapes]
    new = make_reduce(reduce, new_inputs, reduce_inits(reduce), kept_reduced, reduce.attrs["to_apply"],
                      new_shapes, name=reduce.name)
    comp.replace_instruction(reduce, bitcast_outputs(new, out_shapes, before=reduce))
    return True


@register_pass
@dataclass
class ReductionDegenerateDimRemover(HloPass):
    """Reduces lose their size-1 dimensions (bitcasts around them)."""

    name = "reduction-degenerate-dim-remover"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "reduce" and instr.parent is comp:
                    changed |= remove_degenerate_dims(instr)
        return changed
