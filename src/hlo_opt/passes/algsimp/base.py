"""The machinery every AlgebraicSimplifier rewrite uses: the rewrite table, the per-computation
`Rewriter` (creation and replacement of instructions, XLA's ReplaceInstruction and
ReplaceInstructionIfCompatible), and the constant predicates of algebraic_simplifier.cc
(`IsAll`, `IsNonNegative`, `GetConstantValue`, `MakeScalarLike`).

A rewrite is a function `(instr, rw) -> bool` registered for one or more opcodes; it either
changes the computation (and returns True) or leaves it untouched (False). The table keeps XLA's
order within each `Handle<Op>`: the first rewrite that applies wins, as in XLA's visitor.

    @rewrite("negate")
    def negate_of_negate(instr, rw):
        \"\"\"HandleNegate: negate(negate(x)) => x.\"\"\"
        inner = instr.operands[0]
        return inner.opcode == "negate" and rw.replace_if_compatible(instr, inner.operands[0])
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from hlo_common.hlo.dtypes import PRED, PrimitiveType
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_utils import has_side_effect, inherit_attributes

if TYPE_CHECKING:
    from hlo_opt.passes.algebraic_simplifier import AlgebraicSimplifier

RewriteFn = Callable[[HloInstruction, "Rewriter"], bool]

# opcode -> rewrites in the order XLA's Handle<Op> tries them.
REWRITES: dict[str, list[RewriteFn]] = {}


def rewrite(*opcodes: str) -> Callable[[RewriteFn], RewriteFn]:
    """Register a rewrite for `opcodes` (appended after the ones already registered)."""
    def deco(fn: RewriteFn) -> RewriteFn:
        for op in opcodes:
            REWRITES.setdefault(op, []).append(fn)
        return fn
    return deco


def all_rewrites() -> list[RewriteFn]:
    """Every registered rewrite once, in registration order."""
    seen: dict[str, RewriteFn] = {}
    for fns in REWRITES.values():
        for fn in fns:
            seen.setdefault(f"{fn.__module__}.{fn.__name__}", fn)
    return list(seen.values())


class Rewriter:
    """Editing context of one sweep over one computation.

    New instructions are appended to the computation; replaced instructions and the operands that
    die with them are detached at once (so user counts stay exact for later rewrites) and taken
    out of the instruction list in one pass by `finish`."""

    def __init__(self, options: AlgebraicSimplifier, comp: HloComputation,
                 shared: dict[Any, HloComputation] | None = None):
        self.opts = options
        self.comp = comp
        self.shared = {} if shared is None else shared  # computations made once per module run
        self.detached: list[HloInstruction] = []
        self.dead: set[int] = set()
        self.created: list[HloInstruction] = []
        self.is_async = False  # an async-wrapped computation (XLA's IsAsyncComputation)

    # -- shapes --------------------------------------------------------------------------------
    def same_shape(self, a: Shape, b: Shape) -> bool:
        """XLA's SameShape: equal with layouts when layout sensitive, else compatible."""
        if self.opts.is_layout_sensitive:
            return a == b
        return a.compatible(b)

    # -- creation ------------------------------------------------------------------------------
    def add(self, opcode: str, operands: list[HloInstruction], shape: Shape | None = None,
            attrs: dict[str, Any] | None = None, **fields: Any) -> HloInstruction:
        """A new instruction in the computation (shape inferred when not given)."""
        instr = self.comp.add_new_instruction(opcode, operands, shape, attrs, **fields)
        self.created.append(instr)
        return instr

    def constant(self, value: Any, etype: PrimitiveType, dims: tuple[int, ...] = ()) -> HloInstruction:
        """A constant of `etype` holding `value` (a scalar, or an array of shape `dims`)."""
        arr = np.asarray(value)
        if etype.is_float and arr.dtype.kind in "iub":
            arr = arr.astype(np.float64)
        arr = arr.astype(etype.np_dtype)
        if arr.shape != tuple(dims):
            arr = np.broadcast_to(arr, tuple(dims)).copy()
        return self.add("constant", [], Shape.array(etype, dims), literal=arr)

    def scalar_like(self, base: HloInstruction, value: Any) -> HloInstruction:
        """XLA's MakeScalarLike: `value` in base's element type, broadcast to base's shape."""
        const = self.constant(value, base.shape.element_type)
        if base.shape.rank == 0:
            return const
        return self.broadcast(const, base.shape, ())

    def broadcast(self, operand: HloInstruction, shape: Shape, dims) -> HloInstruction:
        return self.add("broadcast", [operand], shape, {"dimensions": tuple(dims)})

    def reshape(self, operand: HloInstruction, dims, shape: Shape | None = None) -> HloInstruction:
        shape = shape or Shape.array(operand.shape.element_type, dims)
        return self.add("reshape", [operand], shape)

    def binary(self, opcode: str, lhs: HloInstruction, rhs: HloInstruction,
               shape: Shape | None = None, attrs: dict[str, Any] | None = None) -> HloInstruction:
        return self.add(opcode, [lhs, rhs], shape, attrs)

    def clone(self, instr: HloInstruction, operands: list[HloInstruction],
              shape: Shape | None = None) -> HloInstruction:
        """XLA's CloneWithNewOperands, added to the computation under a fresh name."""
        new = instr.clone(new_operands=operands, shape=shape or instr.shape, name=instr.name)
        self.comp.add_instruction(new)
        self.created.append(new)
        return new

    # -- computations ----------------------------------------------------------------------------
    def scalar_add_computation(self, etype: PrimitiveType) -> HloComputation:
        """XLA's GetOrCreateScalarAddComputation: add of two scalars, one per type and module run."""
        key = ("scalar_add", etype.name)
        if key not in self.shared:
            from hlo_common.hlo.ir import HloComputation as Computation

            comp = Computation("scalar_add_computation")
            scalar = Shape.array(etype, ())
            lhs = comp.add_new_instruction("parameter", [], scalar, name="scalar_lhs", parameter_number=0)
            rhs = comp.add_new_instruction("parameter", [], scalar, name="scalar_rhs", parameter_number=1)
            comp.root = comp.add_new_instruction("add", [lhs, rhs], scalar)
            self.shared[key] = self.comp.parent.add_embedded_computation(comp)
        return self.shared[key]

    # -- replacement ---------------------------------------------------------------------------
    def replace(self, old: HloInstruction, new: HloInstruction) -> bool:
        """XLA's ReplaceInstruction: uses and the root slot move to `new` (added if detached);
        `old` and the operands that die with it are removed. Declines incompatible shapes and
        conflicting shardings."""
        if not old.shape.compatible(new.shape):
            return False
        if old.sharding is not None and new.sharding is not None and old.sharding != new.sharding:
            return False
        if new.parent is None:
            self.comp.add_instruction(new)
            self.created.append(new)
        inherit_attributes(old, new)
        old.replace_all_uses_with(new)
        self.drop_if_dead(old)
        return True

    def replace_if_compatible(self, old: HloInstruction, new: HloInstruction) -> bool:
        """XLA's ReplaceInstructionIfCompatible: only same shapes (SameShape), no control predecessors."""
        if old.control_predecessors or not self.same_shape(old.shape, new.shape):
            return False
        return self.replace(old, new)

    def replace_with_new(self, old: HloInstruction, opcode: str, operands: list[HloInstruction],
                         attrs: dict[str, Any] | None = None, shape: Shape | None = None) -> bool:
        """XLA's ReplaceWithNewInstruction: a new instruction with old's shape (layout included)."""
        return self.replace(old, self.add(opcode, operands, shape or old.shape, attrs))

    def replace_uses(self, old: HloInstruction, new: HloInstruction) -> None:
        """XLA's ReplaceAllUsesWith on an instruction other than the visited one; `old` goes if dead."""
        old.replace_all_uses_with(new)
        self.drop_if_dead(old)

    def set_operand(self, instr: HloInstruction, index: int, new: HloInstruction) -> None:
        """XLA's ReplaceOperandWith; the old operand goes if nothing else reads it."""
        old = instr.operands[index]
        instr.replace_operand(index, new)
        self.drop_if_dead(old)

    def drop_if_dead(self, instr: HloInstruction) -> None:
        """Detach `instr` if nothing uses it, then its operands that die with it (XLA's
        RemoveInstructionAndUnusedOperands); never parameters, roots or side effects."""
        work = [instr]
        while work:
            cur = work.pop()
            if id(cur) in self.dead or cur.parent is not self.comp or cur.users or cur.is_root \
                    or cur.opcode == "parameter" or cur.control_predecessors \
                    or cur.control_successors or has_side_effect(cur):
                continue
            operands = list(dict.fromkeys(cur.operands))
            cur.set_operands([])
            self.dead.add(id(cur))
            self.detached.append(cur)
            work.extend(reversed(operands))

    def discard_created(self, since: int) -> None:
        """Undo the creations of a rewrite that declined after building instructions."""
        for instr in reversed(self.created[since:]):
            self.drop_if_dead(instr)
        del self.created[since:]

    def finish(self) -> None:
        """Take the detached instructions out of the computation (one pass over its list)."""
        if self.detached:
            self.comp.remove_instructions(self.detached)
            self.detached = []


