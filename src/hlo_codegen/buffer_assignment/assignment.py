"""BufferAssigner: HloBuffers -> BufferAllocations, and the BufferAssignment codegen reads.

Last step of buffer assignment (XLA: `BufferAssigner` in `xla/service/buffer_assignment.cc`).
Buffers of global computations are visited largest first (live-out first on ties, then by
post-order position), and each one

1. holding a constant gets its own read-only allocation (`constant`; GPU allocates constants);
2. holding an entry parameter gets its own allocation (`parameter N, shape ... at ShapeIndex`);
   one aliased to an output by `input_output_alias` may later host other buffers;
3. otherwise tries, for an array defined at the top level, the allocations of its operands, and
   then the existing output/aliased-parameter allocations (smallest first): it may join one when
   its live range does not interfere with anything already there (touching ranges are fine when
   the new value may overwrite the old one in place) and, if live out, the sizes match;
4. otherwise, if it is not live out, waits for the heap simulator (a temporary);
5. otherwise gets a new allocation (`maybe-live-out`).

The temporaries of the whole module are packed by `HeapSimulator` into one allocation per color,
which becomes the `preallocated-temp` allocation at the end of the list. Alignment: 256 bytes
for offsets inside the temp allocation (XLA:GPU's `kXlaAllocatedBufferAlignBytes`).

    >>> ba = assign_buffers(module)                      # doctest: +SKIP
    >>> ba.get_slice(module.entry.root)
    Slice(index=1, offset=0, size=1024)
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.analysis import call_graph as cg
from hlo_common.analysis.alias import HloAliasAnalysis, HloBuffer, io_alias_spec
from hlo_common.analysis.dataflow import HloDataflowAnalysis, HloValue, Index
from hlo_common.analysis.live_range import HloLiveRange
from hlo_common.analysis.sharing import can_share_operand_buffer_with_user
from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloInstruction, HloModule

from hlo_codegen.buffer_assignment.heap_simulator import HeapSimulator

XLA_ALLOCATED_BUFFER_ALIGNMENT = 256  # temporaries, outputs, constants (cuBLAS wants 256)
ENTRY_PARAMETER_ALIGNMENT = 16


@dataclass(frozen=True, order=True)
class Slice:
    """A byte range of one allocation; what kernels and thunks are parameterized by."""

    index: int
    offset: int
    size: int

    def __str__(self) -> str:
        return f"{{index:{self.index}, offset:{self.offset}, size:{self.size}}}"


class BufferAllocation:
    """One contiguous device buffer holding one or more values at offsets."""

    def __init__(self, index: int, size: int, color: int = 0):
        self.index = index
        self.size = size
        self.color = color
        self.is_entry_computation_parameter = False
        self.parameter_number: int | None = None
        self.param_shape_index: Index = ()
        self.parameter_has_alias = False
        self.is_constant = False
        self.maybe_live_out = False
        self.assigned: dict[HloValue, tuple[int, int]] = {}  # value -> (offset, size)

    @property
    def is_preallocated_temp(self) -> bool:
        return not (self.is_entry_computation_parameter or self.is_constant or self.maybe_live_out)

    @property
    def is_readonly(self) -> bool:
        return (self.is_entry_computation_parameter and not self.parameter_has_alias) or self.is_constant

    def add_assignment(self, value: HloValue, offset: int, size: int) -> None:
        if value in self.assigned:
            raise AssertionError(f"{value} already assigned to allocation {self.index}")
        if offset < 0 or offset + size > self.size:
            raise AssertionError(f"{value} at [{offset}, {offset + size}) is outside allocation {self.index}")
        self.assigned[value] = (offset, size)

    def get_slice(self, value: HloValue) -> Slice:
        offset, size = self.assigned[value]
        return Slice(self.index, offset, size)

    def sorted_values(self) -> list[HloValue]:
        return sorted(self.assigned, key=lambda v: v.id)

    def __repr__(self) -> str:
        return f"<BufferAllocation {self.index} size={self.size} values={len(self.assigned)}>"


class BufferAssignment:
    """The result: allocations, and a slice for every array output of every global instruction."""

    def __init__(self, module: HloModule, dataflow: HloDataflowAnalysis, live_range: HloLiveRange,
                 alias: HloAliasAnalysis):
        self.module = module
        self.dataflow = dataflow
        self.live_range = live_range
        self.alias = alias
        self.allocations: list[BufferAllocation] = []
        self.allocation_of: dict[HloValue, BufferAllocation] = {}
        self.temp_fragmentation = -1
        self.alignment = XLA_ALLOCATED_BUFFER_ALIGNMENT

    # -- queries codegen uses --------------------------------------------------------------------
    def get_slice(self, instruction: HloInstruction, index: Index = ()) -> Slice:
        """The one slice holding `instruction`'s array output at `index`."""
        slices = self.slices_at(instruction, index)
        if len(slices) != 1:
            what = "no slice" if not slices else f"{len(slices)} different slices"
            raise HloError(f"buffer assignment has {what} for %{instruction.name}"
                           f"{{{','.join(map(str, index))}}}")
        return slices[0]

    def has_slice(self, instruction: HloInstruction, index: Index = ()) -> bool:
        return len(self.slices_at(instruction, index)) == 1

    def slices_at(self, instruction: HloInstruction, index: Index = ()) -> list[Slice]:
        out = {self.allocation_of[v].get_slice(v) for v in self.dataflow.value_set(instruction, tuple(index))
               if v in self.allocation_of}
        return sorted(out)

    def shares_slice(self, a: HloInstruction, a_index: Index, b: HloInstruction, b_index: Index) -> bool:
        """True when both positions live in the same slice (e.g. an in-place DUS and its operand)."""
        return self.get_slice(a, a_index) == self.get_slice(b, b_index)

    def allocation(self, index: int) -> BufferAllocation:
        return self.allocations[index]

    @property
    def temp_allocation(self) -> BufferAllocation | None:
        temps = [a for a in self.allocations if a.is_preallocated_temp]
        return temps[0] if temps else None

    def stats(self) -> dict[str, int]:
        s = dict.fromkeys(("parameter", "constant", "maybe_live_out", "preallocated_temp", "total"), 0)
        for a in self.allocations:
            s["parameter"] += a.size if a.is_entry_computation_parameter else 0
            s["constant"] += a.size if a.is_constant else 0
            s["maybe_live_out"] += a.size if a.maybe_live_out else 0
            s["preallocated_temp"] += a.size if a.is_preallocated_temp else 0
            s["total"] += a.size
        s["preallocated_temp_fragmentation"] = self.temp_fragmentation
        return s

    def to_string(self) -> str:
        from hlo_codegen.buffer_assignment.dump import buffer_assignment_to_string
        return buffer_assignment_to_string(self)

    def stats_string(self) -> str:
        from hlo_codegen.buffer_assignment.dump import stats_string
        return stats_string(self)

    # -- construction helpers --------------------------------------------------------------------
    def new_allocation(self, size: int, color: int) -> BufferAllocation:
        alloc = BufferAllocation(len(self.allocations), size, color)
        self.allocations.append(alloc)
        return alloc

    def assign_buffer(self, alloc: BufferAllocation, buffer: HloBuffer, offset: int, size: int) -> None:
        for v in buffer.values:
            self.assign_value(alloc, v, offset, size)
        if buffer.live_out:
            alloc.maybe_live_out = True

    def assign_value(self, alloc: BufferAllocation, value: HloValue, offset: int, size: int) -> None:
        alloc.add_assignment(value, offset, size)
        self.allocation_of[value] = alloc
        if value.live_out:
            alloc.maybe_live_out = True


