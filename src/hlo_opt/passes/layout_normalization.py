"""LayoutNormalization ("layout_normalization"): rewrites ops to work on default-layout shapes, with
bitcasts carrying values between the normalized ops and the original shapes
(`xla/service/layout_normalization.cc`).

Where it sits: "layout normalization" (after reshape-decomposer), again in "hlo normalization"
and "post-layout_assignment". Afterwards emitters see default layouts on nearly every op, and
physical transposes are explicit: a layout-changing copy becomes a transpose.

    a = f32[4,8]{0,1} add(b0, b1)              b0, b1: bitcasts of default-layout values x0, x1
    becomes
    a' = f32[8,4]{1,0} add(x0, x1)             the same physical computation, default layout
    a  = f32[4,8]{0,1} bitcast(a')             for users that still want the old shape

    c = f32[4,8]{1,0} copy(f32[4,8]{0,1} y)    becomes   transpose(normalized y), dimensions={1,0}

For a shape `s` with physical order `P` (major to minor), the normalized shape has dims
`s.dims[P[k]]`; attributes are permuted accordingly (slice bounds, padding, window, concatenate
and iota dimensions, reverse dimensions, dynamic-slice start indices, broadcast dimensions,
transpose permutations); cuDNN convolution calls renumber their dim_labels. Ops without a
handler (dot, reduce, gather, scatter, sort, convolution,
custom calls, fusions, parameters, ...) keep their layout and get `bitcast(bitcast(op))` in front
of their users, so the users see a bitcast of a normalized value (XLA's DefaultAction).
Skips ops whose operands and result all have default layouts; declines (default action) where a
precondition fails, e.g. an elementwise op whose operand layout differs from its result's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.attributes import PaddingConfig, SliceSpec, Window
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.opcodes import OPCODES
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.layout_util import (
    compose_permutations, has_default_layout, inverse_permutation, is_identity, make_bitcast,
    maybe_bitcast, normalized, permute, physical_order, reshape_is_bitcast,
)
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.cudnn_conv_utils import is_cudnn_conv, make_dim_labels, role_shapes


def _m2m_equal(a: Shape, b: Shape) -> bool:
    return a.is_array and b.is_array and a.minor_to_major == b.minor_to_major


class LayoutNormalizationVisitor:
    """Rewrites the instructions of one computation in post order."""

    def __init__(self, comp: HloComputation):
        self.comp = comp
        self.created: set[int] = set()
        self.changed = False
        self.next_of: dict[int, HloInstruction] = {}

    def run(self) -> bool:
        order = self.comp.post_order()
        self.next_of = {id(a): b for a, b in zip(order, order[1:])}
        for hlo in order:
            if hlo.parent is not self.comp or id(hlo) in self.created or not self.should_process(hlo):
                continue
            handler = _HANDLERS.get(hlo.opcode) or _category_handler(hlo.opcode)
            handler(self, hlo)
        return self.changed

    @staticmethod
    def should_process(hlo: HloInstruction) -> bool:
        return not (has_default_layout(hlo.shape) and all(has_default_layout(o.shape) for o in hlo.operands))

    # -- helpers -------------------------------------------------------------------------------
    def add(self, hlo: HloInstruction, opcode: str, operands, shape: Shape, attrs=None) -> HloInstruction:
        name = hlo.name if opcode == hlo.opcode else opcode
        new = self.comp.add_new_instruction(opcode, operands, shape, attrs, name=name, before=hlo)
        new.metadata = list(hlo.metadata)
        self.created.add(id(new))
        return new

    def clone(self, hlo: HloInstruction, operands, shape: Shape, **attrs) -> HloInstruction:
        new = hlo.clone(new_operands=operands, shape=shape, name=hlo.name)
        new.attrs.update(attrs)
        self.comp.add_instruction(new, before=hlo)
        self.created.add(id(new))
        return new

    def bitcast(self, value: HloInstruction, shape: Shape, before: HloInstruction) -> HloInstruction:
        out = maybe_bitcast(value, shape, before=before)
        self.created.add(id(out))
        return out

    def normalized_input(self, operand: HloInstruction, before: HloInstruction) -> HloInstruction:
        """The default-layout value `operand` is a bitcast of (XLA's GetNormalizedInput)."""
        if has_default_layout(operand.shape):
            return operand
        want = normalized(operand.shape)
        if operand.opcode == "bitcast" and has_default_layout(operand.operands[0].shape) \
                and operand.operands[0].shape.compatible(want):
            return operand.operands[0]
        bc = make_bitcast(operand, want, before=before)
        self.created.add(id(bc))
        return bc

    def replace(self, hlo: HloInstruction, new_value: HloInstruction) -> None:
        result = self.bitcast(new_value, hlo.shape, before=hlo)
        self.comp.replace_instruction(hlo, result)
        self.changed = True

    # -- handlers ------------------------------------------------------------------------------
    def default_action(self, hlo: HloInstruction) -> None:
        shape = hlo.shape
        if not hlo.users or not shape.is_array:
            return
        after = self.next_of.get(id(hlo))
        after = after if after is not None and after.parent is self.comp else None
        to_normalized = self.bitcast(hlo, normalized(shape), before=after)
        if to_normalized is hlo:
            return
        back = self.bitcast(to_normalized, shape, before=after)
        for user in list(hlo.users):
            if user is not to_normalized:
                user.replace_operand_with(hlo, back)
        self.changed = True

    def elementwise(self, hlo: HloInstruction) -> None:
        """Unary, binary and ternary elementwise ops (select, clamp): same op on normalized inputs."""
        s = hlo.shape
        if not s.is_array or any(o.shape.rank == s.rank and s.rank > 0 and not _m2m_equal(o.shape, s)
                                 for o in hlo.operands):
            return self.default_action(hlo)
        inputs = [self.normalized_input(o, hlo) for o in hlo.operands]
        self.replace(hlo, self.clone(hlo, inputs, normalized(s)))

    def bitcast_convert(self, hlo: HloInstruction) -> None:
        op, s = hlo.operands[0].shape, hlo.shape
        if op.rank == s.rank:
            return self.elementwise(hlo)
        larger, smaller = (op, s) if op.rank > s.rank else (s, op)
        last = larger.rank - 1
        if larger.minor_to_major[0] != last or physical_order(larger)[:-1] != physical_order(smaller):
            return self.default_action(hlo)
        x = self.normalized_input(hlo.operands[0], hlo)
        self.replace(hlo, self.clone(hlo, [x], normalized(s)))

    def constant(self, hlo: HloInstruction) -> None:
        s = hlo.shape
        if not s.is_array or s.num_elements == 0 or has_default_layout(s) or hlo.literal is None:
            return
        hlo.literal = np.transpose(np.asarray(hlo.literal), physical_order(s))
        hlo.shape = normalized(s)
        after = self.next_of.get(id(hlo))
        back = make_bitcast(hlo, s, before=after if after is not None and after.parent is self.comp else None)
        self.created.add(id(back))
        hlo.replace_all_uses_with(back)
        self.changed = True

    def slice(self, hlo: HloInstruction) -> None:
        s, op = hlo.shape, hlo.operands[0]
        if not _m2m_equal(s, op.shape):
            return self.default_action(hlo)
        spec = SliceSpec(tuple(permute(hlo.attrs["slice"].dims, physical_order(s))))
        x = self.normalized_input(op, hlo)
        self.replace(hlo, self.add(hlo, "slice", [x], normalized(s), {"slice": spec}))

    def dynamic_slice(self, hlo: HloInstruction) -> None:
        s, op = hlo.shape, hlo.operands[0]
        if not _m2m_equal(s, op.shape) or len(hlo.operands) != s.rank + 1:
            return self.default_action(hlo)
        order = physical_order(s)
        starts = permute(hlo.operands[1:], order)
        sizes = tuple(permute(hlo.attrs["dynamic_slice_sizes"], order))
        x = self.normalized_input(op, hlo)
        self.replace(hlo, self.clone(hlo, [x] + starts, normalized(s), dynamic_slice_sizes=sizes))

    def dynamic_update_slice(self, hlo: HloInstruction) -> None:
        s, op, update = hlo.shape, hlo.operands[0], hlo.operands[1]
        if not _m2m_equal(s, op.shape) or not _m2m_equal(s, update.shape) or len(hlo.operands) != s.rank + 2:
            return self.default_action(hlo)
        starts = permute(hlo.operands[2:], physical_order(s))
        x, u = self.normalized_input(op, hlo), self.normalized_input(update, hlo)
        self.replace(hlo, self.clone(hlo, [x, u] + starts, normalized(s)))

    def concatenate(self, hlo: HloInstruction) -> None:
        s = hlo.shape
        if not all(_m2m_equal(o.shape, s) for o in hlo.operands):
            return self.default_action(hlo)
        dim = inverse_permutation(physical_order(s))[hlo.attrs["dimensions"][0]]
        inputs = [self.normalized_input(o, hlo) for o in hlo.operands]
        self.replace(hlo, self.add(hlo, "concatenate", inputs, normalized(s), {"dimensions": (dim,)}))

    def reduce_window(self, hlo: HloInstruction) -> None:
        s = hlo.shape
        if not s.is_array or not _m2m_equal(s, hlo.operands[0].shape):
            return self.default_action(hlo)
        window = Window(tuple(permute(hlo.attrs["window"].dims, physical_order(s))))
        x = self.normalized_input(hlo.operands[0], hlo)
        self.replace(hlo, self.clone(hlo, [x, hlo.operands[1]], normalized(s), window=window))

    def broadcast(self, hlo: HloInstruction) -> None:
        s, op = hlo.shape, hlo.operands[0]
        out_inverse = inverse_permutation(physical_order(s))
        dims = tuple(out_inverse[d] for d in compose_permutations(hlo.attrs.get("dimensions", ()),
                                                                   physical_order(op.shape)))
        x = self.normalized_input(op, hlo)
        self.replace(hlo, self.add(hlo, "broadcast", [x], normalized(s), {"dimensions": dims}))

    def iota(self, hlo: HloInstruction) -> None:
        s = hlo.shape
        dim = inverse_permutation(physical_order(s))[hlo.attrs.get("iota_dimension", 0)]
        self.replace(hlo, self.add(hlo, "iota", [], normalized(s), {"iota_dimension": dim}))

    def reshape(self, hlo: HloInstruction) -> None:
        s, op = hlo.shape, hlo.operands[0]
        if not s.is_array or not reshape_is_bitcast(op.shape, s):
            return self.default_action(hlo)
        x = self.normalized_input(op, hlo)
        self.replace(hlo, self.add(hlo, "reshape", [x], normalized(s)))

    def transpose(self, hlo: HloInstruction) -> None:
        s, op = hlo.shape, hlo.operands[0]
        x = self.normalized_input(op, hlo)
        inv = inverse_permutation(physical_order(op.shape))
        perm = compose_permutations(compose_permutations(inv, hlo.attrs["dimensions"]), physical_order(s))
        if is_identity(perm):
            self.replace(hlo, x)
            return
        self.replace(hlo, self.add(hlo, "transpose", [x], normalized(s), {"dimensions": perm}))

    def copy(self, hlo: HloInstruction) -> None:
        s, op = hlo.shape, hlo.operands[0]
        if not s.is_array:
            return self.default_action(hlo)
        x = self.normalized_input(op, hlo)
        perm = compose_permutations(inverse_permutation(physical_order(op.shape)), physical_order(s))
        if is_identity(perm):
            self.replace(hlo, self.add(hlo, "copy", [x], normalized(s)))
            return
        self.replace(hlo, self.add(hlo, "transpose", [x], normalized(s), {"dimensions": perm}))

    def reverse(self, hlo: HloInstruction) -> None:
        s, op = hlo.shape, hlo.operands[0]
        if not _m2m_equal(s, op.shape):
            return self.default_action(hlo)
        inv = inverse_permutation(physical_order(s))
        dims = tuple(sorted(inv[d] for d in hlo.attrs.get("dimensions", ())))
        x = self.normalized_input(op, hlo)
        self.replace(hlo, self.add(hlo, "reverse", [x], normalized(s), {"dimensions": dims}))

    def custom_call(self, hlo: HloInstruction) -> None:
        """cuDNN convolutions (XLA's NormalizeLayoutForGpuCustomCalls): operands and result in their
        physical dim order, dim_labels renumbered to match; other custom calls: default action."""
        if not is_cudnn_conv(hlo) or not hlo.shape.is_tuple:
            return self.default_action(hlo)
        inp, ker, out = role_shapes(hlo)
        d = hlo.attrs["dim_labels"]

        def pos(shape: Shape):
            order = physical_order(shape)
            return lambda dim: order.index(dim)

        pi, pk, po = pos(inp), pos(ker), pos(out)
        labels = make_dim_labels((pi(d.input_batch), pi(d.input_feature), tuple(map(pi, d.input_spatial))),
                                 (pk(d.kernel_input_feature), pk(d.kernel_output_feature),
                                  tuple(map(pk, d.kernel_spatial))),
                                 (po(d.output_batch), po(d.output_feature), tuple(map(po, d.output_spatial))))
        shape = Shape.tuple_of([normalized(s) for s in hlo.shape.tuple_shapes])
        inputs = [self.normalized_input(o, hlo) for o in hlo.operands]
        call = self.clone(hlo, inputs, shape, dim_labels=labels)
        leaves = []
        for k, s in enumerate(hlo.shape.tuple_shapes):
            gte = self.add(hlo, "get-tuple-element", [call], shape.tuple_shapes[k], {"index": k})
            leaves.append(self.bitcast(gte, s, before=hlo))
        self.comp.replace_instruction(hlo, self.add(hlo, "tuple", leaves, hlo.shape))
        self.changed = True

    def pad(self, hlo: HloInstruction) -> None:
        s, op = hlo.shape, hlo.operands[0]
        if not _m2m_equal(s, op.shape):
            return self.default_action(hlo)
        config = PaddingConfig(tuple(permute(hlo.attrs["padding"].dims, physical_order(s))))
        x = self.normalized_input(op, hlo)
        self.replace(hlo, self.add(hlo, "pad", [x, hlo.operands[1]], normalized(s), {"padding": config}))


_HANDLERS = {
    "constant": LayoutNormalizationVisitor.constant,
    "slice": LayoutNormalizationVisitor.slice,
    "dynamic-slice": LayoutNormalizationVisitor.dynamic_slice,
    "dynamic-update-slice": LayoutNormalizationVisitor.dynamic_update_slice,
    "concatenate": LayoutNormalizationVisitor.concatenate,
    "reduce-window": LayoutNormalizationVisitor.reduce_window,
    "broadcast": LayoutNormalizationVisitor.broadcast,
    "iota": LayoutNormalizationVisitor.iota,
    "bitcast-convert": LayoutNormalizationVisitor.bitcast_convert,
    "reshape": LayoutNormalizationVisitor.reshape,
    "transpose": LayoutNormalizationVisitor.transpose,
    "copy": LayoutNormalizationVisitor.copy,
    "reverse": LayoutNormalizationVisitor.reverse,
    "pad": LayoutNormalizationVisitor.pad,
    "custom-call": LayoutNormalizationVisitor.custom_call,
}
# Elementwise ops XLA's visitor dispatches to HandleElementwiseUnary / Binary / HandleTernary.
_NOT_ELEMENTWISE_HERE = frozenset({"copy", "bitcast-convert", "stochastic-convert"})


def _category_handler(opcode: str):
    op = OPCODES.get(opcode)
    if op is not None and op.is_elementwise and opcode not in _NOT_ELEMENTWISE_HERE:
        return LayoutNormalizationVisitor.elementwise
    return LayoutNormalizationVisitor.default_action


@register_pass
@dataclass
class LayoutNormalization(HloPass):
    """Every op it can handle computes on default-layout shapes; bitcasts connect the rest."""

    name = "layout_normalization"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            changed |= LayoutNormalizationVisitor(comp).run()
        return changed
