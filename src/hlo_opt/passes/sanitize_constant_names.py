"""SanitizeConstantNames ("sanitize-constant-names"): constant names that are valid global names.

Where it sits: at the end of `pre-scheduling-copy-insertion` and of `post-scheduling-passes`
(XLA:GPU's `sanitize_constant_names.cc`). hlo-codegen emits every constant as an LLVM global named
after the instruction, and PTX rejects `.` and `-` in such names; constants also become
module-wide names, where per-computation uniqueness is not enough.

Every constant's name gets `.` and `-` replaced by `_` and is then made unique across the whole
module with `_` as the separator (XLA's NameUniquer("_")): names of non-constant instructions
are reserved first and never change; a constant whose sanitized name is taken gets `_<n>` (a
numeric `_<k>` suffix already there is replaced by the next free number).

    %constant.3 = f32[] constant(1)     =>    %constant_3 = f32[] constant(1)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hlo_common.hlo.ir import HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass

_NUMERIC_SUFFIX = re.compile(r"^(.*)_(\d+)$")


def sanitize_constant_name(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


class _NameUniquer:
    """XLA's NameUniquer with separator `_`: `base`, else `stem_<n>` with the next unused n."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.next_id: dict[str, int] = {}

    def unique(self, base: str) -> str:
        if base not in self.used:
            self.used.add(base)
            return base
        m = _NUMERIC_SUFFIX.match(base)
        stem = m.group(1) if m else base
        k = max(self.next_id.get(stem, 1), 1)
        while f"{stem}_{k}" in self.used:
            k += 1
        self.next_id[stem] = k + 1
        name = f"{stem}_{k}"
        self.used.add(name)
        return name


@register_pass
@dataclass
class SanitizeConstantNames(HloPass):
    """Renames constants to module-unique names without '.' or '-' (valid PTX global names)."""

    name = "sanitize-constant-names"

    def run(self, module: HloModule) -> bool:
        uniquer = _NameUniquer()
        constants = []
        for comp in module.computations:
            for instr in comp.instructions:
                if instr.opcode == "constant":
                    constants.append(instr)
                else:
                    uniquer.used.add(instr.name)
        changed = False
        for instr in constants:
            new = uniquer.unique(sanitize_constant_name(instr.name))
            if new != instr.name:
                instr.name = new
                changed = True
        return changed
