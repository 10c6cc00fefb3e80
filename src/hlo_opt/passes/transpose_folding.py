"""TransposeFolding ("transpose-folding"): a transpose feeding a dot or a convolution becomes part
of its dimension numbers.

Runs in every `simplification` round (dots with XLA:GPU's rule, convolutions always), after it,
and in `hlo normalization`. For a dot operand, the operand's batch and contracting dimensions are
mapped through the transpose and the dot reads the transpose's input:

    %t = f32[3,2] transpose(f32[2,3] %x), dimensions={1,0}
    %d = f32[3,4] dot(%t, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      =>  %d = f32[3,4] dot(%x, %y), lhs_contracting_dims={0}, rhs_contracting_dims={0}

XLA:GPU's rule (`CanFoldTransposeOperandIntoDot`): the operand's non-contracting dimensions keep
their relative order through the transpose, and in the transpose input's layout the batch,
contracting and non-contracting groups each lie physically together (in order) with the batch
group not the most minor, so a GEMM can still read it. Dots with an operand of rank below 2 and
identity transposes are left alone. For convolutions the input's batch/feature/spatial (and the
kernel's feature/spatial) dimension labels are mapped through the transpose. Options:
`fold_dots`, `fold_convolutions` (XLA's `NeverFoldTranspose` for either when False).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.attributes import ConvDimensionNumbers
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.deferred_removal import DeferredRemoval
from hlo_common.hlo_pass.pass_base import HloPass, register_pass

_SIDES = ("lhs", "rhs")


def is_non_identity_transpose(instr: HloInstruction) -> bool:
    return instr.opcode == "transpose" and tuple(instr.attrs["dimensions"]) != tuple(range(instr.shape.rank))


def _dot_dims(dot: HloInstruction, side: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    a = dot.attrs
    return tuple(a.get(f"{side}_batch_dims", ())), tuple(a.get(f"{side}_contracting_dims", ()))


def _physical_groups_ok(minor_to_major: tuple[int, ...], groups: list[tuple[int, ...]]) -> bool:
    """GetBatchRowColumnShape + MatrixLayout::For: each group (batch, rows, cols) contiguous in the
    layout in its own order, and the batch group not the most minor one."""
    order: list[int] = []
    i = 0
    while i < len(minor_to_major):
        dim = minor_to_major[i]
        for g, dims in ((1, groups[1]), (2, groups[2]), (0, groups[0])):
            if dims and dim == dims[-1]:
                if tuple(reversed(dims)) != tuple(minor_to_major[i:i + len(dims)]):
                    return False
                order.append(g)
                i += len(dims)
                break
        else:
            return False
    order += [g for g in (2, 1, 0) if not groups[g]]
    return order[0] != 0


def can_fold_transpose_operand_into_dot(dot: HloInstruction, index: int) -> bool:
    """XLA:GPU's CanFoldTransposeOperandIntoDot."""
    transpose = dot.operands[index]
    perm = transpose.attrs["dimensions"]
    batch, contracting = _dot_dims(dot, _SIDES[index])
    non_contracting = [d for d in range(transpose.shape.rank) if d not in batch and d not in contracting]
    moved = [perm[d] for d in non_contracting]
    if sorted(range(len(moved)), key=lambda k: moved[k]) != list(range(len(moved))):
        return False
    source = transpose.operands[0].shape
    groups = [tuple(perm[d] for d in batch), tuple(perm[d] for d in contracting), tuple(moved)]
    return _physical_groups_ok(source.minor_to_major, groups)


def fold_into_dot(dot: HloInstruction, indices: list[int], removal: DeferredRemoval) -> None:
    operands = list(dot.operands)
    attrs = dict(dot.attrs)
    for k in indices:
        perm = operands[k].attrs["dimensions"]
        for kind in ("batch", "contracting"):
            key = f"{_SIDES[k]}_{kind}_dims"
            if key in attrs:
                attrs[key] = tuple(perm[d] for d in attrs[key])
        operands[k] = operands[k].operands[0]
    new = dot.clone_with_new_operands(operands)
    new.attrs = attrs
    new.name = dot.parent.unique_name(dot.name)
    dot.parent.add_instruction(new)
    removal.replace(dot, new)


def dim_labels(batch: int, feature: int, spatial: tuple[int, ...], letters: str) -> str:
    chars = [""] * (len(spatial) + 2)
    chars[batch], chars[feature] = letters[0], letters[1]
    for k, d in enumerate(spatial):
        chars[d] = str(k)
    return "".join(chars)


def fold_into_convolution(conv: HloInstruction, indices: list[int], removal: DeferredRemoval) -> None:
    dn: ConvDimensionNumbers = conv.attrs["dim_labels"]
    inp = (dn.input_batch, dn.input_feature, dn.input_spatial)
    ker = (dn.kernel_input_feature, dn.kernel_output_feature, dn.kernel_spatial)
    operands = list(conv.operands)
    if 0 in indices:
        p = operands[0].attrs["dimensions"]
        inp = (p[inp[0]], p[inp[1]], tuple(p[d] for d in inp[2]))
        operands[0] = operands[0].operands[0]
    if 1 in indices:
        p = operands[1].attrs["dimensions"]
        ker = (p[ker[0]], p[ker[1]], tuple(p[d] for d in ker[2]))
        operands[1] = operands[1].operands[0]
    out = dim_labels(dn.output_batch, dn.output_feature, dn.output_spatial, "bf")
    text = f"{dim_labels(*inp, 'bf')}_{dim_labels(*ker, 'io')}->{out}"
    new = conv.clone_with_new_operands(operands)
    new.attrs["dim_labels"] = ConvDimensionNumbers.parse(text)
    new.name = conv.parent.unique_name(conv.name)
    conv.parent.add_instruction(new)
    removal.replace(conv, new)


@register_pass
@dataclass
class TransposeFolding(HloPass):
    """Folds transposes of dot and convolution operands into their dimension numbers."""

    name = "transpose-folding"
    fold_dots: bool = True
    fold_convolutions: bool = True

    def run(self, module: HloModule) -> bool:
        dots, convs = [], []
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "dot" and self.fold_dots and "sparsity" not in instr.attrs \
                        and all(op.shape.rank >= 2 for op in instr.operands[:2]):
                    indices = [k for k in (0, 1) if is_non_identity_transpose(instr.operands[k])
                               and can_fold_transpose_operand_into_dot(instr, k)]
                    if indices:
                        dots.append((instr, indices))
                elif instr.opcode == "convolution" and self.fold_convolutions:
                    indices = [k for k in (0, 1) if instr.operands[k].opcode == "transpose"]
                    if indices:
                        convs.append((instr, indices))
        removal = DeferredRemoval()
        for dot, indices in dots:
            fold_into_dot(dot, indices, removal)
        for conv, indices in convs:
            fold_into_convolution(conv, indices, removal)
        removal.finish()
        return bool(dots or convs)
