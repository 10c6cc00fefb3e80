"""The error the SPMD passes raise for input they cannot partition: one line naming the
instruction (issue item 8), exit status 1 through the CLI."""

from __future__ import annotations

from hlo_common.errors import VerificationError


class SpmdError(VerificationError):
    """A sharding or module the SPMD passes cannot handle, naming the instruction."""

    def __init__(self, message: str, instr=None):
        comp = instr.parent.name if instr is not None and instr.parent is not None else None
        super().__init__(message, comp, instr.name if instr is not None else None)
