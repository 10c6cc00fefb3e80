"""TupleSimplifier ("tuple-simplifier"): removes tuples that are built only to be taken apart.

Runs in the `simplification` fixed point, after convolution canonicalization, in
`post-layout_assignment` and after fusion.

    %t = (f32[2], s32[]) tuple(%a, %b)
    %g = f32[2] get-tuple-element(%t), index=0       =>   uses of %g read %a

    %x = f32[2] get-tuple-element(%w), index=0
    %y = s32[] get-tuple-element(%w), index=1
    %r = (f32[2], s32[]) tuple(%x, %y)               =>   uses of %r read %w

A chain of get-tuple-elements is followed through nested tuples to the element's producer.
Declines: a tuple whose elements are not get-tuple-element 0..n-1 of one instruction with the same
shape (layout included); a chain that passes through a non-tuple; replacements whose sharding
differs. Control dependencies of a replaced instruction are relayed, not dropped; the tuples
that become dead are removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.hlo_utils import relay_control_dependencies, replace_instruction, shardings_compatible
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def whole_tuple_source(tup: HloInstruction) -> HloInstruction | None:
    """`x` when `tup` is tuple(gte(x,0), ..., gte(x,n-1)) with x's shape equal to the tuple's."""
    source = None
    for i, op in enumerate(tup.operands):
        if op.opcode != "get-tuple-element" or op.attrs.get("index") != i:
            return None
        if source is None:
            source = op.operands[0]
            if source.shape != tup.shape:
                return None
        elif op.operands[0] is not source:
            return None
    return source


def element_producer(gte: HloInstruction) -> HloInstruction | None:
    """For gte(...gte(tuple(...))...), the instruction producing the element, if every level is a tuple."""
    path = []
    node = gte
    while node.opcode == "get-tuple-element":
        path.append(node.attrs["index"])
        node = node.operands[0]
    for index in reversed(path):
        if node.opcode != "tuple":
            return None
        node = node.operands[index]
    return node


def _replace(instr: HloInstruction, replacement: HloInstruction) -> bool:
    if not shardings_compatible(instr, replacement):
        return False
    relay_control_dependencies(instr, replacement)
    return replace_instruction(instr, replacement)


@register_pass
@dataclass
class TupleSimplifier(HloPass):
    """Folds get-tuple-element(tuple(...)) and tuple(get-tuple-element(x, i)...) back to their sources."""

    name = "tuple-simplifier"
    exclude_entry_computation: bool = False

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in list(module.computations):
            if self.exclude_entry_computation and comp is module.entry:
                continue
            for instr in comp.post_order():
                if instr.parent is not comp:
                    continue
                if instr.opcode == "tuple":
                    source = whole_tuple_source(instr) if instr.operands else None
                elif instr.opcode == "get-tuple-element":
                    source = element_producer(instr)
                else:
                    continue
                if source is not None and _replace(instr, source):
                    changed = True
        return changed
