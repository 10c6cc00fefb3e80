"""TreeReductionRewriter ("tree-reduction-rewriter"): a reduction too large for the race-free
reduction emitters becomes two reductions (`xla/service/gpu/transforms/tree_reduction_rewriter.cc`).

Where it sits: last pass of "hlo normalization", as a fixed point after the reduction normalizers
(inputs have default layouts, adjacent reduced dims are grouped, reduced dims are contiguous).
Race-free bounds (reduction_utils): row reductions up to 16384 minor elements and 8 batch rows,
column reductions up to 4096 reduced rows.

    r = f32[] reduce(f32[100003]{0} x, z), dimensions={0}            row reduction of 100003
    becomes
    p = f32[100005]{0} pad(x, z), padding=0_2                        k1 * k2 >= n, least padding
    b = f32[295,339]{1,0} bitcast(p)                                 [k1, k2] (swapped if better)
    i = f32[295]{0} reduce(b, z), dimensions={1}
    r = f32[] reduce(i, z), dimensions={0}

Split size: k2 near sqrt(n), capped at the race-free bound, chosen in (k2/2, k2] for the least
padding (then a power of two), k1 = ceil(n / k2); the pair is swapped when XLA's heuristic says
the larger inner reduction vectorizes better. A row reduction whose batch (major reduced) part
exceeds 8 first reduces its minor dim, then dim 0. Padding uses the init value, which the
reduction treats as its identity. Declines race-free reductions, reductions the emitters do not
handle as row/column reductions, and inputs not on the default layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hlo_common.hlo.attributes import PaddingConfig
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.layout_util import delete_dimensions, has_default_layout, make_bitcast
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.reduction_utils import (
    BATCHED_REDUCTION_RACE_FREE_BOUND, ReductionDimensions, is_reduction_from_or_to_contiguous_dimensions,
    make_reduce, reduce_inits, reduce_inputs, reduce_output_shapes, reduction_dimension_race_free_bound,
    reduction_dimensions, reduction_is_race_free,
)


def should_swap(k1: int, k2: int, n: int, bound: int, is_row: bool) -> bool:
    """XLA's ShouldSwapInnerAndOuterReducedMinorDimension (k1 >= k2)."""
    if k1 > bound:
        return False
    if is_row:
        if k2 % 2 == 0 and n % 2 == 0:
            return k2 * 2 < k1 or k1 % 2 == 0
        return n % 2 == 0 or k1 % 2 != 0
    return True


def split_params(n: int, dims: ReductionDimensions) -> tuple[int, int]:
    """(k1, k2) with k1 * k2 >= n: the split of a reduced dimension of n elements."""
    bound = reduction_dimension_race_free_bound(dims)
    k2 = min(math.isqrt(n), bound)
    min_pad = (k2 - n % k2) % k2
    best_k1 = (n + min_pad) // k2
    for i in range(k2 - 1, k2 // 2, -1):
        pad = (i - n % i) % i
        if pad < min_pad or (pad == min_pad and i & (i - 1) == 0):
            min_pad, best_k1 = pad, (n + pad) // i
    padded = n + min_pad
    best_k2 = padded // best_k1
    if should_swap(best_k1, best_k2, n, bound, dims.is_row):
        best_k1, best_k2 = best_k2, best_k1
    return best_k1, best_k2


def _pad_inputs(reduce: HloInstruction, inputs: list[HloInstruction], dim: int,
                size: int) -> list[HloInstruction]:
    out = []
    for x, init in zip(inputs, reduce_inits(reduce)):
        n = x.shape.dims[dim]
        if n == size:
            out.append(x)
            continue
        config = PaddingConfig(tuple((0, size - n if d == dim else 0, 0) for d in range(x.shape.rank)))
        dims = tuple(size if d == dim else s for d, s in enumerate(x.shape.dims))
        shape = Shape.array(x.shape.element_type, dims)
        out.append(reduce.parent.add_new_instruction("pad", [x, init], shape, {"padding": config},
                                                     before=reduce))
    return out


def split_reduction_dimension(reduce: HloInstruction, dims: ReductionDimensions, reduced: list[int]) -> None:
    """pad -> bitcast to [.., k1, k2, ..] -> inner reduce (k2 and the other reduced dims) -> outer (k1)."""
    inputs = reduce_inputs(reduce)
    split = reduced[-1]
    n = inputs[0].shape.dims[split]
    k1, k2 = split_params(n, dims)
    padded = _pad_inputs(reduce, inputs, split, k1 * k2)
    shape = padded[0].shape.dims
    reshaped_dims = shape[:split] + (k1, k2) + shape[split + 1:]
    reshaped = [make_bitcast(p, Shape.array(p.shape.element_type, reshaped_dims), before=reduce)
                for p in padded]
    inner_dims = [d + 1 if d == split else d for d in reduced]
    inner_shape = tuple(s for d, s in enumerate(reshaped_dims) if d not in inner_dims)
    outer_dim = split - inner_dims.index(split + 1)
    inner = make_reduce(reduce, reshaped, reduce_inits(reduce), inner_dims, reduce.attrs["to_apply"],
                        [Shape.array(x.shape.element_type, inner_shape) for x in inputs])
    operands = [inner] if not inner.shape.is_tuple else _elements(inner, reduce)
    outer = make_reduce(reduce, operands, reduce_inits(reduce), [outer_dim], reduce.attrs["to_apply"],
                        reduce_output_shapes(reduce), name=reduce.name)
    reduce.parent.replace_instruction(reduce, outer)


def _elements(tup: HloInstruction, before: HloInstruction) -> list[HloInstruction]:
    return [tup.parent.add_new_instruction("get-tuple-element", [tup], s, {"index": i}, before=before)
            for i, s in enumerate(tup.shape.tuple_shapes)]


def split_batch_dimension(reduce: HloInstruction, reduced: list[int]) -> None:
    """XLA's RewriteBatchDimensionLargerThanTile: reduce the minor reduced dim, then dim 0."""
    inputs = reduce_inputs(reduce)
    minor = reduced[-1]
    inner = make_reduce(reduce, inputs, reduce_inits(reduce), [minor], reduce.attrs["to_apply"],
                        [delete_dimensions(x.shape, [minor]).with_default_layouts() for x in inputs])
    operands = [inner] if not inner.shape.is_tuple else _elements(inner, reduce)
    outer = make_reduce(reduce, operands, reduce_inits(reduce), [0], reduce.attrs["to_apply"],
                        reduce_output_shapes(reduce), name=reduce.name)
    reduce.parent.replace_instruction(reduce, outer)


def rewrite_reduction(reduce: HloInstruction) -> bool:
    inputs = reduce_inputs(reduce)
    if not all(has_default_layout(x.shape) for x in inputs):
        return False
    if not is_reduction_from_or_to_contiguous_dimensions(reduce):
        return False
    dims = reduction_dimensions(reduce)
    if reduction_is_race_free(dims):
        return False
    reduced = sorted(reduce.attrs.get("dimensions", ()))
    if len(reduced) > 2:
        return False
    if dims.is_row and dims.dims[0] > BATCHED_REDUCTION_RACE_FREE_BOUND:
        split_batch_dimension(reduce, reduced)
    else:
        split_reduction_dimension(reduce, dims, reduced)
    return True


@register_pass
@dataclass
class TreeReductionRewriter(HloPass):
    """Reductions beyond the race-free limits become an inner and an outer reduction."""

    name = "tree-reduction-rewriter"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "reduce" and instr.parent is comp:
                    changed |= rewrite_reduction(instr)
        return changed
