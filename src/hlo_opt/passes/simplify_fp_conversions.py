"""SimplifyFPConversions ("simplify-fp-conversions"): a chain of two or more floating-point converts
becomes one convert, or none when it ends in the type it started from (XLA's
`simplify_fp_conversions.cc`).

Where it sits: the end of `post-layout_assignment`, after `float-normalization-bf16` and algsimp;
XLA:GPU runs it because `xla_allow_excess_precision` is on by default. It is what gives fused code
f32 intermediates for bf16: a bf16 result that float normalization converted back to bf16 only to
be converted to f32 again by the next op is read in f32 directly.

    %a = bf16[8] convert(f32[8] %x)
    %b = f32[8] convert(%a)                =>   users of %b read %x
    %c = f16[8] convert(%b)                =>   %c = f16[8] convert(%x)

A chain is followed through converts whose result is a floating-point type; its start may be of
any type (XLA's rule). Every computation is visited, callees first, instructions in post order.
The dropped rounding makes results *more* precise than the module asked for, which is what
"excess precision" allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule


def _is_float_convert(instr: HloInstruction) -> bool:
    return instr.opcode == "convert" and instr.shape.is_array and instr.shape.element_type.is_float


def simplify_computation(comp: HloComputation) -> bool:
    changed = False
    for instr in comp.post_order():
        if instr.parent is not comp or not _is_float_convert(instr):
            continue
        source, length = instr, 0
        while _is_float_convert(source):
            source = source.operands[0]
            length += 1
        if length < 2:
            continue
        if source.shape.is_array and source.shape.element_type is instr.shape.element_type:
            comp.replace_instruction(instr, source)
        else:
            new = HloInstruction(comp.unique_name("convert"), "convert", instr.shape, [source])
            new.metadata = list(instr.metadata)
            comp.replace_instruction(instr, new)
        changed = True
    return changed


@register_pass
@dataclass
class SimplifyFPConversions(HloPass):
    """Chains of floating-point converts shortened to one convert (or none)."""

    name = "simplify-fp-conversions"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computation_post_order():
            changed |= simplify_computation(comp)
        return changed
