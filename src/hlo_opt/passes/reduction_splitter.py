"""ReductionSplitter ("reduction-splitter"): a reduce over non-adjacent dimensions that is neither a
row nor a column reduction becomes two reduces, the largest reduced dimension first
(`xla/service/gpu/transforms/reduction_splitter.cc`).

Where it sits: "hlo normalization", as a fixed point after reduction-dimension-grouper (so
reduced dims are never adjacent) and before tree-reduction-rewriter.

    r = f32[8,32]{1,0} reduce(f32[16,8,64,32]{3,2,1,0} x, z), dimensions={0,2}
    becomes
    p = f32[16,8,32]{2,1,0} reduce(x, z), dimensions={2}      the larger (64) dim first
    r = f32[8,32]{1,0} reduce(p, z), dimensions={0}

Declines reductions the emitters already handle (from or to contiguous dims), single-dimension
and variadic reduces, inputs not on the default layout, and (`ignore_small_dims`, on in the GPU
pipeline) reduces whose largest reduced dimension has at most 8 elements.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.layout_util import has_default_layout
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.reduction_utils import is_reduction_from_or_to_contiguous_dimensions, make_reduce

SMALL_DIM = 8


def split_reduction(reduce: HloInstruction, ignore_small_dims: bool) -> bool:
    dims = list(reduce.attrs.get("dimensions", ()))
    if len(dims) < 2 or not reduce.shape.is_array or len(reduce.operands) != 2:
        return False
    operand, init = reduce.operands
    if not has_default_layout(operand.shape) or is_reduction_from_or_to_contiguous_dimensions(reduce):
        return False
    shape = operand.shape
    largest = max(dims, key=lambda d: (shape.dims[d], -dims.index(d)))
    if ignore_small_dims and shape.dims[largest] <= SMALL_DIM:
        return False
    pre_dims = [s for d, s in enumerate(shape.dims) if d != largest]
    pre = make_reduce(reduce, [operand], [init], [largest], reduce.attrs["to_apply"],
                      [Shape.array(reduce.shape.element_type, pre_dims)])
    rest = [d - 1 if d > largest else d for d in dims if d != largest]
    final = make_reduce(reduce, [pre], [init], rest, reduce.attrs["to_apply"], [reduce.shape],
                        name=reduce.name)
    reduce.parent.replace_instruction(reduce, final)
    return True


@register_pass
@dataclass
class ReductionSplitter(HloPass):
    """Reduces over several non-adjacent dims that no emitter handles are split in two."""

    name = "reduction-splitter"
    ignore_small_dims: bool = True

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "reduce" and instr.parent is comp:
                    changed |= split_reduction(instr, self.ignore_small_dims)
        return changed
