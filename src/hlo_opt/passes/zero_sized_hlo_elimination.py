"""ZeroSizedHloElimination ("zero_sized_hlo_elimination"): zero-element arrays become constants.

Runs first in the pipeline (before SPMD partitioning), in `optimization` and at the start of every
`simplification` round. An array with no elements carries no data, so whatever computes it can
be replaced by an empty constant of the same shape and layout, and its operands may die:

    %s = f32[0,4]{1,0} slice(%p), slice={[0:0], [0:4]}   =>   %s = f32[0,4]{1,0} constant({})

Declines: constants, parameters, tuples and tokens, dynamic shapes, side-effecting instructions,
instructions with control dependencies, the instructions of fusion computations (XLA runs it on
non-fusion computations only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.shape import Layout
from hlo_common.hlo.hlo_utils import (
    computation_callers,
    fusion_instruction_of,
    has_side_effect,
    is_safely_removable,
    replace_instruction,
)
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def is_eliminable(instr: HloInstruction) -> bool:
    shape = instr.shape
    return (shape.is_array and shape.num_elements == 0 and not shape.is_dynamic
            and instr.opcode != "constant" and is_safely_removable(instr)
            and not has_side_effect(instr))


def empty_constant(instr: HloInstruction) -> HloInstruction:
    shape = instr.shape
    if shape.layout is None:
        shape = shape.with_layout(Layout.default(shape.rank))
    const = HloInstruction(instr.name, "constant", shape)
    const.literal = np.zeros(shape.dims, dtype=shape.element_type.np_dtype)
    return const


@register_pass
@dataclass
class ZeroSizedHloElimination(HloPass):
    """Replaces zero-element array instructions (outside fusions) by empty constants."""

    name = "zero_sized_hlo_elimination"

    def run(self, module: HloModule) -> bool:
        callers = computation_callers(module)
        changed = False
        for comp in module.computations:
            if fusion_instruction_of(comp, callers) is not None:
                continue
            for instr in comp.post_order():
                if instr.parent is not comp or not is_eliminable(instr):
                    continue
                const = empty_constant(instr)
                instr.name = comp.unique_name(instr.name + ".zero_sized")
                comp.add_instruction(const, before=instr)
                if replace_instruction(instr, const):
                    changed = True
                else:
                    comp.remove_instruction(const)
                    instr.name = const.name
        return changed
