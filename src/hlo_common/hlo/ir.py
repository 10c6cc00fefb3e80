"""The mutable HLO IR: `HloModule` > `HloComputation` > `HloInstruction`, named as in XLA.

Every tool works on this IR: the parser builds it, passes edit it, the printer writes it back.
Instructions keep their operands and users in order; opcode-specific attributes live in
`attrs` (a dict keyed by the attribute's text name, e.g. `dimensions`, `window`, `to_apply`),
holding typed values from `hlo_common.hlo.attributes` or, for attributes this project does not
interpret, a `RawAttr` that keeps the text. Called computations are attribute values too, so
`called_computations()` is derived rather than stored twice. The attributes every instruction
may carry are fields: `metadata` and `frontend_attributes` ((key, value text) pairs), `sharding`
(its canonical text), control predecessors/successors, and the backend config as data
(`backend_config_data`: a JSON object as a dict in key order, or a plain string).

The three classes live in XLA's files, `hlo_instruction.py`, `hlo_computation.py` and
`hlo_module.py`; import them from here.

    >>> m = parse_module("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }")
    >>> m.entry.root.opcode, [o.name for o in m.entry.root.operands]
    ('negate', ['p'])
"""

from __future__ import annotations

from hlo_common.hlo.hlo_computation import HloComputation
from hlo_common.hlo.hlo_instruction import COMPUTATION_ATTRS, HloInstruction
from hlo_common.hlo.hlo_module import HloModule, clone_module


def parse_module(text: str, filename: str = "<string>") -> HloModule:  # re-export for doctest
    from hlo_common.hlo.parser import parse_module as _pm

    return _pm(text, filename)


__all__ = [
    "COMPUTATION_ATTRS", "HloComputation", "HloInstruction", "HloModule", "clone_module", "parse_module",
]
