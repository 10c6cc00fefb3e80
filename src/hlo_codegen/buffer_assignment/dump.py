"""Text forms of a BufferAssignment, as XLA writes them.

`buffer_assignment_to_string` is XLA's `BufferAssignment::ToString()`, the content of the
`*-buffer-assignment.txt` dump: a `BufferAssignment:` line, then per allocation

    allocation 0: size 1024, parameter 0, shape |f32[256]| at ShapeIndex {}:
     value: <0 p0 @0> (size=1024,offset=0): f32[256]{0}

with the flags XLA prints (`color N`, `parameter N, shape |...| at ShapeIndex {...}`,
`output shape is |...|`, `constant`, `maybe-live-out`, `preallocated-temp`) and the values sorted
by id. `stats_string` is `BufferAssignment::StatsString()` (what `--stage=buffer-assignment`
prints), with sizes in tsl's `HumanReadableNumBytes` form (`2.00MiB`, `12.0KiB`, `100B`).
Deterministic: allocations in index order, values by id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hlo_common.analysis.dataflow import format_index

if TYPE_CHECKING:
    from hlo_codegen.buffer_assignment.assignment import BufferAllocation, BufferAssignment


def human_readable_num_bytes(num_bytes: int) -> str:
    """tsl::strings::HumanReadableNumBytes."""
    if num_bytes < 0:
        return "-" + human_readable_num_bytes(-num_bytes)
    if num_bytes < 1024:
        return f"{num_bytes}B"
    units, unit = "KMGTPE", 0
    n = num_bytes
    while n >= 1024 * 1024:
        n //= 1024
        unit += 1
    value = n / 1024.0
    return f"{value:.1f}KiB" if units[unit] == "K" else f"{value:.2f}{units[unit]}iB"


def _output_shape(assignment, alloc) -> str | None:
    root = assignment.module.entry.root
    for v in alloc.assigned:
        for pos in v.positions:
            if pos.instruction is root and pos.index == ():
                return root.shape.to_string(print_layout=False)
    return None


def allocation_to_string(assignment: BufferAssignment, alloc: BufferAllocation) -> str:
    head = f"allocation {alloc.index}: size {alloc.size}"
    if alloc.color != 0:
        head += f", color {alloc.color}"
    if alloc.is_entry_computation_parameter:
        param = assignment.module.entry.parameter(alloc.parameter_number)
        head += (f", parameter {alloc.parameter_number}, shape |{param.shape.to_string(print_layout=False)}|"
                 f" at ShapeIndex {format_index(alloc.param_shape_index)}")
    out_shape = _output_shape(assignment, alloc)
    if out_shape is not None:
        head += f", output shape is |{out_shape}|"
    if alloc.is_constant:
        head += ", constant"
    if alloc.maybe_live_out:
        head += ", maybe-live-out"
    if alloc.is_preallocated_temp:
        head += ", preallocated-temp"
    lines = [head + ":"]
    for v in alloc.sorted_values():
        offset, size = alloc.assigned[v]
        lines.append(f" value: {v.short_string()} (size={size},offset={offset}): {v.shape.to_string(True)}")
    return "\n".join(lines) + "\n"


def buffer_assignment_to_string(assignment: BufferAssignment) -> str:
    body = "".join(allocation_to_string(assignment, a) for a in assignment.allocations)
    return "BufferAssignment:\n" + body


def stats_string(assignment: BufferAssignment) -> str:
    s = assignment.stats()
    lines = ["BufferAssignment stats:"]
    rows = [("parameter allocation", s["parameter"]), ("constant allocation", s["constant"]),
            ("maybe_live_out allocation", s["maybe_live_out"]),
            ("preallocated temp allocation", s["preallocated_temp"])]
    for label, n in rows:
        lines.append(f"{label:>33}: {human_readable_num_bytes(n):>10}")
    frag = s["preallocated_temp_fragmentation"]
    if frag >= 0:
        pct = 100.0 * frag / s["preallocated_temp"] if s["preallocated_temp"] else float("nan")
        label = "preallocated temp fragmentation"
        lines.append(f"{label:>33}: {human_readable_num_bytes(frag):>10} ({pct:.2f}%)")
    lines.append(f"{'total allocation':>33}: {human_readable_num_bytes(s['total']):>10}")
    return "\n".join(lines) + "\n"
