"""NormalizationFusion ("normalization-fusion"): softmax, log-softmax, layernorm and RMSNorm as one
fusion each, which XLA:GPU only forms through Triton (`SoftmaxRewriterTriton`).

Where it sits: hlo-opt's `fusion` pipeline (src/hlo_opt/pipelines.py), before priority fusion, as
XLA runs its Triton softmax rewriter. The fusions it makes are kCustom with backend_config
`{"fusion_backend_config":{"kind":"__norm"}}`; `hlo_common.fusion_analysis` gives them the
"normalization" emitter kind, priority fusion and multi-output fusion leave kCustom fusions alone,
and hlo-codegen emits them with `hlo_codegen.emitters.normalization` (one block, or one warp, per
row; the row stays in registers; reductions through warp shuffles and shared memory).

What it recognises (the "diamond" of XLA's rewriter), over full arrays of dims D whose last dim is
the minor one (default layout) and rows of n = D[-1] elements:

    x ... -> reduce(dims={last}) -> row ops -> broadcast back over the last dim -+
    |                                                                             v
    +-------------------- full-shape elementwise ops ---------------------> combine(x', b)

A *row reduction* is a reduce of one full array over its last dimension only, with a scalar
constant init and a one-op reducer (add, multiply, maximum, minimum); its result is broadcast back
(`broadcast(dimensions not naming the last dim)`, through elementwise row ops, reshapes and
bitcasts of row shape) and combined, in a full-shape elementwise op, with a value computed by
full-shape elementwise ops from the same input as the reduce (softmax: max then sum; log-softmax;
layernorm: mean then variance; RMSNorm: mean of squares). Diamonds that share nodes, or whose
input is computed only for the other's ops, become one group (reductions in sequence over the
same rows). Each group then grows:

- upwards: a full-shape elementwise producer all of whose users are in the group (the converts
  that float normalization leaves around bf16 inputs; the subtract of a softmax feeding the sum);
- downwards: while the group's one output has one user, a full-shape elementwise op of it (the
  layernorm scale and bias, the convert back to bf16);
- side inputs: scalar constants and broadcasts (of a constant, of the scale/bias vector) that the
  group reads are cloned in, and so is what such a broadcast reads when it is computed from iotas
  and constants alone (a causal attention mask: compare(iota, iota)), at most 16 ops.

A group becomes a fusion only if it has exactly one output, of the full shape (no other node is
read outside it), no path leaves it and comes back (which would make a cycle), and a row fits one
block: n <= MAX_ROW_ELEMENTS (8192: with 1024 threads each thread keeps at most 8 elements of
every row value in registers, so no local memory).

Against XLA's `SoftmaxRewriterTriton` (xla/backends/gpu/transforms/softmax_rewriter_triton.cc),
which declines the same way where it can: a reduce of more than one dimension or not of the
last one, an init that is not a constant, non-default layouts, a broadcast that names the
reduced dimension, a broadcast or reduce with another use, an input not reached through trivial
elementwise ops. Where it differs: XLA declines when its symbolic tiling or the Triton emitter
constraints reject the diamond (rows too long for a tile among them) and, optionally, when its
cost model says the unfused kernels are faster; ours uses the fixed row limit and no cost model.
XLA fuses one diamond per root and lets priority fusion fuse producers and consumers into the
Triton fusion later; ours merges the diamonds and grows the group itself (priority fusion never
fuses into a kCustom fusion here). Reductions over other dimensions (column reductions),
reductions whose result is not broadcast back, and variadic reduces are left to priority fusion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hlo_common.fusion_utils import FusionEditor
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.ir import HloComputation, HloInstruction, HloModule
from hlo_common.opcodes import is_elementwise

NORMALIZATION_KIND = "__norm"
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


class _Rows:
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


def _full_ancestors(x: HloInstruction, rows: _Rows, limit: int = 16) -> list[HloInstruction]:
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


def _between(source: HloInstruction, sink: HloInstruction, rows: _Rows) -> list[HloInstruction] | None:
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


def _diamond(reduce: HloInstruction, rows: _Rows) -> list[HloInstruction] | None:
    """The members of the diamond(s) `reduce` heads: from their common input to each full-shape
    elementwise op that combines the broadcast-back reduction with that input."""
    sources = _full_ancestors(reduce.operands[0], rows)
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
                        common = next((a for a in _full_ancestors(other, rows) if id(a) in source_ids),
                                      None)
                        if common is None:
                            continue
                        members = _between(common, combine, rows)
                        if members and any(m is reduce for m in members):
                            found.extend(members)
            elif rows.row(user):
                stack.append(user)
    return found or None


_INDEX_ONLY_LIMIT = 16


def _index_only(instr: HloInstruction) -> list[HloInstruction]:
    """The ops computing `instr` when they are only iotas, constants, broadcasts and elementwise
    ops (no parameter, at most _INDEX_ONLY_LIMIT ops), else []."""
    out, stack, seen = [], [instr], {id(instr)}
    while stack:
        node = stack.pop()
        op = node.opcode
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
class _Group:
    rows: _Rows
    members: dict[int, HloInstruction]
    cloned: set[int] = field(default_factory=set)  # cheap values cloned in (may have outside users)

    def add(self, instr: HloInstruction) -> None:
        self.members[id(instr)] = instr

    def __contains__(self, instr: HloInstruction) -> bool:
        return id(instr) in self.members


@register_pass
@dataclass
class NormalizationFusion(HloPass):
    """See the module docstring."""

    name = "normalization-fusion"
    max_row_elements: int = MAX_ROW_ELEMENTS

    def run(self, module: HloModule) -> bool:
        from hlo_opt.passes.priority_fusion import fusible_computations
        editor = FusionEditor(module)
        changed = False
        for comp in fusible_computations(module):
            changed |= self._run_on_computation(comp, editor)
        editor.flush()
        return changed

    def _run_on_computation(self, comp: HloComputation, editor: FusionEditor) -> bool:
        order = comp.post_order()
        position = {id(n): i for i, n in enumerate(order)}
        groups: list[_Group] = []
        owner: dict[int, int] = {}
        for instr in order:
            dims = row_reduction_dims(instr)
            if dims is None or dims[-1] > self.max_row_elements or id(instr) in owner:
                continue
            rows = _Rows(dims)
            members = _diamond(instr, rows)
            if members is None:
                continue
            group = _Group(rows, {})
            for m in members:
                group.add(m)
            groups.append(group)
            self._merge_owned(groups, owner, len(groups) - 1)
        for gi, group in enumerate(groups):  # grow all first: growing may merge groups
            if group.members:
                self._grow(group, groups, owner, gi)
        changed = False
        for gi, group in enumerate(groups):
            if not group.members:
                continue
            root = self._single_output(group, comp)
            if root is None or not self._convex(group, comp):
                continue
            self._fuse(group, root, comp, editor, position)
            changed = True
        return changed

    @staticmethod
    def _merge_owned(groups: list[_Group], owner: dict[int, int], gi: int) -> None:
        """Give group `gi` every node it shares with earlier groups (their members move over)."""
        group = groups[gi]
        for key in list(group.members):
            other = owner.get(key)
            if other is not None and other != gi and groups[other].rows.dims == group.rows.dims:
                for k2, n in groups[other].members.items():
                    group.members[k2] = n
                    owner[k2] = gi
                group.cloned |= groups[other].cloned
                groups[other].members = {}
        for key in group.members:
            owner[key] = gi

    def _grow(self, group: _Group, groups: list[_Group], owner: dict[int, int], gi: int) -> None:
        rows = group.rows
        changed = True
        while changed:
            changed = False
            # upwards: full-shape elementwise producers read only by the group
            for node in list(group.members.values()):
                for op in node.operands:
                    if op in group or not (rows.elementwise(op) and rows.full(op)):
                        continue
                    if op.users and all(u in group for u in op.users) and op is not op.parent.root:
                        other = owner.get(id(op))
                        if other is not None and other != gi:
                            if groups[other].rows.dims != rows.dims:
                                continue
                            for k2, n in groups[other].members.items():
                                group.members[k2] = n
                                owner[k2] = gi
                            group.cloned |= groups[other].cloned
                            groups[other].members = {}
                        group.add(op)
                        owner[id(op)] = gi
                        changed = True
            # downwards: the one output's one full-shape elementwise user
            outputs = self._outputs(group)
            if len(outputs) == 1:
                out = outputs[0]
                users = out.users
                if len(users) == 1 and out is not out.parent.root:
                    user = users[0]
                    if (user not in group and rows.elementwise(user) and rows.full(user)
                            and owner.get(id(user)) is None):
                        group.add(user)
                        owner[id(user)] = gi
                        changed = True
        # side inputs: constants and broadcasts read by the group, and what a broadcast reads when
        # it is computed from iotas and constants alone (an attention mask): cloned in
        for node in list(group.members.values()):
            for op in node.operands:
                if op not in group and rows.side_input(op):
                    group.add(op)
                    group.cloned.add(id(op))
                    if op.opcode == "broadcast":
                        for inner in _index_only(op.operands[0]):
                            group.add(inner)
                            group.cloned.add(id(inner))

    @staticmethod
    def _duplicable(instr: HloInstruction) -> bool:
        return instr.opcode == "constant" or (instr.opcode == "broadcast" and
                                              instr.operands[0].opcode in ("constant", "parameter"))

    def _outputs(self, group: _Group) -> list[HloInstruction]:
        out = []
        for node in group.members.values():
            if id(node) in group.cloned or self._duplicable(node):
                continue
            if node is node.parent.root or any(u not in group for u in node.users):
                out.append(node)
        return out

    def _single_output(self, group: _Group, comp: HloComputation) -> HloInstruction | None:
        outputs = self._outputs(group)
        if len(outputs) != 1 or not group.rows.full(outputs[0]):
            return None
        if not any(n.opcode == "reduce" for n in group.members.values()):
            return None
        return outputs[0]

    @staticmethod
    def _convex(group: _Group, comp: HloComputation) -> bool:
        """No value outside the group is computed from a group node and read by the group."""
        outside = [op for n in group.members.values() for op in n.operands if op not in group]
        memo: dict[int, bool] = {}

        def reaches(node: HloInstruction) -> bool:
            stack, seen = [node], {id(node)}
            while stack:
                cur = stack.pop()
                if memo.get(id(cur)):
                    return True
                for op in cur.operands:
                    if op in group:
                        return True
                    if id(op) not in seen:
                        seen.add(id(op))
                        stack.append(op)
            return False

        for op in outside:
            r = reaches(op)
            memo[id(op)] = r
            if r:
                return False
        return True

    @staticmethod
    def _fuse(group: _Group, root: HloInstruction, comp: HloComputation, editor: FusionEditor,
              position: dict[int, int]) -> None:
        fusion = editor.wrap_in_fusion(root, "kCustom")
        fusion.backend_config_data = {"fusion_backend_config": {"kind": NORMALIZATION_KIND}}
        rest = sorted((n for n in group.members.values() if n is not root),
                      key=lambda n: position.get(id(n), -1), reverse=True)
        for node in rest:
            if node in fusion.operands:
                editor.fuse_producer_into_consumer(node, fusion)


__all__ = ["MAX_ROW_ELEMENTS", "NORMALIZATION_KIND", "NormalizationFusion", "row_reduction_dims"]
