"""HloLiveRange: the flattened schedule and the [start, end] time of every value.

XLA: `xla/hlo/utils/hlo_live_range.cc`. The sequences of all global computations are flattened
into one timeline the way XLA does it for module-scoped heap simulation: the instructions of a
`call`'s or `conditional`'s computations come right before the calling instruction (branches one
after another), a `while` contributes its condition and then its body right before the while
itself. One time step per instruction.

A value lives from its definition (parameters: from the start of their computation) to the
latest of its positions (a root position extends it to the end of that computation) and its uses
(a use by a while counts at the body parameter; uses by a call are ignored in favour of the uses
inside the callee). Entry parameters that are not aliased to an output live to the end of the
schedule. Values that share a buffer are made contiguous (`normalize`), as XLA's
`NormalizeAliasedBuffers` does.

While loops and conditionals therefore need no special casing beyond that: a loop's state buffer
spans from its init value's definition through the whole loop to its last use after the loop, and
values defined inside the body live only inside the body's span (they are re-created each
iteration), so body temporaries may share memory with each other but never with loop state.

    >>> lr = HloLiveRange.run(dataflow)                  # doctest: +SKIP
    >>> lr.ranges[value]
    (1, 2)
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloComputation, HloInstruction

from hlo_common.analysis import call_graph as cg
from hlo_common.analysis.dataflow import HloDataflowAnalysis, HloPosition, HloValue


class HloLiveRange:
    def __init__(self, dataflow: HloDataflowAnalysis):
        self.dataflow = dataflow
        self.module = dataflow.module
        self.flattened: list[HloInstruction] = []
        self.time: dict[HloInstruction, int] = {}
        self.span: dict[HloComputation, tuple[int, int]] = {}
        self.ranges: dict[HloValue, tuple[int, int]] = {}
        self.end_position: dict[HloValue, HloPosition] = {}

    @staticmethod
    def run(dataflow: HloDataflowAnalysis,
            aliased_params: set[tuple[int, tuple]] | None = None) -> HloLiveRange:
        lr = HloLiveRange(dataflow)
        lr._flatten(dataflow.module.entry)
        lr._compute_ranges(aliased_params or set())
        return lr

    @property
    def schedule_end_time(self) -> int:
        return len(self.flattened)

    def _flatten(self, comp: HloComputation) -> None:
        if comp in self.span:
            return
        start = len(self.flattened)
        for instr in cg.instruction_sequence(comp, self.module.is_scheduled):
            if instr.opcode in ("call", "conditional"):
                for callee in cg.xla_called_computations(instr):
                    self._flatten(callee)
            elif instr.opcode == "while":
                self._flatten(instr.attrs["condition"])
                self._flatten(instr.attrs["body"])
            self.time[instr] = len(self.flattened)
            self.flattened.append(instr)
        self.span[comp] = (start, len(self.flattened))

    def _position_time(self, pos: HloPosition) -> int | None:
        instr = pos.instruction
        if instr.is_root:
            sp = self.span.get(instr.parent)
            return sp[1] if sp else None
        return self.time.get(instr)

    def _last_use(self, value: HloValue) -> int:
        end = -1
        for use in value.uses:
            used = use.instruction
            if used.opcode == "call" and used.attrs["to_apply"] in self.span:
                continue
            if used.opcode == "while" and used.attrs["body"] in self.span:
                used = used.attrs["body"].parameter(0)
            t = self.time.get(used)
            if t is not None:
                end = max(end, t)
        return end

    def _compute_ranges(self, aliased_params: set[tuple[int, tuple]]) -> None:
        entry = self.module.entry
        for value in self.dataflow.values:
            instr = value.instruction
            if instr not in self.time:
                continue  # a computation that is never executed
            comp = instr.parent
            start = self.span[comp][0] if instr.opcode == "parameter" else self.time[instr]
            end = self.span[comp][1] if instr.is_root else self.time[instr]
            end_pos = value.defining_position
            for pos in value.positions[1:]:
                t = self._position_time(pos)
                if t is not None and t > end:
                    end, end_pos = t, pos
            if instr.opcode == "parameter" and comp is entry and \
                    (instr.parameter_number, value.index) not in aliased_params:
                end = self.schedule_end_time
            else:
                end = max(end, self._last_use(value))
            self.ranges[value] = (start, end)
            self.end_position[value] = end_pos

    def normalize(self, buffers) -> None:
        """Make the ranges of the values of each buffer contiguous and non-overlapping."""
        for buf in buffers:
            vals = sorted((v for v in buf.values if v in self.ranges),
                          key=lambda v: (self.ranges[v][0], self.ranges[v][1], v.id))
            for a, b in zip(vals, vals[1:]):
                (s1, e1), (s2, e2) = self.ranges[a], self.ranges[b]
                self.ranges[b] = (s2, max(e1, e2))
                self.ranges[a] = (s1, min(e1, s2))

    def to_string(self) -> str:
        """XLA's `-live-range.txt` header: the flattened sequence and each value's range."""
        lines = [f"HloLiveRange (max {self.schedule_end_time}):", "  InstructionSequence:"]
        lines += [f"    {t}:{i.name}" for t, i in enumerate(self.flattened)]
        lines.append("  BufferLiveRange:")
        for v in self.dataflow.values:
            if v in self.ranges:
                s, e = self.ranges[v]
                idx = "{" + ",".join(map(str, v.index)) + "}"
                lines.append(f"    {v.instruction.name}{idx}:{s}-{e}")
        return "\n".join(lines) + "\n"
