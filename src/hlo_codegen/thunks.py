"""`thunk_sequence.txt`: the thunk tree as XLA prints it (`SequentialThunk::ToString`).

Where it sits: hlo-codegen's dumps (`--dump-to`), next to the buffer assignment. The thunk
types themselves are part of the manifest schema (`hlo_common.manifest.thunks`), since hlo-run
reads them too; this module only formats them. Each line is

    <id %03d>: <kind padded to the longest kind of its sequence>\t<description>

with thunk ids counted from 1 in pre-order over the whole tree. Nested sequences (while
condition and body, conditional branches) follow their thunk, indented two spaces per level:

    001: kKernel\tkernel=wrapped_add, profile_annotation=wrapped_add, launch dimensions=blocks: {1, 1, 1}, ...
    002: kWhile \tprofile_annotation=while, predicate={index:3, offset:0, size:1}
      condition:
      003: kKernel\tkernel=wrapped_compare, ...
      body:
      004: kCopy\tprofile_annotation=copy.1, src={...}, dst={...}
"""

from __future__ import annotations

import itertools

from hlo_common.manifest.thunks import (
    ConditionalThunk, SequentialThunk, Thunk, WhileThunk, children,
)


def thunk_sequence_to_string(sequence: SequentialThunk) -> str:
    """The text of `thunk_sequence.txt` for the entry sequence."""
    return _sequence_text(sequence, 0, itertools.count(1))


def _sequence_text(sequence: SequentialThunk, indent: int, ids) -> str:
    pad = "  " * indent
    if not sequence.thunks:
        return pad + "No thunks.\n"
    width = max(len(t.kind) for t in sequence.thunks)
    out = []
    for thunk in sequence.thunks:
        out.append(f"{pad}{next(ids):03d}: {thunk.kind.ljust(width)}\t{describe(thunk)}\n")
        for label, nested in children(thunk):
            out.append(f"{pad}  {label}:\n")
            out.append(_sequence_text(nested, indent + 1, ids))
        if isinstance(thunk, SequentialThunk):
            out.append(_sequence_text(thunk, indent + 1, ids))
    return "".join(out)


def describe(thunk: Thunk) -> str:
    """The part of a line after the kind."""
    if isinstance(thunk, WhileThunk):
        trip = "" if thunk.trip_count is None else f", trip_count={thunk.trip_count}"
        return f"profile_annotation={thunk.profile_annotation}, predicate={thunk.predicate}{trip}"
    if isinstance(thunk, ConditionalThunk):
        kind = "pred" if thunk.index_is_bool else "index"
        return (f"profile_annotation={thunk.profile_annotation}, {kind}={thunk.branch_index}, "
                f"branches={len(thunk.branches)}")
    if isinstance(thunk, SequentialThunk):
        return f"profile_annotation={thunk.profile_annotation}"
    return thunk.describe()