def buffer_size(buffer: HloBuffer) -> int:
    return buffer.size


class BufferAssigner:
    def __init__(self, assignment: BufferAssignment, alignment: int):
        self.ba = assignment
        self.alignment = alignment
        self.alias = assignment.alias
        self.live_range = assignment.live_range
        io = io_alias_spec(assignment.module)
        self.aliased_params = {(n, idx) for _, n, idx, _ in io}

    def run(self) -> None:
        reusable: list[BufferAllocation] = []
        delayed: list[HloValue] = []
        for buf in self._sorted_buffers():
            self._assign_one(buf, reusable, delayed)
        self._run_heap_simulation(delayed)
        self._combine_temp_allocations()

    def _sorted_buffers(self) -> list[HloBuffer]:
        position: dict[HloInstruction, int] = {}
        for comp in reversed(self.ba.dataflow.global_computations):
            for instr in cg.xla_instruction_post_order(comp):
                position.setdefault(instr, len(position))

        def key(buf: HloBuffer):
            first = min(position[v.instruction] for v in buf.values)
            return (-buffer_size(buf), not buf.live_out, first, buf.id)

        return sorted(self.alias.buffers, key=key)

    def _assign_one(self, buf: HloBuffer, reusable: list[BufferAllocation], delayed: list[HloValue]) -> None:
        ba, size = self.ba, buffer_size(buf)
        for v in buf.values:
            if v.instruction.opcode == "constant":
                alloc = ba.new_allocation(size, buf.color)
                alloc.is_constant = True
                ba.assign_buffer(alloc, buf, 0, size)
                return
            if v.instruction.opcode == "parameter" and v.instruction.parent is ba.module.entry:
                alloc = ba.new_allocation(size, buf.color)
                alloc.is_entry_computation_parameter = True
                alloc.parameter_number = v.instruction.parameter_number
                alloc.param_shape_index = v.index
                alloc.parameter_has_alias = (alloc.parameter_number, v.index) in self.aliased_params
                ba.assign_buffer(alloc, buf, 0, size)
                if alloc.parameter_has_alias:
                    reusable.append(alloc)
                return
        for v in buf.values:
            if v.index != ():
                continue
            for operand in v.instruction.operands:
                for ov in ba.dataflow.value_set(operand, ()):
                    alloc = ba.allocation_of.get(ov)
                    if alloc is not None and self._maybe_assign(alloc, buf):
                        return
        for alloc in reversed(reusable):
            if self._maybe_assign(alloc, buf):
                return
        if not buf.live_out:
            delayed.extend(buf.values)
            return
        alloc = ba.new_allocation(size, buf.color)
        ba.assign_buffer(alloc, buf, 0, size)
        reusable.append(alloc)

    def _maybe_assign(self, alloc: BufferAllocation, buf: HloBuffer) -> bool:
        size = buffer_size(buf)
        if buf.color != alloc.color or size > alloc.size or alloc.is_readonly:
            return False
        for assigned in alloc.assigned:
            for new in buf.values:
                if self.live_range_interferes(new, assigned):
                    return False
                if new.instruction.opcode == "copy" and any(
                        p.instruction in new.instruction.operands for p in assigned.positions):
                    return False
        if buf.live_out and alloc.size != size:
            return False
        self.ba.assign_buffer(alloc, buf, 0, size)
        return True

    def live_range_interferes(self, a: HloValue, b: HloValue) -> bool:
        return live_range_interferes(self.live_range, a, b)

    def _run_heap_simulation(self, delayed: list[HloValue]) -> None:
        by_color: dict[int, set[HloValue]] = {}
        for v in delayed:
            by_color.setdefault(v.color, set()).add(v)
        sim = HeapSimulator(self.alias, self.live_range, self.alignment)
        for color in sorted(by_color):
            result = sim.run(by_color[color])
            frag = self.ba.temp_fragmentation
            self.ba.temp_fragmentation = result.fragmentation + (frag if frag >= 0 else 0)
            alloc = self.ba.new_allocation(result.heap_size, color)
            for v in sorted(result.chunks, key=lambda v: v.id):
                offset, size = result.chunks[v]
                self.ba.assign_value(alloc, v, offset, size)

    def _combine_temp_allocations(self) -> None:
        keep = [a for a in self.ba.allocations if not a.is_preallocated_temp]
        temps = [a for a in self.ba.allocations if a.is_preallocated_temp]
        combined: dict[int, BufferAllocation] = {}
        for t in temps:
            into = combined.get(t.color)
            if into is None:
                combined[t.color] = t
                continue
            base = (into.size + self.alignment - 1) // self.alignment * self.alignment
            into.size = base + t.size
            for v, (off, size) in t.assigned.items():
                into.assigned[v] = (base + off, size)
                self.ba.allocation_of[v] = into
        self.ba.allocations = keep + list(combined.values())
        for i, a in enumerate(self.ba.allocations):
            a.index = i


