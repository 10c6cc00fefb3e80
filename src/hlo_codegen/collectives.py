"""Thunks for collectives and asynchronous copies on the one device hlo-codegen compiles for.

Where it sits: the thunk emitter calls `collective_thunks` for each collective the prepare
pipeline left (`hlo_common.passes.single_device_collectives` checked that it needs one device
and turned layout changes into copies; its `transfers` says which leaf each result leaf copies).
"""

from __future__ import annotations

from typing import Callable

from hlo_common.hlo.ir import HloInstruction
from hlo_common.manifest.thunks import BufferSlice, CopyThunk, MemsetThunk, Thunk
from hlo_common.passes.single_device_collectives import COLLECTIVES, transfers

__all__ = ["COLLECTIVES", "collective_thunks"]


def collective_thunks(instr: HloInstruction,
                      slice_of: Callable[[HloInstruction, tuple[int, ...]], BufferSlice]) -> list[Thunk]:
    """The copies and memsets that compute `instr` on one device (nothing for a *-done)."""
    thunks: list[Thunk] = []
    for t in transfers(instr):
        dst = slice_of(instr, t.dst)
        if dst.size == 0:
            continue
        if t.operand is None:
            thunks.append(MemsetThunk(instr.name, dst, 0))
            continue
        src = slice_of(instr.operands[t.operand], t.index)
        if src != dst:
            thunks.append(CopyThunk(instr.name, src, dst))
    return thunks
