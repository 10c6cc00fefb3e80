"""FloatNormalization ("float-normalization-bf16"): ops the GPU cannot compute in bf16 get converts to
f32 around them (XLA's `float_normalization.cc` with `GpuFloatSupport(cc, BF16)`).

Where it sits: first in `post-layout_assignment` (XLA's OptimizeHloPostLayoutAssignment), before
`simplify-fp-conversions`, which removes the f32 -> bf16 -> f32 round trips left between two
such ops, so that fused code keeps f32 intermediates as XLA:GPU does by default.

    %t = bf16[8] tanh(bf16[8] %x)                   %c = f32[8] convert(%x)
                                              =>    %t = f32[8] tanh(%c)
                                                    %b = bf16[8] convert(%t)    (users read %b)

What the GPU supports in bf16 (`GpuFloatSupport::IsSupported`, by compute capability of
`device`): data movement (broadcast, concatenate, copy, dynamic-(update-)slice, gather, pad,
reshape, reverse, scatter, select, slice, transpose, bitcast, constant, collectives), compare,
convert, bitcast-convert, reduce-precision, xor; exp and log; abs, maximum, minimum, negate from
Ampere (sm_80); add, multiply, subtract from Hopper (sm_90); a dot (bf16 GEMMs); a reduce or sort
whose computation uses only supported ops. Anything else (divide, tanh, rsqrt, sqrt, power, erf,
sine, convolution, reduce-window, iota, ...) computes in f32. Mixed bf16/f32 operands are
allowed only where XLA allows them (call, conditional, convert, custom-call, tuples, while; a
bf16 x bf16 -> f32 dot); elsewhere XLA's rule applies: all bf16 when every output is bf16 and
each f32 operand is one whose precision is the output's (then f32 operands are converted
down), otherwise all f32.

XLA's rules, with `xla_allow_excess_precision` on (its default): a bf16 operand that is itself
`convert(f32 y)` is replaced by `y` rather than converted back up, and a user that converts the
bf16 result to f32 reads the f32 result directly. A computation a changed instruction calls
(reducer, comparator) is cloned and its bf16 parameters and root become f32. Computations only
all-reduce and reduce-scatter call are left alone (a clone is made when they are shared).
Tuple-shaped sorts, all-reduces and reduce-scatters are handled per output. Instructions skipped,
as in XLA: tuple, get-tuple-element, constant, domain, parameter, fusion, convert, call,
custom-call, while, conditional, bitcast(-convert), async ops and side-effecting ops. When
anything changed, tuple-simplifier and dce tidy up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.hlo_utils import NameUniquer, call_sites_of, clone_computation, computation_callers
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape

BF16 = PRIMITIVE_TYPES["bf16"]
F32 = PRIMITIVE_TYPES["f32"]

SKIPPED = frozenset({
    "tuple", "get-tuple-element", "constant", "domain", "parameter", "fusion", "convert", "call",
    "custom-call", "while", "conditional", "bitcast-convert", "bitcast", "async-start", "async-done",
})
# FloatSupport's defaults: these take and give low precision, and mix precisions, freely.
PASS_THROUGH = frozenset({"call", "conditional", "custom-call", "domain", "get-tuple-element", "tuple",
                          "while", "opt-barrier"})
MIXED_OK = frozenset({"call", "conditional", "convert", "custom-call", "get-tuple-element", "tuple",
                      "while", "opt-barrier"})
NO_NORMALIZED_CALLEES = frozenset({"all-reduce", "reduce-scatter", "all-reduce-start"})
PER_OUTPUT = frozenset({"sort", "all-reduce", "reduce-scatter"})

# GpuFloatSupport::IsSupported for a bf16 low-precision type.
ALWAYS_SUPPORTED = frozenset({
    "all-reduce", "all-reduce-start", "all-reduce-done", "reduce-scatter", "dot", "ragged-dot",
    "all-gather", "all-to-all", "broadcast", "collective-permute", "concatenate", "copy", "constant",
    "dynamic-slice", "dynamic-update-slice", "gather", "pad", "ragged-all-to-all", "reshape", "reverse",
    "scatter", "select", "select-and-scatter", "slice", "transpose", "bitcast", "bitcast-convert",
    "convert", "compare", "reduce-precision", "xor", "exponential", "log",
})
AMPERE_SUPPORTED = frozenset({"abs", "maximum", "minimum", "negate"})
HOPPER_SUPPORTED = frozenset({"add", "multiply", "subtract"})
SUPPORTED_IF_COMPUTATION_IS = frozenset({"reduce", "sort"})

# FloatSupport::EffectiveOperandPrecisionIsOutputPrecision: ops whose operand (every one, or the
# ones listed) only moves values, so computing them in the output's precision loses nothing.
SAME_PRECISION_OPS = frozenset({
    "abs", "all-gather", "all-to-all", "broadcast", "clamp", "collective-permute", "concatenate",
    "convert", "copy", "domain", "get-tuple-element", "maximum", "minimum", "pad", "reshape", "reverse",
    "slice", "sort", "transpose", "tuple", "opt-barrier",
})
SAME_PRECISION_OPERANDS = {"dynamic-slice": (0,), "dynamic-update-slice": (0, 1), "gather": (0,),
                           "select": (1, 2)}


def _count(shape: Shape, etype: PrimitiveType) -> int:
    return sum(1 for _, leaf in shape.leaf_shapes() if leaf.is_array and leaf.element_type is etype)


def _leaf_count(shape: Shape) -> int:
    return len(shape.leaf_shapes())


def _retyped(shape: Shape, old: PrimitiveType, new: PrimitiveType) -> Shape:
    if shape.is_tuple:
        return Shape.tuple_of([_retyped(s, old, new) for s in shape.tuple_shapes])
    return shape.with_element_type(new) if shape.is_array and shape.element_type is old else shape


@dataclass(frozen=True)
class GpuBf16Support:
    """XLA's GpuFloatSupport for bf16 on a device of compute capability `major`."""

    major: int = 9

    def is_supported(self, instr: HloInstruction) -> bool:
        op = instr.opcode
        if op in ALWAYS_SUPPORTED:
            return True
        if op in AMPERE_SUPPORTED:
            return self.major >= 8
        if op in HOPPER_SUPPORTED:
            return self.major >= 9
        if op in SUPPORTED_IF_COMPUTATION_IS:
            callees = instr.called_computations()
            return bool(callees) and all(i.opcode == "parameter" or self.is_supported(i)
                                         for i in callees[0].instructions)
        return False

    def low_operand_ok(self, instr: HloInstruction, index: int) -> bool:
        if instr.opcode in PASS_THROUGH:
            return True
        if instr.opcode == "convert":
            return instr.operands[0].shape.element_type is BF16
        return self.is_supported(instr)

    def low_output_ok(self, instr: HloInstruction) -> bool:
        if instr.opcode in PASS_THROUGH:
            return True
        if instr.opcode == "convert":
            return instr.shape.element_type is BF16
        return self.is_supported(instr)

    def mixed_ok(self, instr: HloInstruction) -> bool:
        if instr.opcode in MIXED_OK:
            return True
        if instr.opcode == "dot" and len(instr.operands) >= 2:
            types = [o.shape.element_type.name for o in instr.operands[:2]]
            return types[0] == types[1] and types[0] in ("f16", "bf16") and instr.shape.element_type is F32
        return False