# -- constant predicates (algebraic_simplifier.cc) ---------------------------------------------------
def known_constant(instr: HloInstruction) -> bool:
    """A constant array whose values the text gave (`{...}` constants are unknown)."""
    return instr.opcode == "constant" and not instr.literal_unknown and instr.shape.is_array \
        and not isinstance(instr.literal, tuple)


def literal_all(lit: np.ndarray, value: Any, etype: PrimitiveType) -> bool:
    a = np.asarray(lit)
    if a.size == 0:
        return False
    if a.strides and all(s == 0 for s in a.strides):
        a = a.flat[:1]  # a broadcast view: one element says it all (reshape(-1) would copy)
    elif a.size > 1 and not literal_all(a.flat[:1], value, etype):
        return False  # a cheap look at the first element before comparing a large constant
    if etype.is_pred:
        return bool(np.all(a == bool(value)))
    if etype.is_complex:
        return bool(np.all(a.astype(np.complex128) == complex(value)))
    if etype.is_float:
        return bool(np.all(a.astype(np.float64) == float(value)))
    bits, signed = etype.bits, etype.is_signed
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not lo <= int(value) <= hi:
        return False
    wide = np.uint64 if not signed and bits == 64 else np.int64
    return bool(np.all(a.astype(wide) == wide(int(value))))


