"""Building multi-output fusions (XLA's `HloFusionInstruction::FuseInstructionIntoMultiOutput` and
`MergeFusionInstructionIntoMultiOutput`) and the reachability that keeps them acyclic (XLA's
HloDfsReachability), for the `multi_output_fusion` pass; the rules that decide which fusions to
build are in `hlo_opt.fusion.multi_output_fusible`.

    >>> editor = MultiOutputEditor(FusionEditor(module))
    >>> gtes = editor.fuse_instruction_into_multi_output(reduce_fusion, exp)  # exp: one more output
    >>> editor.flush()                                        # drop the bodies merged away

The edits build on `hlo_opt.fusion.fusion_utils.FusionEditor` (its names and its producer
inlining): an extra output is first added as a parameter of the fusion, the parameter becomes a
root-tuple operand and the instruction's other users read a get-tuple-element, and then the
instruction is fused in as an ordinary producer, so the parameter turns into the computed value.
A multi-output sibling is taken apart into plain instructions first and fused back op by op (as
XLA does). `Reachability` is a bit matrix (numpy; row i = the ancestors of instruction i),
updated in O(n) per merge instead of rebuilt.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from hlo_opt.fusion.fusion_utils import FusionEditor
from hlo_common.hlo.hlo_creation_utils import add_embedded_computation
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_opt.fusion.multi_output_fusible import is_multi_output_fusion
from hlo_common.hlo.shape import Shape


class Reachability:
    """Which instructions of one computation reach which (XLA's HloDfsReachability), including
    control edges. Row i is the ancestor set of instruction i (itself included) as packed bits;
    `merge` keeps it exact after two instructions become one."""

    def __init__(self, comp: HloComputation):
        order = comp.post_order()
        self._index: dict[int, int] = {}
        self._nodes: list[HloInstruction] = []  # kept alive, so no id() is reused while indexed
        self._capacity = len(order) + max(64, len(order) // 4)  # merges add a few gtes each
        self._bits = np.zeros((self._capacity, (self._capacity + 7) // 8), dtype=np.uint8)
        self._n = 0
        for instr in order:
            self._add(instr, list(instr.operands) + list(instr.control_predecessors))

    def _grow(self) -> None:
        cap = self._capacity + max(64, self._capacity // 2)
        bits = np.zeros((cap, (cap + 7) // 8), dtype=np.uint8)
        bits[:self._capacity, :self._bits.shape[1]] = self._bits
        self._bits, self._capacity = bits, cap

    def _add(self, instr: HloInstruction, preds: Iterable[HloInstruction]) -> int:
        if self._n == self._capacity:
            self._grow()
        k = self._n
        self._n += 1
        self._index[id(instr)] = k
        self._nodes.append(instr)
        row = self._bits[k]
        for p in preds:
            j = self._index.get(id(p))
            if j is not None:
                np.bitwise_or(row, self._bits[j], out=row)
        row[k >> 3] |= np.uint8(1 << (k & 7))
        return k

    def is_present(self, instr: HloInstruction) -> bool:
        return id(instr) in self._index

    def is_reachable(self, a: HloInstruction, b: HloInstruction) -> bool:
        """Is there a path a -> ... -> b (a is b, or an ancestor of b)?"""
        i, j = self._index[id(a)], self._index[id(b)]
        return bool(self._bits[j, i >> 3] & (1 << (i & 7)))

    def is_connected(self, a: HloInstruction, b: HloInstruction) -> bool:
        return self.is_reachable(a, b) or self.is_reachable(b, a)

    def merge(self, kept: HloInstruction, gone: HloInstruction, new: Iterable[HloInstruction] = ()) -> None:
        """`gone` was merged into `kept` (which may be a new instruction replacing an old one, given
        as `kept` after `replace`); `new` are instructions added after it (get-tuple-elements)."""
        k, g = self._index[id(kept)], self._index[id(gone)]
        n = self._n
        combined = self._bits[k] | self._bits[g]
        col = ((self._bits[:n, k >> 3] >> (k & 7)) & 1) | ((self._bits[:n, g >> 3] >> (g & 7)) & 1)
        rows = np.nonzero(col)[0]
        self._bits[rows] |= combined
        del self._index[id(gone)]
        for instr in new:
            self._add(instr, [kept])

    def replace(self, old: HloInstruction, new: HloInstruction) -> None:
        """`new` took `old`'s place in the graph (same operands and users)."""
        self._index[id(new)] = self._index.pop(id(old))
        self._nodes.append(new)



class MultiOutputEditor:
    """The multi-output edits of one pass run, on top of `FusionEditor` (shared names, dead
    computations dropped by `flush`). Each edit returns the get-tuple-elements it created."""

    def __init__(self, editor: FusionEditor):
        self.editor = editor
        self.uniquer = editor.uniquer
        self._dead: list[HloComputation] = []  # computations of multi-output fusions merged away
        module = editor.module
        self._callers: dict[int, int] = {}  # fused computation -> how many fusions call it
        for comp in module.computations:
            for i in comp.instructions:
                if i.opcode == "fusion":
                    body = i.fused_computation()
                    self._callers[id(body)] = self._callers.get(id(body), 0) + 1

    def _own_body(self, fusion: HloInstruction) -> None:
        """Before `fusion`'s body is edited: a body other fusions call too is copied first."""
        body = fusion.fused_computation()
        if self._callers.get(id(body), 1) <= 1:
            return
        self._callers[id(body)] -= 1
        copy = body.clone(name=self.uniquer.unique(body.name))
        add_embedded_computation(self.editor.module, copy, before=fusion.parent)
        fusion.attrs["calls"] = copy
        self._callers[id(copy)] = 1

    def flush(self) -> None:
        self.editor.flush()
        if self._dead:
            module = self._dead[0].parent
            called = {id(c) for comp in module.computations for i in comp.instructions
                      for c in i.called_computations()}
            dead = {c for c in self._dead if id(c) not in called}  # a shared body stays
            module.computations = [c for c in module.computations if c not in dead]
            for c in dead:
                c.parent = None
            self._dead = []

    def wrap_in_fusion(self, instr: HloInstruction, kind: str) -> HloInstruction:
        return self.editor.wrap_in_fusion(instr, kind)

    def _gte(self, fusion: HloInstruction, index: int) -> HloInstruction:
        shape = fusion.shape.tuple_shapes[index]
        gte = HloInstruction(self.uniquer.unique("get-tuple-element"), "get-tuple-element", shape,
                             [fusion], {"index": index})
        return fusion.parent.add_instruction(gte)

    def add_output(self, fusion: HloInstruction, value: HloInstruction) -> tuple[int, list[HloInstruction]]:
        """Make `value` (an instruction of the fusion's body) one more output of `fusion`; a
        single-output fusion becomes multi-output first, its users reading output 0 through a
        get-tuple-element. Returns (the new output's index, get-tuple-elements created)."""
        self._own_body(fusion)
        body = fusion.fused_computation()
        created: list[HloInstruction] = []
        root = body.root
        if root.opcode != "tuple":
            users, was_root = list(fusion.users), fusion.is_root
            tup = HloInstruction(self.uniquer.unique("tuple"), "tuple", Shape.tuple_of([root.shape]), [root])
            body.add_instruction(tup)
            body.root = tup
            fusion.shape = tup.shape
            if users or was_root:
                gte = self._gte(fusion, 0)
                created.append(gte)
                for u in users:
                    u.replace_operand_with(fusion, gte)
                if was_root:
                    fusion.parent.root = gte
            root = tup
        root.append_operand(value)
        root.shape = Shape.tuple_of([o.shape for o in root.operands])
        fusion.shape = root.shape
        return len(root.operands) - 1, created

    def _parameter_for(self, fusion: HloInstruction, operand: HloInstruction) -> HloInstruction:
        body = fusion.fused_computation()
        for i, op in enumerate(fusion.operands):
            if op is operand:
                return body.parameter(i)
        number = len(fusion.operands)
        param = HloInstruction(f"param_{number}", "parameter", operand.shape)
        param.parameter_number = number
        first = next((i for i in body.instructions if i.opcode != "parameter"), None)
        body.add_instruction(param, before=first)
        fusion.append_operand(operand)
        return param

    def fuse_instruction_into_multi_output(self, fusion: HloInstruction,
                                           instr: HloInstruction) -> list[HloInstruction]:
        """XLA's FuseInstructionIntoMultiOutput: `instr` (a plain op or a single-output fusion;
        an operand of `fusion`, or a sibling of it) is computed inside `fusion`, and its other
        users read it from a new output."""
        self._own_body(fusion)
        param = self._parameter_for(fusion, instr)
        index, created = self.add_output(fusion, param)
        others = [u for u in instr.users if u is not fusion]
        was_root = instr.is_root
        if others or was_root:
            gte = self._gte(fusion, index)
            created.append(gte)
            for u in others:
                u.replace_operand_with(instr, gte)
            if was_root:
                instr.parent.root = gte
        self.editor.fuse_producer_into_consumer(instr, fusion)
        return created

    def merge_fusion_into_multi_output(self, fusion: HloInstruction,
                                       other: HloInstruction) -> list[HloInstruction]:
        """XLA's MergeFusionInstructionIntoMultiOutput: the sibling fusion `other` (multi-output
        or not) becomes part of `fusion`, its outputs appended after `fusion`'s."""
        if not is_multi_output_fusion(other):
            return self.fuse_instruction_into_multi_output(fusion, other)
        comp = other.parent
        body = other.fused_computation()
        mapping: dict[int, HloInstruction] = {}
        clones: list[HloInstruction] = []
        for instr in body.post_order():
            if instr.opcode == "parameter":
                mapping[id(instr)] = other.operands[instr.parameter_number]
                continue
            if instr is body.root:
                continue
            clone = instr.clone(new_operands=[mapping[id(o)] for o in instr.operands],
                                name=self.uniquer.unique(instr.name))
            mapping[id(instr)] = comp.add_instruction(clone)
            clones.append(clone)
        outputs = [mapping[id(o)] for o in body.root.operands]
        for user in list(other.users):  # get-tuple-elements (is_sibling_fusion_candidate)
            user.replace_all_uses_with(outputs[user.attrs["index"]])
            comp.remove_instruction(user)
        if other.is_root:  # the root tuple is rebuilt from the outputs (which then read the fusion)
            tup = HloInstruction(self.uniquer.unique("tuple"), "tuple", other.shape, outputs)
            comp.root = comp.add_instruction(tup)
        comp.remove_instruction(other)
        self._dead.append(body)
        created: list[HloInstruction] = []
        for clone in reversed(clones):
            if not clone.users and not clone.is_root:
                comp.remove_instruction(clone)
            elif all(u is fusion for u in clone.users) and not clone.is_root:
                self.editor.fuse_producer_into_consumer(clone, fusion)
            else:
                created += self.fuse_instruction_into_multi_output(fusion, clone)
        return created
