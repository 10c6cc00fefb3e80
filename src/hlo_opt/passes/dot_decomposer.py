"""DotDecomposer ("dot_decomposer"): every dot in the canonical form the GEMM paths expect.

Runs in the `optimization` pipeline, right after dot_dimension_sorter. Canonical means: batch
dimensions first and numbered 0..n-1 on both sides, exactly one contracting dimension, and at most
one non-contracting dimension per operand. Any other dot gets its operands transposed (batch,
non-contracting, contracting for the lhs; batch, contracting, non-contracting for the rhs) and
reshaped so the non-contracting and the contracting dimensions each become one (a non-contracting
product of 1 is dropped); a reshape brings the result back to the original shape:

    %d = f32[2,3,5] dot(f32[2,3,4,6] %a, f32[4,6,5] %b),
         lhs_contracting_dims={2,3}, rhs_contracting_dims={0,1}
      =>  %d' = f32[6,5] dot(f32[6,24] reshape(transpose(%a)), f32[24,5] reshape(transpose(%b))),
                lhs_contracting_dims={1}, rhs_contracting_dims={0};  reshape(%d') to f32[2,3,5]

The transposes are added even when they are the identity (algsimp removes them). Dots already
canonical, and dots of fusion computations, are left alone; the precision config is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import make_dot, non_fusion_computations
from hlo_opt.deferred_removal import DeferredRemoval
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def is_canonical(shape: Shape, contracting, batch) -> bool:
    if len(contracting) != 1 or len(batch) + 2 < shape.rank:
        return False
    return tuple(batch) == tuple(range(len(batch)))


def canonicalize_operand(operand: HloInstruction, batch, contracting,
                         contracting_most_minor: bool) -> tuple[HloInstruction, int]:
    """transpose + reshape to [batch..., nc, c] (or [batch..., c, nc]); returns it and its contracting dim."""
    comp = operand.parent
    dims = operand.shape.dims
    non_contracting = [i for i in range(len(dims)) if i not in contracting and i not in batch]
    c_size = nc_size = 1
    for i in contracting:
        c_size *= dims[i]
    for i in non_contracting:
        nc_size *= dims[i]
    if contracting_most_minor:
        middle = non_contracting + list(contracting)
    else:
        middle = list(contracting) + non_contracting
    perm = list(batch) + middle
    transpose = comp.add_new_instruction("transpose", [operand], attrs={"dimensions": tuple(perm)})
    transpose.metadata = list(operand.metadata)
    new_dims = [dims[b] for b in batch]
    nc = [nc_size] if nc_size != 1 else []
    if contracting_most_minor:
        contracting_dim = len(batch) + len(nc)
        new_dims += nc + [c_size]
    else:
        contracting_dim = len(batch)
        new_dims += [c_size] + nc
    new_shape = Shape.array(operand.shape.element_type, new_dims)
    reshape = comp.add_new_instruction("reshape", [transpose], new_shape)
    reshape.metadata = list(transpose.metadata)
    return reshape, contracting_dim


def _dims(dot: HloInstruction, side: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(batch dims, contracting dims) of one side of a dot."""
    a = dot.attrs
    return tuple(a.get(f"{side}_batch_dims", ())), tuple(a.get(f"{side}_contracting_dims", ()))


def canonicalize_dot(dot: HloInstruction, removal: DeferredRemoval) -> None:
    a = dot.attrs
    n_batch = len(a.get("lhs_batch_dims", ()))
    lhs, lc = canonicalize_operand(dot.operands[0], *_dims(dot, "lhs"), contracting_most_minor=True)
    rhs, rc = canonicalize_operand(dot.operands[1], *_dims(dot, "rhs"), contracting_most_minor=False)
    attrs = {k: v for k, v in a.items() if not k.endswith("_dims")}  # precision, algorithm, ...
    attrs.update({"lhs_contracting_dims": (lc,), "rhs_contracting_dims": (rc,)})
    if n_batch:
        attrs["lhs_batch_dims"] = attrs["rhs_batch_dims"] = tuple(range(n_batch))
    new_dot = make_dot(lhs, rhs, attrs, dot.shape.element_type)
    new_dot.metadata = list(dot.metadata)
    new_dot.frontend_attributes = list(dot.frontend_attributes)
    new_dot.backend_config_data = dot.backend_config_data
    reshape = dot.parent.add_new_instruction("reshape", [new_dot], dot.shape)
    removal.replace(dot, reshape)


def _needs_canonicalizing(dot: HloInstruction) -> bool:
    lhs_batch, lhs_contracting = _dims(dot, "lhs")
    rhs_batch, rhs_contracting = _dims(dot, "rhs")
    return not (is_canonical(dot.operands[0].shape, lhs_contracting, lhs_batch)
                and is_canonical(dot.operands[1].shape, rhs_contracting, rhs_batch))


@register_pass
@dataclass
class DotDecomposer(HloPass):
    """Rewrites dots into canonical form (batch, one non-contracting, one contracting dimension)."""

    name = "dot_decomposer"

    def run(self, module: HloModule) -> bool:
        dots = [i for c in non_fusion_computations(module) for i in c.instructions
                if i.opcode == "dot" and len(i.operands) == 2 and _needs_canonicalizing(i)]
        removal = DeferredRemoval()
        for dot in dots:
            canonicalize_dot(dot, removal)
        removal.finish()
        return bool(dots)
