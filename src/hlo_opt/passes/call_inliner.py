"""CallInliner ("call-inliner"): replaces every `call` by the body of the computation it calls.

Runs before SPMD partitioning, in `optimization` and in `conv_canonicalization`.

    %add_one (x: f32[4]) -> f32[4] { ... ROOT %a = f32[4] add(%x, %one) }
    ENTRY ... { %c = f32[4] call(%p), to_apply=%add_one }
      =>  ENTRY ... { %one = f32[] constant(1) ... %a = f32[4] add(%p, %one.1) }

The callee's instructions are copied in front of the call with its parameters replaced by the
call's operands; copied names keep their spelling when it is free in the module and get a numeric
suffix otherwise (`%a` -> `%a.1`), so names stay unique. Callees are inlined before their callers,
so nested calls vanish in one run; afterwards HloDCE removes the computations no longer called.
Declines: calls inside computations run by async ops, calls marked with the frontend attribute
`inlineable="false"`. Control predecessors of a call go to the copied instructions, its control
successors follow the copied root.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.hlo_utils import NameUniquer, async_computations, clone_instruction, replace_instruction
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.passes.dce import HloDCE


def is_inlineable(call: HloInstruction) -> bool:
    return call.opcode == "call" and dict(call.frontend_attributes).get("inlineable") != '"false"'


def inline_call(call: HloInstruction, uniquer: NameUniquer) -> None:
    """Copy the callee into the caller in front of `call` and make the copy's root replace it."""
    callee = call.attrs["to_apply"]
    caller = call.parent
    mapping: dict[int, HloInstruction] = {id(p): call.operands[p.parameter_number] for p in callee.parameters}
    copies = []
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            continue
        new = clone_instruction(instr, uniquer.unique(instr.name), [mapping[id(o)] for o in instr.operands])
        caller.add_instruction(new, before=call)
        for pred in instr.control_predecessors:
            mapping[id(pred)].add_control_dependency_to(new)
        mapping[id(instr)] = new
        copies.append(new)
    for pred in call.control_predecessors:
        for new in copies:
            pred.add_control_dependency_to(new)
    new_root = mapping[id(callee.root)]
    for succ in call.control_successors:
        new_root.add_control_dependency_to(succ)
    call.drop_all_control_deps()
    replace_instruction(call, new_root, preserve_sharding=False)


@register_pass
@dataclass
class CallInliner(HloPass):
    """Inlines every `call` instruction into its caller, then removes the dead callees."""

    name = "call-inliner"

    def run(self, module: HloModule) -> bool:
        skip = async_computations(module)
        uniquer = NameUniquer.for_module(module)
        changed = False
        for comp in module.computation_post_order():
            if id(comp) in skip:
                continue
            for instr in comp.post_order():
                if instr.parent is comp and is_inlineable(instr):
                    inline_call(instr, uniquer)
                    changed = True
        if changed:
            HloDCE().run(module)
        return changed
