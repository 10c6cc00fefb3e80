"""Copy removal, the second phase of `copy-insertion` (XLA's `CopyRemover` and
`RemoveUnnecessaryCopies` in `copy_insertion.cc`, without the optional region analysis, which
XLA:GPU leaves off).

Where it sits: called by `copy_insertion.py` after copies were added around every while loop,
conditional, in-place operation and aliased output, and again by
`post_scheduling_copy_insertion.py` once the module is scheduled; it removes each copy whose removal cannot
make two values that share a buffer live at the same time, in any order the scheduler may pick
(`DependencyHloOrdering`: only operand and control edges order instructions; after scheduling,
`SequentialHloOrdering`: the schedule itself).

The values of each buffer (`must_alias_groups`, in SSA form) are kept in a circular list in
definition order. A copy reads value s of one buffer and defines value d of another; removing it
merges the two lists, which is allowed in two shapes only:

- d is the first value of its buffer: the merged order is s_0..s_x, d_1..d_m, s_x+1..s_n, so every
  value up to s_x must die before d_1 is defined and d_m before s_x+1;
- s is the last value of its buffer: the merged order is d_0..d_y-1, s_0..s_n, d_y+1..d_m.

"Dies before" is XLA's LiveRangeBefore: all uses of the earlier value run before the later one is
defined (a use at the defining instruction counts when that instruction may write over its
operand, a copy included), and the earlier value is not a root of the later one's computation.

    >>> removed = remove_unnecessary_copies(module)   # doctest: +SKIP
    >>> removed
    3
"""

from __future__ import annotations

import functools

from hlo_common.analysis.dataflow import HloDataflowAnalysis, HloUse, HloValue, Index
from hlo_common.analysis.ordering import DependencyHloOrdering, SequentialHloOrdering
from hlo_common.analysis.sharing import in_place_pairs, parse_alias_spec
from hlo_common.hlo.ir import HloInstruction, HloModule


# -- which SSA values must share one buffer (XLA's HloAliasAnalysis in SSA form) --------------------
def _leaves_under(df: HloDataflowAnalysis, instr: HloInstruction, index: Index) -> list[Index]:
    return [idx for idx in df.array_leaves(instr) if idx[:len(index)] == tuple(index)]


def must_alias_groups(df: HloDataflowAnalysis) -> list[list[HloValue]]:
    """Values that must live in one buffer: loop state (init, phis, body root), conditional
    results (phi and branch roots), in-place outputs with the operand they update, and outputs
    aliased to entry parameters. Each group is sorted by value id; groups by their first id."""
    parent = {v.id: v.id for v in df.values}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(values) -> None:
        ids = sorted({v.id for v in values})
        for other in ids[1:]:
            a, b = find(ids[0]), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)

    for comp in df.global_computations:
        for instr in comp.instructions:
            for group in _aliased_positions(df, instr):
                union(v for pos, idx in group for v in df.value_set(pos, idx))
    entry = df.module.entry
    spec = df.module.header_attr("input_output_alias")
    for out_index, n, p_index, _ in (parse_alias_spec(spec, "input_output_alias") if spec else []):
        for leaf in _leaves_under(df, entry.root, out_index):
            rest = leaf[len(out_index):]
            param_values = df.value_set(entry.parameter(n), p_index + rest)
            union(list(df.value_set(entry.root, leaf)) + list(param_values))
    groups: dict[int, list[HloValue]] = {}
    for v in df.values:
        groups.setdefault(find(v.id), []).append(v)
    return [sorted(g, key=lambda v: v.id) for _, g in sorted(groups.items())]


def _aliased_positions(df: HloDataflowAnalysis, instr: HloInstruction):
    """Groups of (instruction, index) positions whose values must share a buffer."""
    if instr.opcode == "while":
        body, cond = instr.attrs["body"], instr.attrs["condition"]
        for idx in df.array_leaves(instr):
            yield [(instr.operands[0], idx), (body.parameter(0), idx), (cond.parameter(0), idx),
                   (body.root, idx), (instr, idx)]
    elif instr.opcode == "conditional":
        from hlo_common.analysis.call_graph import branch_computations

        for idx in df.array_leaves(instr):
            yield [(instr, idx)] + [(b.root, idx) for b in branch_computations(instr)]
    else:
        for n, op_index, out_index in in_place_pairs(instr):
            operand = instr.operands[n]
            for leaf in _leaves_under(df, instr, out_index):
                yield [(instr, leaf), (operand, op_index + leaf[len(out_index):])]


# -- the value lists ------------------------------------------------------------------------------
class _Node:
    __slots__ = ("value", "uses", "prev", "next")

    def __init__(self, value: HloValue):
        self.value = value
        self.uses: list[HloUse] = list(value.uses)
        self.prev: _Node = self
        self.next: _Node = self


