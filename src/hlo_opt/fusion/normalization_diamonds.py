"""The "diamonds" normalization-fusion recognises (`hlo_opt.passes.normalization_fusion`, whose
docstring gives the rules): row reductions over the last dim of full arrays of dims D, the shape
classes relative to D (`Rows`: full arrays, one value per row, the elementwise ops and side inputs
a group may hold), the diamond of one row reduction, the index-only computations a side input may
bring along, and the `Group` the pass grows from them. Recognition only: the pass decides which
groups become fusions and builds them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise

MAX_ROW_ELEMENTS = 8192
_REDUCERS = ("add", "multiply", "maximum", "minimum")
_NOT_FUSED = ("rng", "rng-bit-generator", "rng-get-and-update-state")


def _default_layout(shape) -> bool:
    return shape.is_array and tuple(shape.minor_to_major) == tuple(range(shape.rank - 1, -1, -1))


def _nonunit(dims) -> tuple[int, ...]:
    return tuple(d for d in dims if d != 1)


def row_reduction_dims(instr: HloInstruction) -> tuple[int, ...] | None:
    """D (the reduced input's dims) when `instr` is a row reduction this pass fuses, else None."""
    if instr.opcode != "reduce" or len(instr.operands) != 2 or not instr.shape.is_array:
        return None
    x, init = instr.operands
    shape = x.shape
    if not shape.is_array or shape.rank < 1 or not _default_layout(shape):
        return None
    if list(instr.attrs["dimensions"]) != [shape.rank - 1]:
        return None
    n = shape.dims[-1]
    if n < 2 or n > MAX_ROW_ELEMENTS:
        return None
    if init.opcode != "constant" or init.shape.rank != 0:
        return None
    if classify_reducer(instr.attrs["to_apply"]) not in _REDUCERS:
        return None
    if not instr.shape.element_type.is_float:
        return None
    return tuple(shape.dims)


class Rows:
    """Shape classes relative to full dims D: full arrays, row arrays (one value per row)."""

    def __init__(self, dims: tuple[int, ...]):
        self.dims = dims
        self.rows = math.prod(dims[:-1])
        self.row_key = _nonunit(dims[:-1])

    def full(self, instr: HloInstruction) -> bool:
        s = instr.shape
        return s.is_array and tuple(s.dims) == self.dims and _default_layout(s)

    def row(self, instr: HloInstruction) -> bool:
        s = instr.shape
        return (s.is_array and s.num_elements == self.rows and _nonunit(s.dims) == self.row_key
                and _default_layout(s))

    def elementwise(self, instr: HloInstruction) -> bool:
        return (is_elementwise(instr.opcode) and instr.opcode not in _NOT_FUSED
                and not instr.has_side_effect and (self.full(instr) or self.row(instr)))

    def member(self, instr: HloInstruction) -> bool:
        """An op the emitter computes per row element or per row."""
        op = instr.opcode
        if self.elementwise(instr):
            return True
        if op == "reduce":
            return row_reduction_dims(instr) == self.dims
        if op in ("reshape", "bitcast"):
            return self.row(instr) and self.row(instr.operands[0])
        if op == "broadcast":
            src = instr.operands[0]
            if self.row(instr) and (self.row(src) or src.shape.rank == 0):
                return True
            return self.full(instr) and self._row_broadcast(instr)
        return False

    def _row_broadcast(self, instr: HloInstruction) -> bool:
        src = instr.operands[0]
        return (len(self.dims) - 1 not in instr.attrs["dimensions"] and self.row(src))

    def side_input(self, instr: HloInstruction) -> bool:
        """Cheap values the group clones in: scalar constants and broadcasts into a full or row
        array of anything (a constant, the scale vector along the last dim)."""
        if instr.opcode == "constant":
            return instr.shape.is_array and instr.shape.rank == 0
        if instr.opcode == "broadcast":
            return self.full(instr) or self.row(instr)
        return False


def full_ancestors(x: HloInstruction, rows: Rows, limit: int = 16) -> list[HloInstruction]:
    """`x` and the full-shape values it is computed from by full-shape elementwise ops."""
    out, stack, seen = [], [x], {id(x)}
    while stack and len(out) < limit:
        node = stack.pop()
        if not rows.full(node):
            continue
        out.append(node)
        if rows.elementwise(node):
            for op in node.operands:
                if id(op) not in seen:
                    seen.add(id(op))
                    stack.append(op)
    return out


def ops_between(source: HloInstruction, sink: HloInstruction, rows: Rows) -> list[HloInstruction] | None:
    """The member ops on paths from `source` (exclusive) to `sink` (inclusive), or None when a
    path goes through an op the emitter cannot compute."""
    reaches: dict[int, bool] = {}
    order: list[HloInstruction] = []
    stack: list[tuple[HloInstruction, int]] = [(sink, 0)]
    visiting = {id(sink)}
    while stack:
        node, k = stack.pop()
        if node is source:
            reaches[id(node)] = True
            continue
        if not rows.member(node):
            reaches[id(node)] = False
            continue
        if k < len(node.operands):
            stack.append((node, k + 1))
            op = node.operands[k]
            if id(op) not in visiting:
                visiting.add(id(op))
                stack.append((op, 0))
            continue
        reaches[id(node)] = any(reaches.get(id(op), False) for op in node.operands)
        order.append(node)
    return [n for n in order if reaches[id(n)]]


def diamond(reduce: HloInstruction, rows: Rows) -> list[HloInstruction] | None:
    """The members of the diamond(s) `reduce` heads: from their common input to each full-shape
    elementwise op that combines the broadcast-back reduction with that input."""
    sources = full_ancestors(reduce.operands[0], rows)
    source_ids = {id(s) for s in sources}
    found: list[HloInstruction] = []
    stack, seen = [reduce], {id(reduce)}
    while stack:  # forward over row ops to the broadcasts back
        node = stack.pop()
        for user in node.users:
            if id(user) in seen or not rows.member(user):
                continue
            seen.add(id(user))
            if user.opcode == "broadcast" and rows.full(user):
                for combine in user.users:
                    if not (rows.elementwise(combine) and rows.full(combine)):
                        continue
                    for other in combine.operands:
                        if other is user:
                            continue
                        common = next((a for a in full_ancestors(other, rows) if id(a) in source_ids),
                                      None)
                        if common is None:
                            continue
                        members = ops_between(common, combine, rows)
                        if members and any(m is reduce for m in members):
                            found.extend(members)
            elif rows.row(user):
                stack.append(user)
    return found or None


_INDEX_ONLY_LIMIT = 16


def index_only_ops(instr: HloInstruction, max_parameter_elements: int = 0) -> list[HloInstruction]:
    """The ops computing `instr` when they are only iotas, constants, broadcasts and elementwise
    ops of those and of parameters with fewer than `max_parameter_elements` elements (at most
    _INDEX_ONLY_LIMIT ops; the parameters are not among them), else []."""
    out, stack, seen = [], [instr], {id(instr)}
    while stack:
        node = stack.pop()
        op = node.opcode
        if op == "parameter" and node.shape.is_array and node.shape.num_elements < max_parameter_elements:
            continue
        if not (op in ("iota", "constant", "broadcast") or (is_elementwise(op) and op not in _NOT_FUSED)):
            return []
        if op == "constant" and node.shape.num_elements > 1:
            return []
        out.append(node)
        if len(out) > _INDEX_ONLY_LIMIT:
            return []
        for o in node.operands:
            if id(o) not in seen:
                seen.add(id(o))
                stack.append(o)
    return out


@dataclass
class Group:
    rows: Rows
    members: dict[int, HloInstruction]
    cloned: set[int] = field(default_factory=set)  # cheap values cloned in (may have outside users)

    def add(self, instr: HloInstruction) -> None:
        self.members[id(instr)] = instr

    def __contains__(self, instr: HloInstruction) -> bool:
        return id(instr) in self.members

    def clone_side_input(self, op: HloInstruction) -> None:
        """Take in a side input (a scalar constant, a broadcast) as a clone, with what such a
        broadcast reads when that is computed from iotas, constants and smaller parameters."""
        self.add(op)
        self.cloned.add(id(op))
        if op.opcode == "broadcast":
            for inner in index_only_ops(op.operands[0], op.shape.num_elements):
                self.add(inner)
                self.cloned.add(id(inner))
