"""CodegenCopyInsertion ("codegen-copy-insertion"): the copies buffer assignment needs, added to a
module that did not go through hlo-opt's `copy-insertion`.

Where it sits: near the end of hlo-codegen's prepare pipeline (`hlo_codegen.compiler`), after the
fusion wrapper and before buffer assignment. It runs `hlo_common.analysis.copy_insertion.
insert_copies`, the simplified CopyInsertion that buffer assignment's own check relies on: under
the module's order (its schedule, or a post order), it copies a value that would be overwritten
while still live (a while's state, a conditional's result, an in-place op's operand, an aliased
parameter or output), and repeats until nothing more is needed. On a module hlo-opt's
`copy-insertion` already made safe it changes nothing. Copies it adds may need kernels of their
own, so the prepare pipeline runs the fusion wrapper once more afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.analysis.copy_insertion import insert_copies
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.ir import HloModule


@register_pass
@dataclass
class CodegenCopyInsertion(HloPass):
    """Copies that make the module's buffer sharing safe under its order (before buffer assignment)."""

    name = "codegen-copy-insertion"

    def run(self, module: HloModule) -> bool:
        return insert_copies(module) > 0
