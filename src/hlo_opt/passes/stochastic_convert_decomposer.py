"""StochasticConvertDecomposer ("stochastic_convert_decomposer"): stochastic-convert of a float to
a signed integer becomes elementwise ops that round |x| up with the probability of its fraction
(XLA's `stochastic_convert_decomposer.cc`).

Runs in the `optimization` pipeline after call-inliner, so the emitters never see the op:

    %r = s8[5] stochastic-convert(f32[5] %x, u32[5] %random)
      =>  frac  = |x| - floor(|x|)                    (converted to f32 first for f16 operands)
          up    = random < convert(frac * 2^bits(random), random type)
          t     = convert(floor(|x|), s8) (+ 1 where up)
          r     = select(sign(x) < 0, -t, t), then min / max of s8 where x <= min or x >= max

The random operand is read as an unsigned fraction of 2^bits: the result rounds up exactly when
`random / 2^bits < frac`. The constants take the element type of the value they meet (so the
limits of a wide target become infinities in f16, as in XLA). Conversions to non-signed-integer
types, which XLA refuses, are left alone (hlo-codegen then names the instruction).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.hlo_creation_utils import (
    make_binary, make_compare, make_convert, make_scalar_like, make_select, make_unary,
)
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass


@register_pass
@dataclass
class StochasticConvertDecomposer(OpExpanderPass):
    """Rewrites stochastic-convert (float -> signed integer) as elementwise ops."""

    name = "stochastic_convert_decomposer"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return (instr.opcode == "stochastic-convert" and instr.shape.is_array
                and instr.shape.element_type.kind == "signed"
                and instr.operands[0].shape.element_type.is_float)

    def expand_instruction(self, instr: HloInstruction) -> HloInstruction:
        operand, random = instr.operands
        to_type = instr.shape.element_type
        sign = make_unary("sign", operand)
        should_neg = make_compare("LT", sign, make_scalar_like(sign, 0))
        magnitude = make_unary("abs", operand)
        truncated_fp = make_unary("floor", magnitude)
        fractional = make_binary("subtract", magnitude, truncated_fp)
        if operand.shape.element_type.name == "f16":  # 2^16 does not fit in f16
            fractional = make_convert(fractional, "f32")
        scale = float(2 ** random.shape.element_type.bits)
        fixed = make_binary("multiply", fractional, make_scalar_like(fractional, scale))
        round_up = make_compare("LT", random, make_convert(fixed, random.shape.element_type))
        truncated = make_convert(truncated_fp, to_type)
        truncated = make_select(round_up, make_binary("add", truncated, make_scalar_like(truncated, 1)),
                                truncated)
        result = make_select(should_neg, make_unary("negate", truncated), truncated)
        lo, hi = -(1 << (to_type.bits - 1)), (1 << (to_type.bits - 1)) - 1
        with np.errstate(over="ignore"):  # a wide limit in f16 is an infinity, as in XLA
            dtype = operand.shape.element_type.np_dtype
            lo_fp, hi_fp = (np.asarray(float(v)).astype(dtype) for v in (lo, hi))
        is_min = make_compare("LE", operand, make_scalar_like(operand, lo_fp))
        result = make_select(is_min, make_scalar_like(result, lo), result)
        is_max = make_compare("GE", operand, make_scalar_like(operand, hi_fp))
        return make_select(is_max, make_scalar_like(result, hi), result)
