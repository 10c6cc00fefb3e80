"""Memory of a computation under an instruction order: the buffers each instruction allocates,
reads and frees, and the peak of a sequence (XLA's `HeapSimulator::MinimumMemoryForComputation`
with a no-fragmentation heap).

Where it sits: hlo-opt's `hlo-memory-scheduler` builds one `ScheduleMemoryModel` per module; its
list scheduler reads the per-instruction facts and DefaultMemoryScheduler compares candidate
orders by `peak_memory`. hlo-codegen's buffer assignment later packs the same buffers for real.

The model, per global computation C (entry, while bodies/conditions, branches, called
computations):

- Buffers are `HloAliasAnalysis` buffers without in-place merging (that depends on the order):
  array values only, so bitcast, get-tuple-element and tuple outputs allocate nothing, and a
  while's state is one buffer shared by its init, body root and result. Constants allocate
  nothing (XLA gives them their own read-only allocations).
- A buffer belongs to the outermost computation where one of its values appears, and is
  allocated there by the first instruction (in post order) that defines one of its values, or
  by the call site that runs such an instruction (a conditional allocates its result).
- It is read by every instruction of C that reads one of its values, directly or through a
  called computation (a use inside a while body counts at the while). It is freed after its last
  reader, unless it is live out of C (a root position) or an entry parameter.
- An instruction that calls computations holds their peak memory (the largest callee) while it
  runs; an instruction may write its output into an operand buffer that dies there when
  `can_share_operand_buffer_with_user` allows it (sizes equal), as XLA's heap simulator does.

    >>> model = ScheduleMemoryModel(module)                 # doctest: +SKIP
    >>> model.computation(module.entry).peak_memory(module.entry.instructions, {})
    3072
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hlo_common.analysis.alias import HloAliasAnalysis
from hlo_common.analysis.call_graph import CallGraph
from hlo_common.analysis.dataflow import HloDataflowAnalysis
from hlo_common.analysis.sharing import can_share_operand_buffer_with_user
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule


@dataclass
class ComputationMemory:
    """The buffers of one computation, numbered 0..n-1 locally."""

    computation: HloComputation
    sizes: list[int] = field(default_factory=list)
    defines: dict[HloInstruction, list[int]] = field(default_factory=dict)   # allocated there
    uses: dict[HloInstruction, list[int]] = field(default_factory=dict)      # distinct buffers read
    pinned: set[int] = field(default_factory=set)   # never freed: live out or entry parameter
    ignored: set[int] = field(default_factory=set)  # entry parameters: the list scheduler ignores them
    # (defined buffer, operand buffer) pairs where the output may reuse the dying operand's memory
    shares: dict[HloInstruction, list[tuple[int, int]]] = field(default_factory=dict)

    def bytes_defined(self, instr: HloInstruction) -> int:
        return sum(self.sizes[b] for b in self.defines.get(instr, ()) if b not in self.ignored)

    def use_counts(self) -> list[int]:
        """Readers per buffer, plus one for buffers that are never freed (XLA's implicit use)."""
        counts = [0] * len(self.sizes)
        for bufs in self.uses.values():
            for b in bufs:
                counts[b] += 1
        for b in self.pinned:
            counts[b] += 1
        return counts

    def peak_memory(self, sequence: list[HloInstruction], callee_memory: dict[HloComputation, int]) -> int:
        """The largest number of bytes live at once when the computation runs in `sequence`."""
        last = [-1] * len(self.sizes)
        for k, instr in enumerate(sequence):
            for b in self.defines.get(instr, ()):
                last[b] = max(last[b], k)
            for b in self.uses.get(instr, ()):
                last[b] = k
        frees: dict[int, list[int]] = {}
        for b, k in enumerate(last):
            if b not in self.pinned and k >= 0:
                frees.setdefault(k, []).append(b)
        live = peak = 0
        handed_over: set[int] = set()  # operand buffers whose memory an output took over
        for k, instr in enumerate(sequence):
            dying = frees.get(k, ())
            reusable = {u for _, u in self.shares.get(instr, ()) if u in dying and u not in handed_over}
            shared_into: set[int] = set()
            for b, u in self.shares.get(instr, ()):
                if u in reusable and b not in shared_into:
                    reusable.discard(u)
                    handed_over.add(u)
                    shared_into.add(b)
            for b in self.defines.get(instr, ()):
                if b not in shared_into:
                    live += self.sizes[b]
            peak = max(peak, live + callee_peak(instr, callee_memory))
            for b in dying:
                if b not in handed_over:
                    live -= self.sizes[b]
        return peak


def callee_peak(instr: HloInstruction, callee_memory: dict[HloComputation, int]) -> int:
    """Memory the computations `instr` calls need while it runs (the largest one: they never run at once)."""
    if not callee_memory:
        return 0
    return max((callee_memory.get(c, 0) for c in instr.called_computations()), default=0)


class ScheduleMemoryModel:
    """Buffers of every global computation of a module (see the module docstring)."""

    def __init__(self, module: HloModule):
        self.module = module
        self.dataflow = HloDataflowAnalysis.run(module)
        self.alias = HloAliasAnalysis.run(self.dataflow, None)
        self.call_graph = CallGraph(module)
        self._models: dict[HloComputation, ComputationMemory] = {}
        self._assign_owners()

    def computation(self, comp: HloComputation) -> ComputationMemory:
        model = self._models.get(comp)
        if model is None:
            model = self._models[comp] = ComputationMemory(comp)
        return model

    def is_global(self, comp: HloComputation) -> bool:
        return self.call_graph.is_global(comp)

    def _owner(self, buffer) -> HloComputation:
        depth = self.call_graph.depth
        comps = {p.instruction.parent for v in buffer.values for p in v.positions}
        return min(comps, key=lambda c: (depth.get(c, 1 << 30), c.name))

    def _assign_owners(self) -> None:
        order: dict[HloComputation, dict[HloInstruction, int]] = {}
        local: dict[int, tuple[ComputationMemory, int]] = {}  # buffer id -> (model, local index)
        for buf in self.alias.buffers:
            if all(v.instruction.opcode == "constant" for v in buf.values):
                continue
            comp = self._owner(buf)
            if not self.call_graph.is_global(comp):
                continue  # a fused or applied computation's buffers: no sequence of its own to order
            model = self.computation(comp)
            if comp not in order:
                order[comp] = {i: k for k, i in enumerate(self.dataflow.post_orders[comp])}
            b = len(model.sizes)
            model.sizes.append(buf.size)
            local[buf.id] = (model, b)
            self._place_buffer(buf, model, b, order[comp])
        self._add_shares(local)

    def _place_buffer(self, buf, model: ComputationMemory, b: int,
                      position: dict[HloInstruction, int]) -> None:
        comp, module = model.computation, self.module
        definers = [self.call_graph.ancestor_in(v.instruction, comp) for v in buf.values]
        definers = [d for d in definers if d is not None]
        model.defines.setdefault(min(definers, key=position.__getitem__), []).append(b)
        readers: dict[int, HloInstruction] = {}
        for v in buf.values:
            if v.instruction.opcode == "parameter" and v.instruction.parent is module.entry:
                model.pinned.add(b)
                model.ignored.add(b)
            for p in v.positions:
                if p.instruction is comp.root:
                    model.pinned.add(b)
            for use in v.uses:
                reader = self.call_graph.ancestor_in(use.instruction, comp)
                if reader is not None:
                    readers[id(reader)] = reader
        for reader in sorted(readers.values(), key=position.__getitem__):
            model.uses.setdefault(reader, []).append(b)

    def _add_shares(self, local: dict[int, tuple[ComputationMemory, int]]) -> None:
        """(output buffer, operand buffer) pairs where XLA's heap simulator may reuse the operand."""
        df, alias = self.dataflow, self.alias
        for comp in self.dataflow.global_computations:
            for instr in comp.instructions:
                for out_index, leaf in instr.shape.leaf_shapes():
                    if not leaf.is_array or not df.defines_value(instr, out_index):
                        continue
                    out = local.get(alias.buffer_of(df.unique_value(instr, out_index)).id)
                    if out is None:
                        continue
                    for n, operand in enumerate(instr.operands):
                        if operand in instr.operands[:n]:
                            continue
                        self._share_candidates(instr, out_index, operand, out, local)

    def _share_candidates(self, instr, out_index, operand, out, local) -> None:
        df, alias = self.dataflow, self.alias
        model, b = out
        for op_index, leaf in operand.shape.leaf_shapes():
            values = df.value_set(operand, op_index)
            if len(values) != 1 or leaf.byte_size() != model.sizes[b]:
                continue
            src = local.get(alias.buffer_of(values[0]).id)
            if src is None or src[0] is not model or src[1] == b:
                continue
            if can_share_operand_buffer_with_user(operand, op_index, instr, out_index):
                model.shares.setdefault(instr, []).append((b, src[1]))
