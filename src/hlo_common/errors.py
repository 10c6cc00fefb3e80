"""The project's error types. Every user-facing failure is one of these; the CLIs print
`tool: error: <message>` for them and never a traceback (unless `--debug`).
"""

from __future__ import annotations


class HloError(Exception):
    """Base of every error a user can act on."""

    def one_line(self) -> str:
        return str(self).splitlines()[0] if str(self) else type(self).__name__

    def excerpt(self) -> str | None:
        return None


class HloParseError(HloError):
    """A syntax error at FILE:LINE:COL, with the offending line and a caret."""

    def __init__(self, message: str, filename: str = "<string>", line: int = 0, col: int = 0,
                 source_line: str | None = None):
        self.message = message
        self.filename = filename
        self.line = line
        self.col = col
        self.source_line = source_line
        super().__init__(f"{filename}:{line}:{col}: {message}")

    def excerpt(self) -> str | None:
        if self.source_line is None:
            return None
        text = self.source_line.rstrip("\n")
        if len(text) > 200:
            start = max(0, self.col - 100)
            text = text[start:start + 200]
            caret = self.col - 1 - start
        else:
            caret = self.col - 1
        pad = "".join("\t" if c == "\t" else " " for c in text[:max(caret, 0)])
        return f"  {text}\n  {pad}^"


class VerificationError(HloError):
    """A module that breaks an IR invariant; names the computation and instruction."""

    def __init__(self, message: str, computation: str | None = None, instruction: str | None = None,
                 place: str | None = None):
        self.message = message
        self.computation = computation
        self.instruction = instruction
        self.place = place  # FILE:LINE:COL of the instruction when it was parsed from text
        where = ""
        if computation is not None:
            where = f"in computation {computation}"
            if instruction is not None:
                where += f", instruction %{instruction}"
            where += ": "
        super().__init__((f"{place}: " if place else "") + where + message)


class InterpreterError(HloError):
    """The reference interpreter cannot evaluate an instruction (names it; `computation` is the
    name of the computation it sits in, when known)."""

    computation: str | None = None


class InputError(HloError):
    """Bad user-supplied data: an .npz with wrong names, shapes or types, an unreadable file."""


class OutputError(HloError):
    """An output file that cannot be written (missing directory, no permission, full disk)."""
