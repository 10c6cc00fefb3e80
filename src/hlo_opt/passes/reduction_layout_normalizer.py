"""ReductionLayoutNormalizer ("reduction-layout-normalizer"): reduce inputs get the default layout by
reinterpreting them in physical order (`xla/service/gpu/transforms/reduction_layout_normalizer.cc`).

Where it sits: "hlo normalization", after reduction-degenerate-dim-remover and before
reduction-dimension-grouper / reduction-splitter / tree-reduction-rewriter, which all assume
default-layout reduce inputs.

    r = f32[16]{0} reduce(f32[16,32]{0,1} x, z), dimensions={1}
    becomes
    b = f32[32,16]{1,0} bitcast(x)             the dims of x in physical (major to minor) order
    r = f32[16]{0} reduce(b, z), dimensions={0}

The new reduce's result gets the layout under which it is a bitcast of the old result (the
default one when the old result kept the input's order of kept dims). Inputs of a variadic reduce
whose layout differs from the first input's are copied to it first. Declines reduces whose inputs
already have default layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.layout_util import make_bitcast, make_copy, physical_order, with_minor_to_major
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.reduction_utils import (
    bitcast_outputs, make_reduce, reduce_inits, reduce_inputs, reduce_output_shapes,
)


def _normalized_operand(operand: Shape, out: Shape, reduced: list[int]) -> tuple[Shape, Shape, list[int]]:
    """(default-layout input shape, result shape with its bitcast-compatible layout, new dims)."""
    out_physical = {d: k for k, d in enumerate(physical_order(out))}  # logical -> physical position
    new_dims, new_reduced, new_out_dims = [], [], []
    out_m2m = [0] * out.rank
    for i, d in enumerate(physical_order(operand)):
        new_dims.append(operand.dims[d])
        if d in reduced:
            new_reduced.append(i)
            continue
        new_out_dims.append(operand.dims[d])
        logical_out = d - sum(1 for r in reduced if r < d)
        out_m2m[out.rank - out_physical[logical_out] - 1] = len(new_out_dims) - 1
    new_in = Shape.array(operand.element_type, new_dims)
    new_out = with_minor_to_major(Shape.array(out.element_type, new_out_dims), out_m2m)
    return new_in, new_out, new_reduced


def normalize_reduce_layout(reduce: HloInstruction) -> bool:
    inputs, out_shapes = reduce_inputs(reduce), reduce_output_shapes(reduce)
    if not all(x.shape.is_array for x in inputs):
        return False
    reduced = list(reduce.attrs.get("dimensions", ()))
    first = inputs[0].shape
    new_inputs, new_shapes, new_reduced = [], [], None
    for x, out in zip(inputs, out_shapes):
        if x.shape.minor_to_major != first.minor_to_major:
            x = make_copy(x, with_minor_to_major(x.shape, first.minor_to_major), before=reduce)
        new_in, new_out, dims = _normalized_operand(x.shape, out, reduced)
        new_inputs.append(x if new_in == x.shape else make_bitcast(x, new_in, before=reduce))
        new_shapes.append(new_out)
        new_reduced = dims
    if new_inputs == list(inputs) and new_shapes == out_shapes:
        return False
    new = make_reduce(reduce, new_inputs, reduce_inits(reduce), new_reduced, reduce.attrs["to_apply"],
                      new_shapes, name=reduce.name)
    reduce.parent.replace_instruction(reduce, bitcast_outputs(new, out_shapes, before=reduce))
    return True


@register_pass
@dataclass
class ReductionLayoutNormalizer(HloPass):
    """Reduce inputs are reinterpreted in physical order so that they have default layouts."""

    name = "reduction-layout-normalizer"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "reduce" and instr.parent is comp:
                    changed |= normalize_reduce_layout(instr)
        return changed