class CopyRemover:
    """One value list per buffer; `try_elide(copy)` merges two lists when that is safe."""

    def __init__(self, df: HloDataflowAnalysis, ordering: DependencyHloOrdering):
        self.df = df
        self.ordering = ordering
        self.heads: set[_Node] = set()
        node_of: dict[int, _Node] = {}
        for group in must_alias_groups(df):
            self._add_list(sorted(group, key=functools.cmp_to_key(self._definition_order)), node_of)
        self.copy_map: dict[HloInstruction, list[_Node]] = {}  # copy -> [source node, dest node]
        for comp in df.global_computations:
            for instr in comp.instructions:
                if instr.opcode != "copy" or not instr.shape.is_array:
                    continue
                src = df.value_set(instr.operands[0], ())
                dest = df.unique_value(instr, ())
                if len(src) == 1 and dest is not None and dest.instruction is instr:
                    self.copy_map[instr] = [node_of[src[0].id], node_of[dest.id]]

    def _definition_order(self, a: HloValue, b: HloValue) -> int:
        if self.ordering.is_defined_before(a, b):
            return -1
        if self.ordering.is_defined_before(b, a):
            return 1
        return a.id - b.id

    def _add_list(self, values: list[HloValue], node_of: dict[int, _Node]) -> None:
        nodes = [_Node(v) for v in values]
        for a, b in zip(nodes, nodes[1:] + nodes[:1]):
            a.next, b.prev = b, a
        for n in nodes:
            node_of[n.value.id] = n
        self.heads.add(nodes[0])

    def _next(self, node: _Node) -> _Node | None:
        return None if node.next in self.heads else node.next

    def _prev(self, node: _Node) -> _Node | None:
        return None if node in self.heads else node.prev

    def _live_range_before(self, a: _Node, b: _Node) -> bool:
        if not a.uses:
            return self.ordering.is_defined_before(a.value, b.value)
        if self.ordering.is_root_of(a.value, b.value.instruction.parent):
            return False
        return self.ordering.uses_before_value_definition(a.uses, b.value)

    def _check_before(self, src: _Node | None, dest: _Node | None) -> bool:
        """Every value from `src` backwards dies before every value from `dest` onwards."""
        d = dest
        while d is not None:
            s = src
            while s is not None:
                if not self._live_range_before(s, d):
                    return False
                s = self._prev(s)
            d = self._next(d)
        return True

    def try_elide(self, copy: HloInstruction) -> bool:
        nodes = self.copy_map.get(copy)
        if nodes is None or copy.shape != copy.operands[0].shape:
            return False
        src, dest = nodes
        if src.next is dest:
            pass  # earlier removals already put both values in one buffer
        elif dest in self.heads:
            if not (self._check_before(src, self._next(dest))
                    and self._check_before(dest.prev, self._next(src))):
                return False
            self._splice_after(dest, src)
        elif src.next in self.heads:
            if not (self._check_before(self._prev(dest), src.next)
                    and self._check_before(src, self._next(dest))):
                return False
            self._splice_after(src.next, self._prev(dest))
        else:
            return False  # a middle value copied into the middle of another buffer
        self._remove_copy_value(copy, dest)
        return True

    def _splice_after(self, head: _Node, after: _Node) -> None:
        self.heads.discard(head)
        tail = head.prev
        tail.next = after.next
        after.next.prev = tail
        after.next = head
        head.prev = after

    def _remove_copy_value(self, copy: HloInstruction, node: _Node) -> None:
        operand_node = node.prev
        if node in self.heads:
            self.heads.discard(node)
            if node.next is not node:
                self.heads.add(node.next)
        operand_node.next = node.next
        node.next.prev = operand_node
        operand_node.uses = [u for u in operand_node.uses if u.instruction is not copy]
        for use in node.uses:
            operand_node.uses.append(use)
            entry = self.copy_map.get(use.instruction)
            if entry is not None:
                entry[0] = operand_node
        del self.copy_map[copy]


def remove_unnecessary_copies(module: HloModule, sequential: bool = False) -> int:
    """Remove every copy of a global computation whose removal is safe; returns how many. Safe
    for any order the dependencies allow, or with `sequential` for the module's schedule (its
    instruction order) only, which lets more copies go."""
    df = HloDataflowAnalysis.run(module, ssa_form=True)
    ordering = (SequentialHloOrdering if sequential else DependencyHloOrdering)(module, df)
    remover = CopyRemover(df, ordering)
    removed = 0
    limit = len(remover.copy_map) + 1
    for _ in range(limit):
        changed = False
        for comp in df.global_computations:
            for instr in list(comp.instructions):
                if instr.opcode == "copy" and remover.try_elide(instr):
                    instr.drop_all_control_deps()
                    instr.replace_all_uses_with(instr.operands[0])
                    removed += 1
                    changed = True
        if not changed:
            break
    return removed
