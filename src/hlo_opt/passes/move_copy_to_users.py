"""MoveCopyToUsers ("move_copy_to_users"): the copies layout assignment put in front of an op are
moved below it, or dropped where the op reads any layout (`xla/service/gpu/transforms/
move_copy_to_users.cc`).

Where it sits: pipeline "layout normalization", as a fixed point right after reshape-decomposer and
before layout_normalization. Layout assignment inserts a `copy` wherever a use asks for another
layout than its operand has, even when the ask was only a preference: a reduce whose operand is the
entry parameter still gets `copy(p)` into the row-reduction layout. XLA keeps that step and
removes the copy here, so the reduce reads the parameter as it is (a column reduction):

    c = f32[64,512,128]{1,2,0} copy(f32[64,512,128]{2,1,0} p)
    r = f32[64,128]{1,0} reduce(c, z), dimensions={1}
    becomes
    r = f32[64,128]{1,0} reduce(p, z), dimensions={1}

Other rewrites (each the op rebuilt on the copied value in that value's layout, then one copy to
the op's result layout), so that a copy travels down to where it is cheapest or meets a reduce:
copy -> pad, slice, dynamic-slice, single-input reduce-window, reverse, convert and elementwise
unary ops (not reduce-precision, bitcast-convert or copy itself); an elementwise binary op when
both operands are copies of values of the same shape and layout; a concatenate when every operand
is a copy of a value of one layout. Variadic reduces keep their copies (XLA's rule). Declines
everything else; returns whether anything moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_opt.layout_util import with_minor_to_major

# XLA's DfsHloVisitorWithDefault routes these to HandleElementwiseUnary (convert and reverse have
# their own handlers with the same effect here).
UNARY = frozenset({
    "abs", "cbrt", "ceil", "convert", "cosine", "count-leading-zeros", "erf", "exponential",
    "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one", "logistic",
    "negate", "not", "popcnt", "real", "reverse", "round-nearest-afz", "round-nearest-even", "rsqrt",
    "sign", "sine", "sqrt", "tan", "tanh",
})
BINARY = frozenset({
    "add", "and", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "or",
    "power", "remainder", "shift-left", "shift-right-arithmetic", "shift-right-logical", "subtract",
    "xor",
})
# Ops whose result keeps operand 0's layout: the copy of operand 0 moves below them.
LAYOUT_PRESERVING = frozenset({"pad", "slice", "dynamic-slice", "reduce-window"})


def _is_copy(instr: HloInstruction) -> bool:
    return instr.opcode == "copy" and instr.shape.is_array


def _rebuild_then_copy(comp: HloComputation, hlo: HloInstruction,
                       operands: list[HloInstruction], layout_of: HloInstruction) -> None:
    """hlo's op on `operands`, in the layout of `layout_of`, then a copy to hlo's own shape."""
    shape = with_minor_to_major(hlo.shape, layout_of.shape.minor_to_major)
    earlier = comp.add_instruction(hlo.clone(new_operands=operands, shape=shape, name=hlo.name),
                                   before=hlo)
    later = comp.add_new_instruction("copy", [earlier], hlo.shape, name="copy", before=hlo)
    later.metadata = list(hlo.metadata)
    comp.replace_instruction(hlo, later)


def move_copy(comp: HloComputation, hlo: HloInstruction) -> bool:
    """Apply XLA's rule for `hlo`'s opcode; True if `hlo` was replaced."""
    op = hlo.opcode
    if not hlo.operands or not hlo.shape.is_array:
        return False
    first = hlo.operands[0]
    if op == "reduce":
        if not _is_copy(first) or len(hlo.operands) != 2:
            return False
        new = comp.add_instruction(hlo.clone(new_operands=[first.operands[0], hlo.operands[1]],
                                             name=hlo.name), before=hlo)
        comp.replace_instruction(hlo, new)
        return True
    if op in UNARY or op in LAYOUT_PRESERVING:
        if not _is_copy(first) or first.operands[0].shape.rank != hlo.shape.rank:
            return False
        if op == "reduce-window" and len(hlo.operands) != 2:
            return False
        copied = first.operands[0]
        _rebuild_then_copy(comp, hlo, [copied] + list(hlo.operands[1:]), copied)
        return True
    if op in BINARY:
        a, b = hlo.operands
        if not (_is_copy(a) and _is_copy(b)):
            return False
        ca, cb = a.operands[0], b.operands[0]
        if ca.shape != cb.shape:
            return False
        _rebuild_then_copy(comp, hlo, [ca, cb], ca)
        return True
    if op == "concatenate":
        if not _is_copy(first):
            return False
        m2m = first.operands[0].shape.minor_to_major
        if not all(_is_copy(o) and o.operands[0].shape.minor_to_major == m2m for o in hlo.operands):
            return False
        _rebuild_then_copy(comp, hlo, [o.operands[0] for o in hlo.operands], first.operands[0])
        return True
    return False


@register_pass
@dataclass
class MoveCopyToUsers(HloPass):
    """Copies sink below layout-preserving users; a reduce drops the copy of its operand."""

    name = "move_copy_to_users"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.parent is comp:
                    changed |= move_copy(comp, instr)
        return changed
