"""The computation partitioner (XLA's `computation_partitioner.cc`): a fused computation cut into
subgraphs that can each be emitted as one function of the output index.

Where it sits: the elemental emitter (hlo_codegen.elemental) emits one kernel-IR function per
`Subgraph` and calls it from users in other subgraphs; emitters pick the root subgraph.

Why: an instruction read by several users at different indices would be recomputed once per
user if everything were inlined, and chains of such splits grow exponentially. The rules (as in
XLA's `PartitionGraphByIndexing` + union-find merge):

1. Each instruction gets an *indexing id*. Non-elementwise instructions (and forced roots) get a
   fresh one; an elementwise instruction (or tuple) reuses its users' id when all users share
   one and none is a concatenate, else gets a fresh one; instructions without users share id 0.
2. An instruction is merged into its users' subgraph when it has one user, or when every user
   has the instruction's own indexing id - unless a user is a concatenate or reads it as a
   gather index with more than one component.
3. A subgraph's roots are its instructions with no users or with a user in another subgraph.

Parameters are not partitioned: they are loads, emitted wherever they are read.

    >>> from hlo_common.hlo.parser import parse_module
    >>> m = parse_module('''
    ... f { p = f32[4,4] parameter(0)
    ...     l = f32[4,4] log(p)
    ...     t = f32[4,4] transpose(l), dimensions={1,0}
    ...     ROOT a = f32[4,4] add(l, t) }
    ... ENTRY e { p = f32[4,4] parameter(0)
    ...     ROOT r = f32[4,4] fusion(p), kind=kLoop, calls=f }''')
    >>> print(partition_computation(m.computation("f")).to_string())
    PartitionedComputation f:
      SUBGRAPH f_a {
        t = f32[4,4]{1,0} transpose(l), dimensions={1,0}
        ROOT a = f32[4,4]{1,0} add(l, t)
      }
      SUBGRAPH f_l {
        ROOT l = f32[4,4]{1,0} log(p)
      }
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape

_ROOT_INDEXING = 0


def sanitize_name(name: str) -> str:
    """An LLVM/PTX-safe identifier (XLA's SanitizeFunctionName): `.` and `-` become `_`."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return out if out and not out[0].isdigit() else "_" + out


@dataclass(eq=False)
class Subgraph:
    """Instructions emitted together as one function of the first root's index."""

    name: str
    instructions: list[HloInstruction]  # post order
    roots: list[HloInstruction]
    members: set[int] = field(default_factory=set)

    @property
    def index_shape(self) -> Shape:
        """Shape whose indices the function takes: the first root's (its first leaf for tuples)."""
        shape = self.roots[0].shape
        while shape.is_tuple:
            shape = shape.tuple_shapes[0]
        return shape

    def contains(self, instr: HloInstruction) -> bool:
        return id(instr) in self.members

    def to_string(self, indent: str = "  ") -> str:
        lines = [f"{indent}SUBGRAPH {self.name} {{"]
        for instr in self.instructions:
            root = "ROOT " if instr in self.roots else ""
            lines.append(f"{indent}  {root}{_instr_text(instr)}")
        lines.append(f"{indent}}}")
        return "\n".join(lines)


def _instr_text(instr: HloInstruction) -> str:
    from hlo_common.hlo.printer import print_instruction

    text = print_instruction(instr)
    return text.replace("ROOT ", "", 1).lstrip("%").replace("(%", "(").replace(", %", ", ")


class PartitionedComputation:
    """The subgraphs of one computation, in order of their first root in post order."""

    def __init__(self, computation: HloComputation, subgraphs: list[Subgraph]):
        self.computation = computation
        self.subgraphs = subgraphs
        self._by_instr = {id(i): s for s in subgraphs for i in s.instructions}

    def find_subgraph(self, instr: HloInstruction) -> Subgraph:
        return self._by_instr[id(instr)]

    @property
    def root_subgraph(self) -> Subgraph:
        return self.find_subgraph(self.computation.root)

    def to_string(self) -> str:
        return "\n".join([f"PartitionedComputation {self.computation.name}:"]
                         + [s.to_string() for s in sorted(self.subgraphs, key=lambda s: s.name)])


def _indexing_ids(computation: HloComputation, is_root: Callable[[HloInstruction], bool]) -> dict[int, int]:
    ids: dict[int, int] = {}
    counter = [1]

    def fresh() -> int:
        counter[0] += 1
        return counter[0] - 1

    for instr in reversed(computation.post_order()):  # users before operands
        if is_root(instr) or (instr.opcode != "tuple" and not is_elementwise(instr.opcode)):
            ids[id(instr)] = fresh()
        elif not instr.users:
            ids[id(instr)] = _ROOT_INDEXING
        else:
            user_ids = {ids[id(u)] for u in instr.users}
            shared = len(user_ids) == 1 and not any(u.opcode == "concatenate" for u in instr.users)
            ids[id(instr)] = user_ids.pop() if shared else fresh()
    return ids


def _can_merge(instr: HloInstruction, ids: dict[int, int], is_root: Callable) -> bool:
    if is_root(instr) or not instr.users:
        return False
    if len(instr.users) > 1 and any(ids[id(u)] != ids[id(instr)] for u in instr.users):
        return False
    for user in instr.users:
        if user.opcode == "concatenate":
            return False
        if (user.opcode == "gather" and user.operands[1] is instr and instr.shape.rank >= 2
                and instr.shape.dims[1] > 1):
            return False
    return True


def partition_computation(computation: HloComputation,
                          is_subgraph_root: Callable[[HloInstruction], bool] | None = None
                          ) -> PartitionedComputation:
    """Partition `computation`; `is_subgraph_root` forces instructions to be roots (for heroes)."""
    is_root = is_subgraph_root or (lambda instr: False)
    order = [i for i in computation.post_order() if i.opcode != "parameter"]
    ids = _indexing_ids(computation, is_root)
    parent = {id(i): id(i) for i in order}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for instr in order:
        if _can_merge(instr, ids, is_root):
            for user in instr.users:
                parent[find(id(instr))] = find(id(user))
    clusters: dict[int, list[HloInstruction]] = {}
    for instr in order:
        clusters.setdefault(find(id(instr)), []).append(instr)
    subgraphs = []
    for instrs in clusters.values():
        members = {id(i) for i in instrs}
        roots = [i for i in instrs if not i.users or any(id(u) not in members for u in i.users)]
        name = sanitize_name(f"{computation.name}_" + "_".join(r.name for r in roots))
        subgraphs.append(Subgraph(name, instrs, roots, members))
    position = {id(i): k for k, i in enumerate(order)}
    subgraphs.sort(key=lambda s: min(position[id(r)] for r in s.roots))
    return PartitionedComputation(computation, subgraphs)
