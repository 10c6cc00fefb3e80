"""AsyncOpsToCalls ("async-ops-to-calls"): an async-start / async-done pair becomes a `call` of its
computation.

Where it sits: hlo-codegen's prepare pipeline (`hlo_codegen.compiler.prepare_pipeline`), before
flatten-call-graph. hlo-codegen runs one stream, on which an asynchronous computation simply runs
where its done is (XLA:GPU would give it a stream of its own):

    %s = ((f32[8]), f32[8], s32[]) async-start(%x), calls=%comp
    %d = f32[8] async-done(%s)                          =>  %d = f32[8] call(%x), to_apply=%comp

async-update instructions between the two are dropped. A start with other users than its chain,
or without one computation, is left as it is (the fusion wrapper's caller refuses it). The call
keeps the done's name and metadata.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.passes._support import global_computations


def calls_for_async_ops(module: HloModule) -> int:
    """Rewrite every async-start/done pair that runs one computation; returns how many."""
    count = 0
    for comp in global_computations(module):
        for done in [i for i in comp.instructions if i.opcode == "async-done"]:
            start = done.operands[0]
            while start.opcode == "async-update" and len(start.users) == 1:
                start = start.operands[0]
            callee = start.attrs.get("calls")
            if (start.opcode != "async-start" or callee is None or isinstance(callee, list)
                    or len(start.users) != 1):
                continue
            call = HloInstruction(done.name, "call", done.shape, list(start.operands), {"to_apply": callee})
            call.metadata = list(done.metadata)
            chain = done.operands[0]
            comp.replace_instruction(done, call, remove_dead_operands=False)
            call.name = done.name
            while chain is not start:
                nxt = chain.operands[0]
                comp.remove_instruction(chain)
                chain = nxt
            comp.remove_instruction(start)
            count += 1
    return count


@register_pass
@dataclass
class AsyncOpsToCalls(HloPass):
    """async-start/async-done pairs become calls of their computation (one stream)."""

    name = "async-ops-to-calls"

    def run(self, module: HloModule) -> bool:
        return calls_for_async_ops(module) > 0
