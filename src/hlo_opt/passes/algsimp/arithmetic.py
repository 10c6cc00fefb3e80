"""AlgebraicSimplifier rewrites of add, subtract, multiply and negate (XLA's HandleAdd,
HandleSubtract, HandleMultiply, HandleNegate in algebraic_simplifier.cc), in XLA's order.

Floating-point identities are applied only where XLA applies them: x + 0 and x * 1 for every type,
x * 0 and x - x only for integers (NaN and infinities survive them), reassociation only of constants.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.passes.algsimp.base import (
    Rewriter, is_all, is_non_negative, is_scalar_constant, is_pow2_float_constant, reduction_kind, rewrite,
)


def _integral(instr: HloInstruction) -> bool:
    return instr.shape.is_array and instr.shape.element_type.is_integer


def _constant(instr: HloInstruction) -> bool:
    return instr.opcode == "constant"


def _scalar_bcast_const(instr: HloInstruction) -> HloInstruction | None:
    """c for broadcast(c) with c a rank-0 constant (XLA's m::Broadcast(m::ConstantScalar()))."""
    if instr.opcode == "broadcast" and _constant(instr.operands[0]) and instr.operands[0].shape.rank == 0:
        return instr.operands[0]
    return None


def _constant_pair(inner_const: HloInstruction, outer_const: HloInstruction):
    """(c1, c2) when both are constants or both broadcasts of scalar constants, else None."""
    if _constant(inner_const) and _constant(outer_const):
        return inner_const, outer_const
    c1, c2 = _scalar_bcast_const(inner_const), _scalar_bcast_const(outer_const)
    return (c1, c2) if c1 is not None and c2 is not None else None


def _fold_constants(rw: Rewriter, opcode: str, c1, c2, like: HloInstruction) -> HloInstruction:
    """opcode(c1, c2), broadcast to `like`'s shape when the constants are scalars and `like` is not."""
    combined = rw.binary(opcode, c1, c2)
    if combined.shape.rank == 0 and like.shape.rank != 0:
        combined = rw.broadcast(combined, like.shape, ())
    return combined


def _exact_or_fast(instr: HloInstruction, rw: Rewriter) -> bool:
    return _integral(instr) or rw.opts.enable_fast_math


# -- add -------------------------------------------------------------------------------------------
@rewrite("add")
def add_zero(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAdd: A + 0 => A and 0 + A => A (every element type, as XLA)."""
    lhs, rhs = instr.operands
    return (is_all(rhs, 0) and rw.replace_if_compatible(instr, lhs)) or \
        (is_all(lhs, 0) and rw.replace_if_compatible(instr, rhs))


@rewrite("add")
def add_constant_to_rhs(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAdd: canonicalize Const + A => A + Const so the reassociations below match."""
    lhs, rhs = instr.operands
    return _constant(lhs) and not _constant(rhs) and rw.replace_with_new(instr, "add", [rhs, lhs])


@rewrite("add")
def add_reassociate_constants(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAdd: (A + C1) + C2 => A + (C1 + C2), constants or broadcasts of scalar constants."""
    inner, c2 = instr.operands
    if inner.opcode != "add" or _constant(inner.operands[0]):
        return False
    pair = _constant_pair(inner.operands[1], c2)
    if pair is None:
        return False
    return rw.replace_with_new(instr, "add", [inner.operands[0], _fold_constants(rw, "add", *pair, instr)])


@rewrite("add")
def add_constant_minus_x(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAdd: (C1 - A) + C2 => (C1 + C2) - A."""
    inner, c2 = instr.operands
    if inner.opcode != "subtract" or _constant(inner.operands[1]):
        return False
    pair = _constant_pair(inner.operands[0], c2)
    if pair is None:
        return False
    total = _fold_constants(rw, "add", *pair, instr)
    return rw.replace_with_new(instr, "subtract", [total, inner.operands[1]])


@rewrite("add")
def add_cancels_subtract(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAdd: A + (B - A) => B and (B - A) + A => B (integers, or fast math)."""
    if not _exact_or_fast(instr, rw):
        return False
    for x, sub in (instr.operands, reversed(instr.operands)):
        if sub.opcode == "subtract" and sub.operands[1] is x:
            return rw.replace_if_compatible(instr, sub.operands[0])
    return False


@rewrite("add")
def add_into_sparse_update(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAdd: A + dynamic-update-slice(broadcast(0), U, i...) => dynamic-update-slice(A,
    dynamic-slice(A, i...) + U, i...), adding only where the update lands."""
    for lhs, dus in (instr.operands, reversed(instr.operands)):
        if dus.opcode != "dynamic-update-slice" or dus.operands[0].opcode != "broadcast":
            continue
        base = dus.operands[0].operands[0]
        if not (is_scalar_constant(base) and is_all(base, 0)):
            continue
        update, indices = dus.operands[1], dus.operands[2:]
        part = rw.add("dynamic-slice", [lhs, *indices], update.shape,
                      {"dynamic_slice_sizes": tuple(update.shape.dims)})
        summed = rw.binary("add", part, update, update.shape)
        return rw.replace_with_new(instr, "dynamic-update-slice", [lhs, summed, *indices], shape=lhs.shape)
    return False


def _common_factor(lhs: HloInstruction, rhs: HloInstruction):
    """(a, b, c) for lhs = a*c (either order) and rhs = c*b (either order), as XLA matches them."""
    if lhs.opcode != "multiply" or rhs.opcode != "multiply":
        return None
    for a, c in (lhs.operands, reversed(lhs.operands)):
        if rhs.operands[0] is c:
            return a, rhs.operands[1], c
        if rhs.operands[1] is c:
            return a, rhs.operands[0], c
    return None


@rewrite("add")
def add_factor_common_multiplicand(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAdd: A*C + B*C => (A + B)*C when both products have one user; integers, floats-are-real,
    or C a float constant +-2^k (exact up to over/underflow)."""
    lhs, rhs = instr.operands
    match = _common_factor(lhs, rhs)
    if match is None or len(lhs.users) != 1 or len(rhs.users) != 1:
        return False
    a, b, c = match
    if not (_integral(instr) or rw.opts.enable_floats_are_real or is_pow2_float_constant(c)):
        return False
    total = rw.binary("add", a, b, instr.shape)
    return rw.replace_with_new(instr, "multiply", [total, c])


def _is_add_scatter(instr: HloInstruction) -> bool:
    return instr.opcode == "scatter" and len(instr.operands) == 3 and len(instr.users) == 1 \
        and reduction_kind(instr.attrs["to_apply"]) == "add"


@rewrite("add")
def add_into_scatter(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAdd (layout insensitive): A + scatter(B, i, U, add) => scatter(A + B, i, U, add) when
    the scatter adds and has one user. (XLA also merges two such scatters; that case is left alone.)"""
    if rw.opts.is_layout_sensitive:
        return False
    lhs, rhs = instr.operands
    if _is_add_scatter(lhs) == _is_add_scatter(rhs):
        return False
    other, scatter = (lhs, rhs) if _is_add_scatter(rhs) else (rhs, lhs)
    operands = [other, scatter.operands[0]] if scatter is rhs else [scatter.operands[0], other]
    summed = rw.binary("add", *operands)
    rw.set_operand(scatter, 0, summed)
    return rw.replace(instr, scatter)


# -- subtract --------------------------------------------------------------------------------------
@rewrite("subtract")
def subtract_self(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSubtract: A - A => 0 (integers, or fast math: inf - inf is NaN)."""
    lhs, rhs = instr.operands
    return lhs is rhs and _exact_or_fast(instr, rw) and rw.replace(instr, rw.scalar_like(instr, 0))


@rewrite("subtract")
def subtract_zero(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSubtract: A - 0 => A."""
    lhs, rhs = instr.operands
    return is_all(rhs, 0) and rw.replace_if_compatible(instr, lhs)


@rewrite("subtract")
def subtract_constant_to_add(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSubtract: A - C => A + (-C) for a constant or a broadcast constant (exact in IEEE and
    in two's complement); constant folding evaluates the negate."""
    lhs, rhs = instr.operands
    if _constant(lhs):
        return False
    const = rhs if _constant(rhs) else rhs.operands[0] if rhs.opcode == "broadcast" and \
        _constant(rhs.operands[0]) else None
    if const is None:
        return False
    negated = rw.add("negate", [const], const.shape)
    if rhs.opcode == "broadcast":
        negated = rw.broadcast(negated, rhs.shape, rhs.attrs["dimensions"])
    return rw.replace_with_new(instr, "add", [lhs, negated])


@rewrite("subtract")
def subtract_of_subtract(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSubtract: A - (A - B) => B (integers, or fast math)."""
    lhs, rhs = instr.operands
    return rhs.opcode == "subtract" and rhs.operands[0] is lhs and _exact_or_fast(instr, rw) \
        and rw.replace_if_compatible(instr, rhs.operands[1])


@rewrite("subtract")
def subtract_of_add(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSubtract: A - (A + B) => -B and A - (B + A) => -B (integers, or fast math)."""
    lhs, rhs = instr.operands
    if rhs.opcode != "add" or lhs not in rhs.operands or not _exact_or_fast(instr, rw):
        return False
    other = rhs.operands[1] if rhs.operands[0] is lhs else rhs.operands[0]
    return rw.replace_with_new(instr, "negate", [other])


@rewrite("subtract")
def subtract_add_cancel(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSubtract: (A + B) - A => B and (B + A) - A => B (integers, or fast math)."""
    lhs, rhs = instr.operands
    if lhs.opcode != "add" or rhs not in lhs.operands or not _exact_or_fast(instr, rw):
        return False
    other = lhs.operands[0] if lhs.operands[1] is rhs else lhs.operands[1]
    return rw.replace_if_compatible(instr, other)


# -- multiply --------------------------------------------------------------------------------------
@rewrite("multiply")
def multiply_one(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: A * 1 => A and 1 * A => A."""
    lhs, rhs = instr.operands
    return (is_all(rhs, 1) and rw.replace_if_compatible(instr, lhs)) or \
        (is_all(lhs, 1) and rw.replace_if_compatible(instr, rhs))


@rewrite("multiply")
def multiply_zero(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: 0 * A => 0 and A * 0 => 0, integers only (NaN * 0 is NaN), or fast math."""
    if not _exact_or_fast(instr, rw):
        return False
    lhs, rhs = instr.operands
    return (is_all(lhs, 0) and rw.replace_if_compatible(instr, lhs)) or \
        (is_all(rhs, 0) and rw.replace_if_compatible(instr, rhs))


@rewrite("multiply")
def multiply_negates(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: (-A) * (-B) => A * B (operands replaced in place)."""
    lhs, rhs = instr.operands
    if lhs.opcode != "negate" or rhs.opcode != "negate":
        return False
    rw.set_operand(instr, 0, lhs.operands[0])
    rw.set_operand(instr, 1, rhs.operands[0])
    return True


@rewrite("multiply")
def multiply_abs_abs(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: |A| * |A| => A * A for non-complex A (same abs on both sides)."""
    lhs, rhs = instr.operands
    if lhs is not rhs or lhs.opcode != "abs" or lhs.operands[0].shape.element_type.is_complex:
        return False
    a = lhs.operands[0]
    rw.set_operand(instr, 0, a)
    rw.set_operand(instr, 1, a)
    return True


@rewrite("multiply")
def multiply_by_converted_pred(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: A * convert(P) with P a pred => select(P, A, 0) (either operand order)."""
    for operand, conv in (instr.operands, reversed(instr.operands)):
        if conv.opcode == "convert" and conv.operands[0].shape.element_type.is_pred:
            zero = rw.scalar_like(instr, 0)
            return rw.replace_with_new(instr, "select", [conv.operands[0], operand, zero])
    return False


def _product_with_constant(instr: HloInstruction):
    """(x, c) for x * c in either order with x non-constant and c a constant."""
    if instr.opcode != "multiply":
        return None
    a, b = instr.operands
    if not _constant(a) and _constant(b):
        return a, b
    if _constant(a) and not _constant(b):
        return b, a
    return None


@rewrite("multiply")
def multiply_two_constant_products(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: (x * C1) * (y * C2) => (x * y) * (C1 * C2), any operand order."""
    left, right = (_product_with_constant(o) for o in instr.operands)
    if left is None or right is None:
        return False
    (x, c1), (y, c2) = left, right
    product = rw.binary("multiply", x, y, instr.shape)
    return rw.replace_with_new(instr, "multiply", [product, _fold_constants(rw, "multiply", c1, c2, instr)])


@rewrite("multiply")
def multiply_reassociate_constants(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: (A * C1) * C2 => A * (C1 * C2), constants in any operand order, or
    (A * broadcast(C1)) * broadcast(C2) with scalar constants."""
    for inner, c2 in (instr.operands, reversed(instr.operands)):
        match = _product_with_constant(inner)
        if match is not None and _constant(c2):
            a, c1 = match
            return rw.replace_with_new(instr, "multiply", [a, _fold_constants(rw, "multiply", c1, c2, instr)])
    inner, outer = instr.operands
    if inner.opcode == "multiply":
        c1, c2 = _scalar_bcast_const(inner.operands[1]), _scalar_bcast_const(outer)
        if c1 is not None and c2 is not None:
            folded = _fold_constants(rw, "multiply", c1, c2, instr)
            return rw.replace_with_new(instr, "multiply", [inner.operands[0], folded])
    return False


@rewrite("multiply")
def multiply_constant_into_broadcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: (A * C) * broadcast(B) => A * broadcast(B * C) for a scalar constant C (or a
    broadcast of one) and a non-constant B, so the constant multiplies the smaller operand."""
    for inner, op in (instr.operands, reversed(instr.operands)):
        if inner.opcode != "multiply" or op.opcode != "broadcast" or _constant(op.operands[0]):
            continue
        for a, c in (inner.operands, reversed(inner.operands)):
            const = c if _constant(c) else c.operands[0] if c.opcode == "broadcast" and \
                _constant(c.operands[0]) else None
            if _constant(a) or const is None or const.shape.rank != 0:
                continue
            b = op.operands[0]
            if b.shape.rank != 0:
                const = rw.broadcast(const, b.shape, ())
            scaled = rw.binary("multiply", b, const, b.shape)
            spread = rw.broadcast(scaled, instr.shape, op.attrs["dimensions"])
            return rw.replace_with_new(instr, "multiply", [a, spread])
    return False


def _same_operand_of(instr: HloInstruction, opcode: str) -> HloInstruction | None:
    lhs, rhs = instr.operands
    if lhs.opcode == opcode and rhs.opcode == opcode and lhs.operands[0] is rhs.operands[0]:
        return lhs.operands[0]
    return None


@rewrite("multiply")
def multiply_sqrt_sqrt(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: sqrt(x) * sqrt(x) => x when x is provably non-negative."""
    x = _same_operand_of(instr, "sqrt")
    return x is not None and is_non_negative(x) and rw.replace(instr, x)


@rewrite("multiply")
def multiply_rsqrt_rsqrt(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMultiply: rsqrt(x) * rsqrt(x) => 1 / x when x is provably non-negative."""
    x = _same_operand_of(instr, "rsqrt")
    if x is None or not is_non_negative(x):
        return False
    return rw.replace_with_new(instr, "divide", [rw.scalar_like(x, 1), x])


# -- negate ----------------------------------------------------------------------------------------
@rewrite("negate")
def negate_of_negate(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleNegate: negate(negate(x)) => x."""
    inner = instr.operands[0]
    return inner.opcode == "negate" and rw.replace_if_compatible(instr, inner.operands[0])