def live_range_interferes(live_range: HloLiveRange, a: HloValue, b: HloValue) -> bool:
    """XLA's LiveRangeInterferes: overlapping [start, end] ranges interfere unless one ends exactly
    where the other starts and the later one may overwrite the earlier one in place."""
    (s1, e1), (s2, e2) = live_range.ranges[a], live_range.ranges[b]
    if s1 > e2 or s2 > e1:
        return False
    if e1 == s2:
        return not can_share_as_operand(live_range, b, a)
    if e2 == s1:
        return not can_share_as_operand(live_range, a, b)
    return True


def can_share_as_operand(live_range: HloLiveRange, user_value: HloValue, operand_value: HloValue) -> bool:
    """May `user_value` reuse the buffer of `operand_value`, which dies at its defining instruction
    (`kernel_can_share`: element types must match too)?"""
    end = live_range.end_position[operand_value]
    user = user_value.instruction
    if operand_value.shape.element_type != user_value.shape.element_type:
        return False
    return (user.opcode != "copy" and end.instruction in user.operands
            and can_share_operand_buffer_with_user(end.instruction, end.index, user, user_value.index))


def validate_colocations(alias: HloAliasAnalysis, aliased_params: set) -> None:
    """Constants and (unaliased) entry parameters are read-only: nothing else may share their
    buffer. Such sharing comes from while/conditional colocation without copies."""
    entry = alias.module.entry
    for buf in alias.buffers:
        if len(buf.values) < 2:
            continue
        for v in buf.values:
            instr = v.instruction
            if instr.opcode == "constant" or (instr.opcode == "parameter" and instr.parent is entry
                                              and (instr.parameter_number, v.index) not in aliased_params):
                other = next(o for o in buf.values if o is not v)
                raise HloError(f"read-only %{instr.name} would share a buffer with "
                               f"%{other.instruction.name} (control-flow colocation); run copy insertion "
                               "(hlo_codegen.buffer_assignment.insert_copies) first")


def assign_buffers(module: HloModule, alignment: int = XLA_ALLOCATED_BUFFER_ALIGNMENT) -> BufferAssignment:
    """Run dataflow, live ranges, alias analysis and the assigner over `module` (not modified)."""
    from hlo_common.analysis.copy_insertion import find_needed_copies

    if module.entry is None:
        raise HloError(f"module {module.name} has no entry computation")
    dataflow = HloDataflowAnalysis.run(module)
    aliased_params = {(n, idx) for _, n, idx, _ in io_alias_spec(module)}
    live_range = HloLiveRange.run(dataflow, aliased_params)
    alias = HloAliasAnalysis.run(dataflow, live_range)
    validate_colocations(alias, aliased_params)
    needed = find_needed_copies(dataflow, live_range)
    if needed:
        raise HloError(f"module {module.name} needs {len(needed)} copies before buffer assignment, first: "
                       f"{needed[0].reason}; run copy insertion "
                       "(hlo_codegen.buffer_assignment.insert_copies)")
    live_range.normalize(alias.buffers)
    assignment = BufferAssignment(module, dataflow, live_range, alias)
    assignment.alignment = alignment
    BufferAssigner(assignment, alignment).run()
    return assignment
