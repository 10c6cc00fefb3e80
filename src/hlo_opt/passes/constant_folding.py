"""HloConstantFolding ("constant_folding"): instructions computed from constants become constants.

Runs in every `simplification` round and after convolution canonicalization. The value is
computed at compile time by the reference interpreter (XLA uses its HloEvaluator):

    %c = f32[2] constant({1, 2})
    %b = f32[2] broadcast(f32[] constant(3)), dimensions={}
    %a = f32[2] add(%c, %b)                     =>   %a.1 = f32[2] constant({4, 5})

An instruction is folded (XLA's default level) when at least one operand is a constant and every
operand is a constant, a broadcast of a constant or an iota (looking through tuple operands).
Declines, as XLA does: parameters, constants and tuples themselves; broadcasts and iotas (they
would turn a scalar into a big constant), fft, while loops, pads of a broadcast; anything with a
side effect, rng or after-all (also inside called computations, whose instructions must all be
foldable), async ops on another execution thread, instructions with control dependencies, arrays
of more than 45 million elements (result or operands together), dead instructions, constants
whose values the text left out (`{...}`), and whatever the interpreter cannot evaluate. Folded
instructions' operands that die with them are removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.hlo_evaluation import try_evaluate
from hlo_opt.deferred_removal import DeferredRemoval
from hlo_common.hlo.hlo_utils import has_control_dependencies, has_side_effect
from hlo_common.hlo_pass.pass_base import HloPass, register_pass

MAX_CONSTANT_ELEMENTS = 45 * 1000 * 1000  # XLA's kMaximumConstantSizeElements
_NEVER_FOLDED = frozenset({"broadcast", "iota", "fft", "while"})
_ILLEGAL_INSIDE = frozenset({"rng", "after-all"})
_NOT_FOLDED_THEMSELVES = frozenset({"parameter", "constant", "tuple"})


def any_operand_constant(instr: HloInstruction) -> bool:
    return any(any_operand_constant(op) if op.opcode == "tuple" else op.opcode == "constant"
               for op in instr.operands)


def all_operands_constant_like(instr: HloInstruction) -> bool:
    """Every operand is a constant, a broadcast of one, an iota, or a tuple of such."""
    for op in instr.operands:
        if op.opcode == "tuple":
            if not all_operands_constant_like(op):
                return False
        elif not (op.opcode in ("constant", "iota")
                  or (op.opcode == "broadcast" and op.operands[0].opcode == "constant")):
            return False
    return True


def _too_big(instr: HloInstruction) -> bool:
    if not instr.shape.is_array:
        return False
    operand_elements = sum(op.shape.num_elements for op in instr.operands if op.shape.is_array)
    return max(instr.shape.num_elements, operand_elements) > MAX_CONSTANT_ELEMENTS


class _Foldability:
    """IsFoldable with the per-computation verdicts cached (each callee is walked once)."""

    def __init__(self) -> None:
        self.computations: dict[int, bool] = {}

    def computation_foldable(self, comp: HloComputation) -> bool:
        verdict = self.computations.get(id(comp))
        if verdict is None:
            self.computations[id(comp)] = False  # guards against recursion
            verdict = all(self.is_foldable(i) for i in comp.post_order())
            self.computations[id(comp)] = verdict
        return verdict

    def is_foldable(self, instr: HloInstruction) -> bool:
        if instr.opcode in _NEVER_FOLDED or instr.opcode in _ILLEGAL_INSIDE:
            return False
        if instr.opcode in ("async-start", "async-update", "async-done"):
            thread = instr.attrs.get("async_execution_thread", "main")
            if thread != (instr.parent.execution_thread or "main"):
                return False
        if not all(self.computation_foldable(c) for c in instr.called_computations()):
            return False
        if has_side_effect(instr) or has_control_dependencies(instr):
            return False
        if instr.opcode == "pad" and instr.operands[0].opcode == "broadcast" \
                and instr.operands[1].opcode == "constant":
            return False
        return not _too_big(instr)


def is_candidate(instr: HloInstruction) -> bool:
    return (instr.opcode not in _NOT_FOLDED_THEMSELVES and bool(instr.users or instr.is_root)
            and any_operand_constant(instr) and all_operands_constant_like(instr))


@register_pass
@dataclass
class HloConstantFolding(HloPass):
    """Evaluates instructions whose operands are all constants and replaces them by constants."""

    name = "constant_folding"

    def run(self, module: HloModule) -> bool:
        evaluator = None  # the interpreter is imported only when something can be folded
        removal = DeferredRemoval()
        foldability = _Foldability()
        changed = False
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.parent is not comp or not is_candidate(instr) or not foldability.is_foldable(instr):
                    continue
                if evaluator is None:
                    from hlo_common.interpreter import Evaluator

                    evaluator = Evaluator()
                    evaluator.module = module
                value = try_evaluate(instr, evaluator=evaluator)
                if value is None:
                    continue
                constant = comp.add_new_instruction("constant", [], instr.shape, literal=value)
                instr.replace_all_uses_with(constant)
                removal.forget(instr)
                changed = True
        removal.finish()
        return changed