def operand_precision_is_output_precision(instr: HloInstruction, index: int) -> bool:
    op = instr.opcode
    if op in SAME_PRECISION_OPS:
        return True
    if op == "bitcast":
        return instr.shape.element_type is instr.operands[index].shape.element_type
    if op in SAME_PRECISION_OPERANDS:
        return index in SAME_PRECISION_OPERANDS[op]
    if op in ("reduce", "reduce-window"):
        body = instr.called_computations()[0]
        return all(operand_precision_is_output_precision(i, k) for i in body.instructions
                   if i.opcode != "parameter" for k in range(len(i.operands)))
    return False


@register_pass
@dataclass
class FloatNormalization(HloPass):
    """Converts to f32 around ops the GPU cannot compute in bf16 (XLA's FloatNormalization)."""

    name = "float-normalization-bf16"
    device: DeviceDescription = field(default=H100)

    def run(self, module: HloModule) -> bool:
        run = _Run(module, GpuBf16Support(self.device.compute_capability_major))
        changed = run.run()
        if changed:
            from hlo_opt.passes.dce import HloDCE
            from hlo_opt.passes.tuple_simplifier import TupleSimplifier

            TupleSimplifier().run(module)
            HloDCE().run(module)
        return changed


class _Run:
    def __init__(self, module: HloModule, support: GpuBf16Support):
        self.module = module
        self.support = support
        self.changed = False
        self._uniquer: NameUniquer | None = None

    def run(self) -> bool:
        skip = self._computations_to_skip()
        for comp in self.module.computation_post_order():
            if id(comp) in skip:
                continue
            for instr in comp.post_order():
                if instr.parent is not comp or instr.opcode in SKIPPED or instr.has_side_effect:
                    continue
                if instr.opcode in PER_OUTPUT and instr.shape.is_tuple:
                    self._handle_multiple_outputs(instr)
                else:
                    self._handle(instr)
        return self.changed

    # -- computations left alone -------------------------------------------------------------------
    def _computations_to_skip(self) -> set[int]:
        skip: set[int] = set()
        callers = computation_callers(self.module)
        for comp in list(self.module.computations):
            sites = callers.get(id(comp), [])
            avoid = [s for s in sites if s.instr.opcode in NO_NORMALIZED_CALLEES]
            if not avoid:
                continue
            if len(avoid) == len(sites):
                skip.add(id(comp))
                continue
            clone = clone_computation(comp, self.module, self._names())
            for site in avoid:
                site.replace(clone)
            skip.add(id(clone))
        return skip

    def _names(self) -> NameUniquer:
        if self._uniquer is None:
            self._uniquer = NameUniquer.for_module(self.module)
        return self._uniquer

    # -- one instruction ---------------------------------------------------------------------------
    def _handle(self, hlo: HloInstruction) -> None:
        sup = self.support
        high = _count(hlo.shape, F32) + sum(_count(o.shape, F32) for o in hlo.operands)
        low = _count(hlo.shape, BF16) + sum(_count(o.shape, BF16) for o in hlo.operands)
        low_comps = []
        if hlo.opcode not in NO_NORMALIZED_CALLEES:
            for comp in hlo.called_computations():
                shapes = [comp.root.shape] + [p.shape for p in comp.parameters]
                high += sum(_count(s, F32) for s in shapes)
                comp_low = sum(_count(s, BF16) for s in shapes)
                low += comp_low
                if comp_low:
                    low_comps.append(comp)
        for i, operand in enumerate(list(hlo.operands)):
            n = _count(operand.shape, BF16)
            if n and not sup.low_operand_ok(hlo, i):
                self._convert_operand(hlo, i, BF16, F32)
                low, high = low - n, high + n
        if not sup.low_output_ok(hlo):
            n = _count(hlo.shape, BF16)
            if n:
                self._change_output_type(hlo, BF16, F32)
                low, high = low - n, high + n
        if sup.mixed_ok(hlo) or low == 0 or high == 0:
            return
        if not hlo.called_computations() and _count(hlo.shape, BF16) == _leaf_count(hlo.shape):
            if all(_count(o.shape, BF16) == _leaf_count(o.shape)
                   or (operand_precision_is_output_precision(hlo, i) and sup.low_operand_ok(hlo, i))
                   for i, o in enumerate(hlo.operands)):
                for i in range(len(hlo.operands)):
                    self._convert_operand(hlo, i, F32, BF16)
                return
        self._change_output_type(hlo, BF16, F32)
        for i in range(len(hlo.operands)):
            self._convert_operand(hlo, i, BF16, F32)
        self._convert_called_computations(hlo, low_comps)

    def _handle_multiple_outputs(self, hlo: HloInstruction) -> None:
        """Tuple-shaped sort / all-reduce / reduce-scatter: operand i gives output {i}."""
        sup = self.support
        n = len(hlo.operands)
        in_types = [o.shape.element_type for o in hlo.operands]
        out_types = [hlo.shape.tuple_shapes[i].element_type for i in range(n)]
        high = sum(t is F32 for t in in_types + out_types)
        low = sum(t is BF16 for t in in_types + out_types)
        bad_operand = any(t is BF16 and not sup.low_operand_ok(hlo, i) for i, t in enumerate(in_types))
        bad_output = any(t is BF16 for t in out_types) and not sup.low_output_ok(hlo)
        if low == 0:
            return
        for i, t in enumerate(in_types):
            if t is not BF16:
                continue
            if sup.low_operand_ok(hlo, i) and (sup.mixed_ok(hlo)
                                               or not (bad_operand or bad_output or high > 0)):
                continue
            self._convert_operand(hlo, i, BF16, F32)
            high, low = high + 1, low - 1
        if not bad_output and (sup.mixed_ok(hlo) or high == 0 or low == 0):
            return
        low_comps = []
        if hlo.opcode not in NO_NORMALIZED_CALLEES:
            for comp in hlo.called_computations():
                types = [comp.root.shape.element_type if comp.root.shape.is_array else None]
                types += [p.shape.element_type if p.shape.is_array else None for p in comp.parameters]
                if any(t is BF16 for t in types):
                    low_comps.append(comp)
        comp = hlo.parent
        users = list(hlo.users)
        was_root = comp.root is hlo
        original = hlo.shape
        hlo.shape = _retyped(original, BF16, F32)
        elements = []
        for i in range(n):
            gte = comp.add_new_instruction("get-tuple-element", [hlo], hlo.shape.tuple_shapes[i],
                                           {"index": i})
            if out_types[i] is BF16:
                gte = comp.add_new_instruction("convert", [gte], original.tuple_shapes[i])
            elements.append(gte)
        tup = comp.add_new_instruction("tuple", elements, original)
        for user in users:
            user.replace_operand_with(hlo, tup)
        if was_root:
            comp.root = tup
        self.changed = True
        self._convert_called_computations(hlo, low_comps)

    # -- rewriting helpers -------------------------------------------------------------------------
    def _converted(self, value: HloInstruction, old: PrimitiveType, new: PrimitiveType) -> HloInstruction:
        """`value` with its `old` leaves as `new` (XLA's ConvertType, excess precision allowed)."""
        if not _count(value.shape, old):
            return value
        if value.opcode == "convert" and value.operands[0].shape.element_type is new:
            return value.operands[0]
        return self._deep_convert(value, old, new)

    def _deep_convert(self, value: HloInstruction, old: PrimitiveType, new: PrimitiveType) -> HloInstruction:
        comp = value.parent
        shape = value.shape
        if shape.is_array:
            if shape.element_type is not old:
                return value
            return comp.add_new_instruction("convert", [value], shape.with_element_type(new))
        if not shape.is_tuple or not _count(shape, old):
            return value
        parts = []
        for i, sub in enumerate(shape.tuple_shapes):
            gte = comp.add_new_instruction("get-tuple-element", [value], sub, {"index": i})
            parts.append(self._deep_convert(gte, old, new))
        return comp.add_new_instruction("tuple", parts, Shape.tuple_of([p.shape for p in parts]))

    def _convert_operand(self, hlo: HloInstruction, index: int, old: PrimitiveType,
                         new: PrimitiveType) -> None:
        operand = hlo.operands[index]
        replacement = self._converted(operand, old, new)
        if replacement is operand:
            return
        hlo.replace_operand(index, replacement)
        self.changed = True

    def _change_output_type(self, hlo: HloInstruction, old: PrimitiveType, new: PrimitiveType) -> None:
        """`hlo` computes `new` where it gave `old`; its users read it converted back, except
        converts to `new`, which read `hlo` itself (excess precision)."""
        original = hlo.shape
        if not _count(original, old):
            return
        comp = hlo.parent
        was_root = comp.root is hlo
        users = list(hlo.users)
        hlo.shape = _retyped(original, old, new)
        back = self._back_to(hlo, original)
        direct = []
        for user in users:
            if (old is BF16 and user.opcode == "convert" and user.shape.is_array
                    and user.shape.element_type is new):
                direct.append(user)
            else:
                user.replace_operand_with(hlo, back)
        for convert in direct:
            convert.replace_all_uses_with(hlo)
        if was_root:
            comp.root = back
        self.changed = True

    def _back_to(self, value: HloInstruction, target: Shape) -> HloInstruction:
        comp = value.parent
        shape = value.shape
        if shape.is_array:
            if shape.element_type is target.element_type:
                return value
            return comp.add_new_instruction("convert", [value], target)
        parts = []
        for i, sub in enumerate(shape.tuple_shapes):
            gte = comp.add_new_instruction("get-tuple-element", [value], sub, {"index": i})
            parts.append(self._back_to(gte, target.tuple_shapes[i]))
        return comp.add_new_instruction("tuple", parts, target)

    def _convert_called_computations(self, hlo: HloInstruction, comps: list[HloComputation]) -> None:
        """Each of `comps` that `hlo` calls is cloned; in the clone bf16 parameters and the root
        become f32 (the parameters converted back to bf16 for the body, the root converted up)."""
        if not comps:
            return
        wanted = {id(c) for c in comps}
        clones: dict[int, HloComputation] = {}
        for site in call_sites_of(hlo):
            comp = site.computation
            if id(comp) not in wanted:
                continue
            if id(comp) not in clones:
                clones[id(comp)] = clone_computation(comp, self.module, self._names())
            site.replace(clones[id(comp)])
        for clone in clones.values():
            root = clone.root
            new_root = self._converted(root, BF16, F32)
            if new_root is not root:
                clone.root = new_root
            for param in clone.parameters:
                self._change_output_type(param, BF16, F32)
        self.changed = True
