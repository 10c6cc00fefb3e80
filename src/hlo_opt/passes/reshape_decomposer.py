"""ReshapeDecomposer ("reshape-decomposer"): every reshape becomes a bitcast-compatible reshape, with
physical transposes (copies) around it where layouts require them
(`xla/hlo/transforms/simplifiers/reshape_decomposer.cc`).

Where it sits: first pass of "layout normalization" (and again in "hlo normalization" and
"post-layout_assignment"), so that layout_normalization may assume every reshape is a bitcast.

    r = f32[6,4]{1,0} reshape(f32[4,6]{0,1} p)        not a bitcast: memory holds p column-major
    becomes
    c = f32[4,6]{1,0} copy(p)                          physical transpose to a layout that aligns
    r = f32[6,4]{1,0} reshape(c)                       now a bitcast

In XLA's order of preference: leave a reshape that is already a bitcast; copy the operand into the
layout that aligns with the result; reshape into a result layout aligned with the operand and copy
that into the result's layout; else copy both sides through the default layout.
Declines (changes nothing) on modules whose reshapes are all bitcasts.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.layout_util import align_layouts, make_copy, reshape_is_bitcast
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def decompose_reshape(reshape: HloInstruction) -> bool:
    operand = reshape.operands[0]
    out, src = reshape.shape, operand.shape
    if reshape_is_bitcast(src, out):
        return False
    comp = reshape.parent
    aligned_input = align_layouts(out, src)
    if aligned_input is not None:
        reshape.replace_operand(0, make_copy(operand, aligned_input, before=reshape))
        return True
    aligned_output = align_layouts(src, out)
    if aligned_output is not None:
        new = comp.add_new_instruction("reshape", [operand], aligned_output, name=reshape.name,
                                       before=reshape)
        comp.replace_instruction(reshape, make_copy(new, out, before=reshape))
        return True
    first = make_copy(operand, src.with_default_layouts(), before=reshape)
    new = comp.add_new_instruction("reshape", [first], out.with_default_layouts(), name=reshape.name,
                                   before=reshape)
    comp.replace_instruction(reshape, make_copy(new, out, before=reshape))
    return True


@register_pass
@dataclass
class ReshapeDecomposer(HloPass):
    """Reshapes that are not bitcasts become copy + bitcast-reshape (+ copy)."""

    name = "reshape-decomposer"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "reshape" and instr.parent is comp and instr.shape.is_array:
                    changed |= decompose_reshape(instr)
        return changed