def is_all(instr: HloInstruction, value: Any) -> bool:
    """XLA's IsAll: a constant (through broadcasts) whose every element equals `value`."""
    while instr.opcode == "broadcast":
        instr = instr.operands[0]
    return known_constant(instr) and literal_all(instr.literal, value, instr.shape.element_type)


def is_effective_scalar(shape: Shape) -> bool:
    return shape.is_array and all(d == 1 for d in shape.dims)


def is_scalar_constant(instr: HloInstruction) -> bool:
    """XLA's ConstantEffectiveScalar match: a constant with one element."""
    return known_constant(instr) and is_effective_scalar(instr.shape)


def constant_value(instr: HloInstruction) -> float | int | None:
    """XLA's GetConstantValue: the value of an effective-scalar int or float constant."""
    if not is_scalar_constant(instr):
        return None
    et = instr.shape.element_type
    v = np.asarray(instr.literal).reshape(-1)[0]
    if et.is_float:
        return float(v)
    if et.is_integer:
        return int(v)
    return None


def scalar_constant_of_broadcast(instr: HloInstruction) -> HloInstruction | None:
    """c for broadcast(c) with c an effective-scalar constant."""
    if instr.opcode == "broadcast" and is_scalar_constant(instr.operands[0]):
        return instr.operands[0]
    return None


def is_constant_or_broadcast_of_scalar_constant(instr: HloInstruction) -> bool:
    return is_scalar_constant(instr) or scalar_constant_of_broadcast(instr) is not None


def is_pow2_float_constant(instr: HloInstruction) -> bool:
    """XLA's IsAllFpConstantPowerOf2: +-2^k as a scalar constant or a broadcast of one."""
    c = instr if is_scalar_constant(instr) else scalar_constant_of_broadcast(instr)
    v = constant_value(c) if c is not None else None
    if v is None or not math.isfinite(v) or v == 0:
        return False
    return abs(math.frexp(v)[0]) == 0.5


