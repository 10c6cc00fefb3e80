"""WhileLoopConstantSinking ("while-loop-constant-sinking"): loop-invariant constants are copied
into the loop body and condition, so uses inside the loop read a constant instead of the state.

Runs in every `simplification` round, before simplify-while-loops (which can then drop the
element once nothing reads it):

    %init = (s32[], f32[4]) tuple(%i0, f32[4] constant({1,2,3,4}))
    body: %c = gte(%p, 1)  ... add(%x, %c) ...  ROOT tuple(..., %c)
      =>  body: %c.sunk = f32[4] constant({1,2,3,4})  ... add(%x, %c.sunk) ...  ROOT tuple(..., %c)

An element is invariant when the body's root passes get-tuple-element(param, i) straight back at
index i; its init value must be a constant (or, with `sink_broadcast_of_constants`, a broadcast of
one; with `sink_only_scalar_constants`, only scalars). The root keeps reading the element so it
stays trivially invariant. Outer loops are visited before inner ones. Declines: loops whose init
is not a tuple, loops whose body or condition has another caller, fusion computations.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.hlo_utils import computation_callers
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def invariant_body_gtes(body: HloComputation) -> list[HloInstruction]:
    """get-tuple-element(param, i) that the root tuple returns at index i."""
    root = body.root
    if root.opcode != "tuple":
        return []
    param = body.parameters[0]
    return [g for g in param.users if g.opcode == "get-tuple-element"
            and g.attrs["index"] < len(root.operands) and root.operands[g.attrs["index"]] is g]


def clone_constant(value: HloInstruction, comp: HloComputation) -> HloInstruction:
    """A copy of a constant (or broadcast of a constant) in `comp`, named `<name>.sunk`."""
    if value.opcode == "constant":
        name = comp.unique_name(f"{value.name}.sunk")
        return comp.add_instruction(value.clone("sunk", new_operands=[], name=name))
    operand = clone_constant(value.operands[0], comp)
    name = comp.unique_name(value.name)
    return comp.add_instruction(value.clone("sunk", new_operands=[operand], name=name))


@register_pass
@dataclass
class WhileLoopConstantSinking(HloPass):
    """Replaces in-loop reads of loop-invariant constant state by copies of the constant."""

    name = "while-loop-constant-sinking"
    sink_broadcast_of_constants: bool = False
    sink_only_scalar_constants: bool = False

    def sinkable(self, value: HloInstruction) -> bool:
        if self.sink_only_scalar_constants and value.shape.rank != 0:
            return False
        if value.opcode == "constant":
            return not value.literal_unknown
        return self.sink_broadcast_of_constants and value.opcode == "broadcast" \
            and value.operands[0].opcode == "constant" and not value.operands[0].literal_unknown

    def sink_into(self, w: HloInstruction) -> bool:
        init, cond, body = w.operands[0], w.attrs["condition"], w.attrs["body"]
        if init.opcode != "tuple":
            return False
        cond_gtes: dict[int, list[HloInstruction]] = {}
        for g in cond.parameters[0].users:
            if g.opcode == "get-tuple-element":
                cond_gtes.setdefault(g.attrs["index"], []).append(g)
        changed = False
        root = body.root
        for gte in invariant_body_gtes(body):
            index = gte.attrs["index"]
            value = init.operands[index]
            if not self.sinkable(value):
                continue
            if len(gte.users) > 1:
                const = clone_constant(value, body)
                for user in list(gte.users):
                    for k, op in enumerate(user.operands):
                        if op is gte and not (user is root and k == index):
                            user.replace_operand(k, const)
                changed = True
            for cond_gte in cond_gtes.get(index, []):
                if cond_gte.users:
                    cond_gte.replace_all_uses_with(clone_constant(value, cond))
                    changed = True
        return changed

    def run(self, module: HloModule) -> bool:
        callers = computation_callers(module)
        loops = [i for c in reversed(non_fusion_computations(module)) for i in c.instructions
                 if i.opcode == "while"]
        changed = False
        for w in loops:
            shared = [c for c in (w.attrs["body"], w.attrs["condition"]) if len(callers.get(id(c), [])) > 1]
            if shared:
                continue
            changed |= self.sink_into(w)
        return changed
