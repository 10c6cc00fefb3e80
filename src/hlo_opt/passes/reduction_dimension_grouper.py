"""ReductionDimensionGrouper ("reduction-dimension-grouper"): adjacent reduced dimensions are merged
into one (`xla/service/gpu/transforms/reduction_dimension_grouper.cc`).

Where it sits: "hlo normalization", after reduction-layout-normalizer (it needs default-layout
inputs) and before reduction-splitter and tree-reduction-rewriter.

    r = f32[4]{0} reduce(f32[4,8,16]{2,1,0} x, z), dimensions={1,2}
    becomes
    b = f32[4,128]{1,0} bitcast(x)
    r = f32[4]{0} reduce(b, z), dimensions={1}

Declines reduces without two adjacent reduced dims and reduces whose inputs are not on the
default layout (XLA checks that as an invariant).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.layout_util import has_default_layout, make_bitcast
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.reduction_utils import make_reduce, reduce_inits, reduce_inputs, reduce_output_shapes


def grouped_dims(dims: tuple[int, ...], reduced: set[int]) -> tuple[list[int], list[int]] | None:
    """(new dims, new reduced dims) with runs of adjacent reduced dims merged; None if none."""
    new_dims, new_reduced, run, merged = [], [], 1, False
    for d, size in enumerate(dims):
        if d in reduced and d + 1 < len(dims) and d + 1 in reduced:
            run *= size
            merged = True
            continue
        if d in reduced:
            new_dims.append(run * size)
            new_reduced.append(len(new_dims) - 1)
            run = 1
        else:
            new_dims.append(size)
    return (new_dims, new_reduced) if merged else None


def group_reduce_dimensions(reduce: HloInstruction) -> bool:
    inputs = reduce_inputs(reduce)
    if not all(has_default_layout(x.shape) for x in inputs):
        return False
    grouping = grouped_dims(inputs[0].shape.dims, set(reduce.attrs.get("dimensions", ())))
    if grouping is None:
        return False
    new_dims, new_reduced = grouping
    new_inputs = [make_bitcast(x, Shape.array(x.shape.element_type, new_dims), before=reduce) for x in inputs]
    new = make_reduce(reduce, new_inputs, reduce_inits(reduce), new_reduced, reduce.attrs["to_apply"],
                      reduce_output_shapes(reduce), name=reduce.name)
    reduce.parent.replace_instruction(reduce, new)
    return True


@register_pass
@dataclass
class ReductionDimensionGrouper(HloPass):
    """Runs of adjacent reduced dimensions become one dimension."""

    name = "reduction-dimension-grouper"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "reduce" and instr.parent is comp:
                    changed |= group_reduce_dimensions(instr)
        return changed