def any_operand_complex(instr: HloInstruction) -> bool:
    return any(o.shape.is_array and o.shape.element_type.is_complex for o in instr.operands)


def is_signed_int(shape: Shape) -> bool:
    return shape.is_array and shape.element_type.kind == "signed"


def is_positive(instr: HloInstruction) -> bool:
    """XLA's IsPositive (without the cuDNN batch-norm metadata)."""
    if any_operand_complex(instr):
        return False
    op = instr.opcode
    if op == "power":
        return not is_signed_int(instr.shape) and is_positive(instr.operands[0])
    if op in ("abs", "rsqrt", "sqrt"):
        return is_positive(instr.operands[0])
    if op == "multiply":
        return not is_signed_int(instr.shape) and instr.operands[0] is instr.operands[1] \
            and is_positive(instr.operands[0])
    return False


def _iota_non_negative(instr: HloInstruction) -> bool:
    if not is_signed_int(instr.shape):
        return True
    bits = instr.shape.element_type.bits
    return bits >= 64 or instr.shape.dims[instr.attrs["iota_dimension"]] <= 1 << (bits - 1)


def _constant_non_negative(instr: HloInstruction) -> bool:
    v = constant_value(instr)
    return v is not None and not math.isnan(v) and math.copysign(1.0, v) > 0


_NON_NEGATIVE: dict[str, Callable[[HloInstruction], bool]] = {
    "multiply": lambda h: h.operands[0] is h.operands[1] and not is_signed_int(h.shape),
    "exponential": lambda h: True,
    "iota": _iota_non_negative,
    "abs": lambda h: not is_signed_int(h.shape) or is_non_negative(h.operands[0]),
    "broadcast": lambda h: is_non_negative(h.operands[0]),
    "constant": _constant_non_negative,
    "minimum": lambda h: is_non_negative(h.operands[0]) and is_non_negative(h.operands[1]),
    "maximum": lambda h: is_non_negative(h.operands[0]) or is_non_negative(h.operands[1]),
    "power": lambda h: not is_signed_int(h.shape) and is_non_negative(h.operands[0]),
    "select": lambda h: is_non_negative(h.operands[1]) and is_non_negative(h.operands[2]),
}


def is_non_negative(instr: HloInstruction) -> bool:
    """XLA's IsNonNegative: the value is provably >= 0 (never -0, NaN or negative)."""
    if any_operand_complex(instr) or not instr.shape.is_array or instr.shape.element_type.is_complex:
        return False
    check = _NON_NEGATIVE.get(instr.opcode)
    return check(instr) if check is not None else is_positive(instr)


def swapped_precision(attrs: dict[str, Any]) -> dict[str, Any]:
    """A dot's attributes with the two operand precisions swapped (XLA's
    SwapOperandsInDotPrecisionConfig)."""
    out = dict(attrs)
    if len(out.get("operand_precision", ())) == 2:
        out["operand_precision"] = tuple(reversed(out["operand_precision"]))
    return out


def pred_shape(shape: Shape) -> Shape:
    return shape.with_element_type(PRED)


def is_zero_element(shape: Shape) -> bool:
    return shape.is_array and shape.num_elements == 0


def is_identity_permutation(perm) -> bool:
    return all(p == i for i, p in enumerate(perm))


def inverse_permutation(perm) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def compose_permutations(p1, p2) -> list[int]:
    """XLA's ComposePermutations(p1, p2)[i] = p1[p2[i]]."""
    return [p1[i] for i in p2]


def reduction_kind(comp: HloComputation) -> str | None:
    """'add' / 'multiply' / 'maximum' / 'minimum' / 'and' / 'or' when the computation is that
    binary op of its two parameters, in either order (a scalar reducer)."""
    root = comp.root
    if root is None or len(root.operands) != 2 or root.opcode not in (
            "add", "multiply", "maximum", "minimum", "and", "or"):
        return None
    a, b = root.operands
    if a.opcode != "parameter" or b.opcode != "parameter" or a is b:
        return None
    params = [i for i in comp.instructions if i.opcode == "parameter"]
    return root.opcode if len(params) == 2 else None
