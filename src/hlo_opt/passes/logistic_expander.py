"""LogisticExpander ("logistic-expander"): logistic(x) becomes 1 / (1 + exp(-x)).

Runs in the `optimization` pipeline, so the emitters never see a logistic:

    %l = f32[4] logistic(%x)
      =>
    %one = f32[4] broadcast(f32[] constant(1)), dimensions={}
    %l = f32[4] divide(%one, add(%one, exponential(negate(%x))))

Every logistic of a non-fusion computation is expanded (XLA's only expansion type, kExp); the
constant takes the operand's element type. Nothing else is touched.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.hlo_creation_utils import make_binary, make_scalar_like, make_unary
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass


@register_pass
@dataclass
class LogisticExpander(OpExpanderPass):
    """Rewrites logistic(x) as 1 / (1 + exp(-x))."""

    name = "logistic-expander"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return instr.opcode == "logistic"

    def expand_instruction(self, instr: HloInstruction) -> HloInstruction:
        operand = instr.operands[0]
        one = make_scalar_like(operand, 1.0)
        exp = make_unary("exponential", make_unary("negate", operand))
        return make_binary("divide", one, make_binary("add", one, exp))
