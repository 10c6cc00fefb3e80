"""An independent soundness check of a BufferAssignment (the invariant checker after assignment).

`check_buffer_assignment` returns a list of problems (empty when sound); it re-derives every
fact from the dataflow, live ranges and alias analysis rather than trusting the assigner:

- every slice lies inside its allocation, holds its value's bytes, and temporaries sit at
  offsets aligned to the assignment's alignment;
- every value has exactly one allocation, colocated values (one HloBuffer) share allocation and
  offset, and every array output of every global instruction resolves to exactly one slice;
- parameters sit in their flagged parameter allocation, constants in constant allocations,
  live-out values in maybe-live-out allocations; read-only allocations hold nothing else;
- no two values of different buffers that are live at the same time overlap in memory, except
  a legal in-place hand-off: one value's range ends exactly where the other's starts and the
  later one's instruction may overwrite the earlier one (XLA's `LiveRangeInterferes`).

    >>> check_buffer_assignment(assign_buffers(module))  # doctest: +SKIP
    []
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hlo_common.analysis.dataflow import HloValue
from hlo_common.analysis.sharing import can_share_operand_buffer_with_user
from hlo_common.errors import VerificationError

from hlo_codegen.buffer_assignment.heap_simulator import value_size

if TYPE_CHECKING:
    from hlo_codegen.buffer_assignment.assignment import BufferAssignment


def _touch_ok(user_v: HloValue, operand_v: HloValue) -> bool:
    user = user_v.instruction
    if user.opcode == "copy":
        return False
    return any(p.instruction in user.operands and can_share_operand_buffer_with_user(
        p.instruction, p.index, user, user_v.index) for p in operand_v.positions)


def _check_slices(ba, problems: list[str]) -> None:
    align = ba.alignment
    for i, alloc in enumerate(ba.allocations):
        if alloc.index != i:
            problems.append(f"allocation at position {i} says index {alloc.index}")
        for v, (off, size) in alloc.assigned.items():
            if off < 0 or off + size > alloc.size:
                problems.append(f"{v} at [{off}, {off + size}) lies outside allocation {i} "
                                f"of size {alloc.size}")
            if size < value_size(v):
                problems.append(f"{v} gets {size} bytes but needs {value_size(v)}")
            if alloc.is_preallocated_temp and size and off % align:
                problems.append(f"{v} at offset {off} of temp allocation {i} is not {align}-byte aligned")
            if ba.allocation_of.get(v) is not alloc:
                problems.append(f"{v} is listed in allocation {i} but maps elsewhere")


def _check_coverage(ba, problems: list[str]) -> None:
    where: dict[HloValue, list[tuple[int, int, int]]] = {}
    for alloc in ba.allocations:
        for v, (off, size) in alloc.assigned.items():
            where.setdefault(v, []).append((alloc.index, off, size))
    for v in ba.dataflow.values:
        if len(where.get(v, [])) != 1:
            problems.append(f"{v} is in {len(where.get(v, []))} allocations")
    for buf in ba.alias.buffers:
        places = {w[:2] for v in buf.values for w in where.get(v, [])}
        if len(places) > 1:
            problems.append(f"colocated values {buf.values} sit at different places {sorted(places)}")
    for comp in ba.dataflow.global_computations:
        for instr in comp.instructions:
            for idx in ba.dataflow.array_leaves(instr):
                slices = {w for v in ba.dataflow.value_set(instr, idx) for w in where.get(v, [])}
                if len(slices) != 1:
                    problems.append(f"%{instr.name}{list(idx)} maps to {len(slices)} slices")


def _check_kinds(ba, problems: list[str]) -> None:
    entry = ba.module.entry
    for v in ba.dataflow.values:
        alloc = ba.allocation_of.get(v)
        if alloc is None:
            continue
        instr = v.instruction
        if instr.opcode == "parameter" and instr.parent is entry:
            if not (alloc.is_entry_computation_parameter and alloc.parameter_number == instr.parameter_number
                    and alloc.param_shape_index == v.index):
                problems.append(f"entry parameter {v} is not in its parameter allocation")
        if instr.opcode == "constant" and not alloc.is_constant:
            problems.append(f"constant {v} is not in a constant allocation")
        if v.live_out and not alloc.maybe_live_out:
            problems.append(f"live-out {v} is in allocation {alloc.index}, not flagged maybe-live-out")
    for alloc in ba.allocations:
        if alloc.is_readonly:
            buffers = {ba.alias.buffer_of(v).id for v in alloc.assigned}
            if len(buffers) > 1:
                problems.append(f"read-only allocation {alloc.index} holds {len(buffers)} buffers")


def _check_interference(ba, problems: list[str]) -> None:
    ranges = ba.live_range.ranges
    for alloc in ba.allocations:
        vals = [v for v, (_, size) in alloc.assigned.items() if size > 0]
        if len(vals) < 2:
            continue
        off = np.array([alloc.assigned[v][0] for v in vals], np.int64)
        end = off + np.array([alloc.assigned[v][1] for v in vals], np.int64)
        t0 = np.array([ranges[v][0] for v in vals], np.int64)
        t1 = np.array([ranges[v][1] for v in vals], np.int64)
        buf = np.array([ba.alias.buffer_of(v).id for v in vals], np.int64)
        for i in range(len(vals) - 1):
            j = np.arange(i + 1, len(vals))
            in_space = (off[j] < end[i]) & (off[i] < end[j])
            hit = in_space & (t0[j] <= t1[i]) & (t0[i] <= t1[j]) & (buf[j] != buf[i])
            for k in j[hit]:
                a, b = vals[i], vals[k]
                if t1[i] == t0[k] and _touch_ok(b, a):
                    continue
                if t1[k] == t0[i] and _touch_ok(a, b):
                    continue
                problems.append(f"{a} [{t0[i]}, {t1[i]}] and {b} [{t0[k]}, {t1[k]}] overlap in allocation "
                                f"{alloc.index} at bytes [{max(off[i], off[k])}, {min(end[i], end[k])})")


def check_buffer_assignment(ba: BufferAssignment) -> list[str]:
    """Problems found in `ba` (empty list: sound)."""
    problems: list[str] = []
    _check_slices(ba, problems)
    _check_coverage(ba, problems)
    _check_kinds(ba, problems)
    _check_interference(ba, problems)
    return problems


def verify_buffer_assignment(ba: BufferAssignment) -> None:
    """Raise VerificationError naming the first problems, if any."""
    problems = check_buffer_assignment(ba)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise VerificationError("unsound buffer assignment: " + "; ".join(problems[:5]) + more)
