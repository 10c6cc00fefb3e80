"""HloAliasAnalysis: which values must (or may safely) share one piece of memory (an HloBuffer).

Second step of buffer assignment, also the scheduler's memory accounting (XLA:
`xla/hlo/analysis/hlo_alias_analysis.cc`). Values are merged into one `HloBuffer` (a *colocation*)
when

- they meet in one value set: a while's init, body parameter, body root, condition parameter and
  result; the roots of a conditional's branches and its result (dataflow unions them);
- the module header's `input_output_alias` ties an output to a parameter;
- a custom-call's `output_to_operand_aliasing` ties its output to an operand;
- an in-place op (dynamic-update-slice, scatter, a fusion whose root is a DUS/scatter chain on a
  parameter) can update its operand without copying: XLA makes this a must-alias and lets
  copy-insertion add copies; here it is merged only when it is safe in the given schedule — the
  operand's buffer is dead after the op (no later use, not live out, not a constant or entry
  parameter) and the op reads the operand once. `insert_copies` makes it always safe.

    >>> aa = HloAliasAnalysis.run(dataflow, live_range)  # doctest: +SKIP
    >>> aa.buffer_of(dus_value) is aa.buffer_of(operand_value)
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloInstruction, HloModule

from hlo_common.analysis.dataflow import HloDataflowAnalysis, HloValue, Index
from hlo_common.analysis.live_range import HloLiveRange
from hlo_common.analysis.sharing import (
    can_share_operand_buffer_with_user, custom_call_aliasing, in_place_pairs, parse_alias_spec)


@dataclass(eq=False)
class HloBuffer:
    id: int
    values: list[HloValue] = field(default_factory=list)  # sorted by id

    @cached_property
    def live_out(self) -> bool:
        return any(v.live_out for v in self.values)

    @cached_property
    def color(self) -> int:
        return self.values[0].color

    @cached_property
    def size(self) -> int:
        """The largest value's size (values of one buffer normally agree)."""
        return max(v.size for v in self.values)

    def __repr__(self) -> str:
        return f"HloBuffer {self.id}, values: " + ", ".join(v.short_string() for v in self.values)


def io_alias_spec(module: HloModule) -> list[tuple[Index, int, Index, str]]:
    """The parsed `input_output_alias` header attribute (empty when absent)."""
    text = module.header_attr("input_output_alias")
    return parse_alias_spec(text, "input_output_alias") if text else []


class _UnionFind:
    def __init__(self, values: list[HloValue]):
        self.parent = {v: v for v in values}

    def find(self, v: HloValue) -> HloValue:
        root = v
        while self.parent[root] is not root:
            root = self.parent[root]
        while self.parent[v] is not root:
            self.parent[v], v = root, self.parent[v]
        return root

    def union(self, a: HloValue, b: HloValue) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            if rb.id < ra.id:
                ra, rb = rb, ra
            self.parent[rb] = ra


class HloAliasAnalysis:
    def __init__(self, dataflow: HloDataflowAnalysis, live_range: HloLiveRange | None):
        self.dataflow = dataflow
        self.live_range = live_range
        self.module = dataflow.module
        self.buffers: list[HloBuffer] = []
        self._buffer_of: dict[HloValue, HloBuffer] = {}
        self._uf = _UnionFind(dataflow.values)
        self.in_place_shared: list[tuple[HloInstruction, int]] = []  # (user, operand number) merged

    @staticmethod
    def run(dataflow: HloDataflowAnalysis, live_range: HloLiveRange | None) -> HloAliasAnalysis:
        """Without a live range (no schedule yet: the scheduler's view) in-place ops stay unmerged."""
        aa = HloAliasAnalysis(dataflow, live_range)
        aa._merge_value_sets()
        aa._merge_io_aliases()
        aa._merge_custom_call_aliases()
        if live_range is not None:
            aa._merge_in_place_ops()
        aa._build_buffers()
        return aa

    # -- queries ---------------------------------------------------------------------------------
    def buffer_of(self, value: HloValue) -> HloBuffer:
        return self._buffer_of[value]

    def buffers_at(self, instr: HloInstruction, index: Index = ()) -> list[HloBuffer]:
        out: dict[int, HloBuffer] = {}
        for v in self.dataflow.value_set(instr, index):
            b = self._buffer_of[v]
            out[b.id] = b
        return [out[k] for k in sorted(out)]

    # -- merging ---------------------------------------------------------------------------------
    def _merge_all(self, values) -> None:
        values = list(values)
        for v in values[1:]:
            self._uf.union(values[0], v)

    def _merge_value_sets(self) -> None:
        for sets in self.dataflow.value_sets.values():
            for vs in sets.values():
                if len(vs) > 1:
                    self._merge_all(vs)

    def _merge_io_aliases(self) -> None:
        entry = self.module.entry
        for out_index, param_no, param_index, _kind in io_alias_spec(self.module):
            try:
                param = entry.parameter(param_no)
            except KeyError:
                raise HloError(f"input_output_alias names parameter {param_no}, which the entry lacks")
            outs = self.dataflow.value_set(entry.root, out_index)
            ins = self.dataflow.value_set(param, param_index)
            if not outs or not ins:
                raise HloError(f"input_output_alias {out_index} -> ({param_no}, {param_index}) does not "
                               "name array leaves of the output and the parameter")
            self._merge_all(list(outs) + list(ins))

    def _merge_custom_call_aliases(self) -> None:
        for comp in self.dataflow.global_computations:
            for instr in comp.instructions:
                if instr.opcode != "custom-call":
                    continue
                for out_index, op_no, op_index, _ in custom_call_aliasing(instr):
                    outs = self.dataflow.value_set(instr, out_index)
                    ins = self.dataflow.value_set(instr.operands[op_no], op_index)
                    self._merge_all(list(outs) + list(ins))

    def _group(self, value: HloValue) -> list[HloValue]:
        root = self._uf.find(value)
        return [v for v in self.dataflow.values if self._uf.find(v) is root]

    def in_place_is_safe(self, user: HloInstruction, operand_number: int, operand_index: Index,
                         output_index: Index) -> bool:
        """May `user` write its output at `output_index` over its operand (still unmerged)?"""
        operand = user.operands[operand_number]
        if user.operands.count(operand) != 1 or user not in self.live_range.time:
            return False
        if operand.shape.subshape(operand_index).byte_size() != user.shape.subshape(output_index).byte_size():
            return False
        if user.opcode == "fusion" and not can_share_operand_buffer_with_user(
                operand, operand_index, user, output_index):
            return False
        t = self.live_range.time[user]
        entry = self.module.entry
        group = {id(x): x for o in self.dataflow.value_set(operand, operand_index) for x in self._group(o)}
        for v in group.values():
            if v.live_out or v.instruction.opcode == "constant":
                return False
            if v.instruction.opcode == "parameter" and v.instruction.parent is entry:
                return False
            if self.live_range.ranges.get(v, (0, t + 1))[1] > t:
                return False
        for o in self.dataflow.value_set(user, output_index):
            for v in self._group(o):
                if self.live_range.ranges.get(v, (-1, 0))[0] < t:
                    return False
        return True

    def _merge_in_place_ops(self) -> None:
        for instr in self.live_range.flattened:
            for n, op_index, out_index in in_place_pairs(instr):
                if instr.opcode == "custom-call":
                    continue  # already a must-alias
                ins = self.dataflow.value_set(instr.operands[n], op_index)
                outs = self.dataflow.value_set(instr, out_index)
                if not ins or not outs:
                    continue
                if self._uf.find(ins[0]) is self._uf.find(outs[0]):
                    continue
                if self.in_place_is_safe(instr, n, op_index, out_index):
                    self._merge_all(list(ins) + list(outs))
                    self.in_place_shared.append((instr, n))

    def _build_buffers(self) -> None:
        groups: dict[HloValue, list[HloValue]] = {}
        for v in self.dataflow.values:
            groups.setdefault(self._uf.find(v), []).append(v)
        for vals in sorted(groups.values(), key=lambda vs: vs[0].id):
            buf = HloBuffer(len(self.buffers), sorted(vals, key=lambda v: v.id))
            self.buffers.append(buf)
            for v in vals:
                self._buffer_of[v] = buf
