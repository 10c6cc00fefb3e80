"""AlgebraicSimplifier rewrites of min/max/clamp, the bitwise and logical ops, compare, select and
the complex-number ops (XLA's HandleMaximum, HandleMinimum, HandleClamp, HandleAnd, HandleOr,
HandleXor, HandleCompare, HandleSelect, HandleComplex, HandleReal, HandleImag), in XLA's order.

Min/max with the identity bound (-inf for max, +inf for min) only folds for floats when
`minmax_propagate_nan` is set (XLA:GPU's default), because max(NaN, -inf) must stay NaN.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.passes.algsimp.base import (
    Rewriter, is_all, is_non_negative, is_scalar_constant, pred_shape, rewrite,
    scalar_constant_of_broadcast,
)
from hlo_common.hlo.hlo_utils import has_side_effect

_MONOTONE_SUBLINEAR = frozenset({"cbrt", "erf", "logistic", "tanh"})


def _limit(etype, largest: bool):
    """XLA's LiteralUtil::MaxValue / MinValue: +-inf for floats with infinities, else the extreme."""
    if etype.is_integer:
        bits = etype.bits
        if etype.is_signed:
            return (1 << (bits - 1)) - 1 if largest else -(1 << (bits - 1))
        return (1 << bits) - 1 if largest else 0
    info = ml_dtypes.finfo(etype.np_dtype)
    if np.isinf(np.asarray(np.inf).astype(etype.np_dtype)):
        return np.inf if largest else -np.inf
    return float(info.max) if largest else float(info.min)


# -- maximum / minimum / clamp -------------------------------------------------------------------
@rewrite("maximum", "minimum")
def minmax_of_same(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMaximum / HandleMinimum: max(x, x) => x and min(x, x) => x."""
    lhs, rhs = instr.operands
    return lhs is rhs and rw.replace(instr, lhs)


@rewrite("maximum", "minimum")
def minmax_of_identity_bound(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMaximum / HandleMinimum: max(x, -inf) => x and min(x, +inf) => x (the type's extreme for
    integers); floats only when NaN propagates through min/max."""
    et = instr.shape.element_type
    if not (et.is_integer or (et.is_float and rw.opts.minmax_propagate_nan)):
        return False
    largest = instr.opcode == "minimum"
    lhs, rhs = instr.operands
    if rhs.shape.element_type is et and is_all(lhs, _limit(lhs.shape.element_type, largest)):
        return rw.replace(instr, rhs)
    if lhs.shape.element_type is et and is_all(rhs, _limit(rhs.shape.element_type, largest)):
        return rw.replace(instr, lhs)
    return False


@rewrite("maximum", "minimum")
def minmax_of_nested_same_op(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMaximum / HandleMinimum: max(max(x, y), y) => max(x, y), max(x, max(x, y)) => max(x, y),
    and max(y, max(x, y)) => max(y, x) (not max(x, y): NaNs of different signs tell them apart)."""
    op = instr.opcode
    lhs, rhs = instr.operands
    if lhs.opcode == op and rhs in lhs.operands:
        return rw.replace(instr, lhs)
    if rhs.opcode == op and rhs.operands[0] is lhs:
        return rw.replace(instr, rhs)
    if rhs.opcode == op and rhs.operands[1] is lhs:
        rw.set_operand(instr, 1, rhs.operands[0])
        return True
    return False


def _bounds_in_order(lo: HloInstruction, hi: HloInstruction) -> bool:
    a = np.asarray(lo.literal).reshape(-1)[0]
    b = np.asarray(hi.literal).reshape(-1)[0]
    return bool(a.astype(np.float64) < b.astype(np.float64)) if lo.shape.element_type.is_float \
        else int(a) < int(b)


def _bcast_of_scalar_const(instr: HloInstruction) -> bool:
    return scalar_constant_of_broadcast(instr) is not None


@rewrite("maximum", "minimum")
def minmax_to_clamp(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMaximum / HandleMinimum (MinMaxToClamp): max(broadcast(lo), min(x, broadcast(hi))) and
    min(broadcast(hi), max(x, broadcast(lo))) => clamp(lo, x, hi) when the constants have lo < hi."""
    inner_op = "minimum" if instr.opcode == "maximum" else "maximum"
    for outer_bound, inner in (instr.operands, reversed(instr.operands)):
        if not _bcast_of_scalar_const(outer_bound) or inner.opcode != inner_op:
            continue
        for x, inner_bound in (inner.operands, reversed(inner.operands)):
            if not _bcast_of_scalar_const(inner_bound):
                continue
            lo, hi = (outer_bound, inner_bound) if instr.opcode == "maximum" else (inner_bound, outer_bound)
            if not _bounds_in_order(lo.operands[0], hi.operands[0]):
                return False
            return rw.replace(instr, rw.add("clamp", [lo, x, hi], x.shape))
    return False


@rewrite("maximum")
def maximum_of_clamp(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMaximum: max(lo, clamp(lo, x, hi)) => clamp(lo, x, hi), in either operand order."""
    for bound, clamp in (instr.operands, reversed(instr.operands)):
        if clamp.opcode == "clamp" and clamp.operands[0] is bound:
            return rw.replace_if_compatible(instr, clamp)
    return False


@rewrite("maximum")
def maximum_sinks_monotone_op(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMaximum: max(f(x), f(y)) => f(max(x, y)) for f in cbrt, erf, logistic, tanh
    (non-decreasing and |f(x)| <= |x|, so the max cannot overflow)."""
    lhs, rhs = instr.operands
    if lhs.opcode != rhs.opcode or lhs.opcode not in _MONOTONE_SUBLINEAR:
        return False
    inner = rw.binary("maximum", lhs.operands[0], rhs.operands[0])
    return rw.replace_with_new(instr, lhs.opcode, [inner])


@rewrite("clamp")
def clamp_of_clamp(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleClamp: clamp(a, clamp(a, x, b), b) => clamp(a, x, b)."""
    lo, x, hi = instr.operands
    return x.opcode == "clamp" and x.operands[0] is lo and x.operands[2] is hi \
        and rw.replace_if_compatible(instr, x)


# -- and / or / xor --------------------------------------------------------------------------------
def _both_pred(instr: HloInstruction) -> bool:
    return all(o.shape.element_type.is_pred for o in instr.operands)


@rewrite("and")
def and_identities(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAnd: A && true => A and true && A => A (preds); A & 0 => 0 and 0 & A => 0 (any type)."""
    lhs, rhs = instr.operands
    if _both_pred(instr):
        if is_all(rhs, 1) and rw.replace_if_compatible(instr, lhs):
            return True
        if is_all(lhs, 1) and rw.replace_if_compatible(instr, rhs):
            return True
    return (is_all(rhs, 0) and rw.replace_if_compatible(instr, rhs)) or \
        (is_all(lhs, 0) and rw.replace_if_compatible(instr, lhs))


def _less_than_bound(cmp: HloInstruction):
    """(x, c) for compare(x, c, LT) or compare(c, x, GT) with c an s32 effective-scalar constant."""
    if cmp.opcode != "compare":
        return None
    a, b = cmp.operands
    direction = cmp.attrs.get("direction")
    if direction == "LT" and is_scalar_constant(b) and b.shape.element_type.name == "s32":
        return a, int(np.asarray(b.literal).reshape(-1)[0])
    if direction == "GT" and is_scalar_constant(a) and a.shape.element_type.name == "s32":
        return b, int(np.asarray(a.literal).reshape(-1)[0])
    return None


@rewrite("and")
def and_of_upper_bounds(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAnd (TrySimplifyTautologicalCompare): (x < c1) && (x < c2) => x < min(c1, c2)."""
    left, right = (_less_than_bound(o) for o in instr.operands)
    if left is None or right is None or left[0] is not right[0]:
        return False
    x = left[0]
    bound = rw.scalar_like(x, min(left[1], right[1]))
    return rw.replace_with_new(instr, "compare", [x, bound], {"direction": "LT"},
                               shape=instr.operands[0].shape)


@rewrite("or")
def or_identities(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleOr: A || true => true and true || A => true (preds); A | 0 => A and 0 | A => A."""
    lhs, rhs = instr.operands
    if _both_pred(instr):
        if is_all(rhs, 1) and rw.replace_if_compatible(instr, rhs):
            return True
        if is_all(lhs, 1) and rw.replace_if_compatible(instr, lhs):
            return True
    return (is_all(rhs, 0) and rw.replace_if_compatible(instr, lhs)) or \
        (is_all(lhs, 0) and rw.replace_if_compatible(instr, rhs))


def _identical(a: HloInstruction, b: HloInstruction) -> bool:
    """XLA's Identical (layout and sharding sensitive) for side-effect-free instructions."""
    if a is b:
        return True
    if a.opcode != b.opcode or a.shape != b.shape or len(a.operands) != len(b.operands) \
            or a.opcode in ("parameter", "constant") or a.sharding != b.sharding or has_side_effect(a):
        return False
    return all(x is y for x, y in zip(a.operands, b.operands)) and a.attrs == b.attrs


@rewrite("xor")
def xor_identities(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleXor: A ^ A => 0 (also two identical side-effect-free instructions); A ^ 0 => A; 0 ^ A => A."""
    lhs, rhs = instr.operands
    if _identical(lhs, rhs):
        return rw.replace(instr, rw.scalar_like(instr, 0))
    return (is_all(rhs, 0) and rw.replace_if_compatible(instr, lhs)) or \
        (is_all(lhs, 0) and rw.replace_if_compatible(instr, rhs))


# -- compare ---------------------------------------------------------------------------------------
_UNSIGNED_ZERO = {("LT", 1): False, ("GE", 1): True, ("GT", 0): False, ("LE", 0): True}
_SELF = {"GT": False, "LT": False, "NE": False, "EQ": True, "GE": True, "LE": True}


@rewrite("compare")
def compare_unsigned_with_zero(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCompare: x u< 0 => false, x u>= 0 => true, 0 u> x => false, 0 u<= x => true."""
    if instr.operands[0].shape.element_type.kind != "unsigned":
        return False
    for (direction, zero_side), value in _UNSIGNED_ZERO.items():
        if instr.attrs.get("direction") == direction and is_all(instr.operands[zero_side], 0):
            return rw.replace(instr, rw.scalar_like(instr, value))
    return False


@rewrite("compare")
def compare_non_negative_with_zero(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCompare: nonneg < 0 => false, 0 > nonneg => false, nonneg >= 0 => true, 0 <= nonneg => true."""
    lhs, rhs = instr.operands
    d = instr.attrs.get("direction")
    for direction, value, x, zero in (("LT", False, lhs, rhs), ("GT", False, rhs, lhs),
                                      ("GE", True, lhs, rhs), ("LE", True, rhs, lhs)):
        if d == direction and is_all(zero, 0) and is_non_negative(x):
            return rw.replace(instr, rw.scalar_like(instr, value))
    return False


@rewrite("compare")
def compare_integer_with_itself(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCompare: x == x, x <= x, x >= x => true and x != x, x < x, x > x => false (integers)."""
    lhs, rhs = instr.operands
    if lhs is not rhs or not lhs.shape.element_type.is_integer:
        return False
    return rw.replace(instr, rw.scalar_like(instr, _SELF[instr.attrs["direction"]]))


@rewrite("compare")
def compare_pred_with_constant(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCompare: A != false => A and A == true => A (preds, either operand order)."""
    if not _both_pred(instr):
        return False
    lhs, rhs = instr.operands
    value = {"NE": False, "EQ": True}.get(instr.attrs.get("direction"))
    if value is None:
        return False
    if is_all(rhs, value):
        return rw.replace(instr, lhs)
    return is_all(lhs, value) and rw.replace(instr, rhs)


@rewrite("compare")
def compare_select_of_mask(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCompare: select(compare(a, b, GE), 1, 0) != 0 => compare(a, b, GE) (a float mask
    compared back to pred, as jnp.where(tril(ones(...)), ...) lowers)."""
    lhs, rhs = instr.operands
    if instr.attrs.get("direction") != "NE" or not is_all(rhs, 0) or lhs.opcode != "select":
        return False
    mask, on_true, on_false = lhs.operands
    if mask.opcode != "compare" or mask.attrs.get("direction") != "GE":
        return False
    return is_all(on_true, 1) and is_all(on_false, 0) and rw.same_shape(instr.shape, mask.shape) \
        and rw.replace(instr, mask)


@rewrite("compare")
def compare_greater_than_minmax(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCompare: max(a, b) > a => b > a, max(a, b) > b => a > b, a > min(a, b) => a > b,
    b > min(a, b) => b > a (operand replaced in place)."""
    if instr.attrs.get("direction") != "GT":
        return False
    lhs, rhs = instr.operands
    if lhs.opcode == "maximum" and rhs in lhs.operands:
        a, b = lhs.operands
        rw.set_operand(instr, 0, b if rhs is a else a)
        return True
    if lhs.opcode != "maximum" and rhs.opcode == "minimum" and lhs in rhs.operands:
        a, b = rhs.operands
        rw.set_operand(instr, 1, b if lhs is a else a)
        return True
    return False


# -- select ----------------------------------------------------------------------------------------
@rewrite("select")
def select_same_branches(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSelect: select(p, x, x) => x."""
    _, on_true, on_false = instr.operands
    return on_true is on_false and rw.replace_if_compatible(instr, on_true)


@rewrite("select")
def select_constant_predicate(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSelect: select(true, x, y) => x and select(false, x, y) => y."""
    pred, on_true, on_false = instr.operands
    return (is_all(pred, True) and rw.replace_if_compatible(instr, on_true)) or \
        (is_all(pred, False) and rw.replace_if_compatible(instr, on_false))


@rewrite("select")
def select_of_not(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSelect: select(not(p), a, b) => select(p, b, a)."""
    pred, on_true, on_false = instr.operands
    return pred.opcode == "not" and \
        rw.replace_with_new(instr, "select", [pred.operands[0], on_false, on_true])


@rewrite("select")
def select_of_bool_constants(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSelect (pred result): select(a, true, false) => a and select(a, false, true) => not(a)."""
    pred, on_true, on_false = instr.operands
    if not instr.shape.element_type.is_pred:
        return False
    if is_all(on_true, True) and is_all(on_false, False):
        return rw.replace(instr, pred)
    if is_all(on_true, False) and is_all(on_false, True):
        return rw.replace(instr, rw.add("not", [pred], pred.shape))
    return False


@rewrite("select")
def select_of_compare_on_preds(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSelect (pred result): select(a > b or a >= b, a, b) => a | b; with < or <= => a & b;
    with == => b; with != => a."""
    cmp, a, b = instr.operands
    if not instr.shape.element_type.is_pred or cmp.opcode != "compare" \
            or cmp.operands[0] is not a or cmp.operands[1] is not b:
        return False
    direction = cmp.attrs.get("direction")
    if direction in ("GT", "GE"):
        return rw.replace_with_new(instr, "or", [a, b])
    if direction in ("LT", "LE"):
        return rw.replace_with_new(instr, "and", [a, b])
    return rw.replace(instr, b if direction == "EQ" else a)


@rewrite("select")
def select_into_dynamic_update_slice(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSelect: select(p, xs, dus(xs, x, i...)) => dus(xs, select(ds(p, i...), ds(xs, i...), x), i...)
    (and the mirrored form) when the dus has one use: only the updated window is selected."""
    pred, on_true, on_false = instr.operands
    for xs, dus, dus_on_right in ((on_true, on_false, True), (on_false, on_true, False)):
        if dus.opcode != "dynamic-update-slice" or dus.operands[0] is not xs or len(dus.users) != 1 \
                or (on_true is on_false):
            continue
        x, indices = dus.operands[1], dus.operands[2:]
        sizes = {"dynamic_slice_sizes": tuple(x.shape.dims)}
        window_pred = pred if pred.shape.rank == 0 else rw.add(
            "dynamic-slice", [pred, *indices], pred_shape(x.shape), sizes)
        window = rw.add("dynamic-slice", [xs, *indices], x.shape, sizes)
        picked = [window, x] if dus_on_right else [x, window]
        chosen = rw.add("select", [window_pred, *picked], x.shape)
        return rw.replace_with_new(instr, "dynamic-update-slice", [xs, chosen, *indices])
    return False


# -- complex ---------------------------------------------------------------------------------------
@rewrite("complex")
def complex_of_real_imag(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleComplex: complex(real(c), imag(c)) => c."""
    re, im = instr.operands
    return re.opcode == "real" and im.opcode == "imag" and re.operands[0] is im.operands[0] \
        and rw.replace(instr, re.operands[0])


@rewrite("real")
def real_of_complex(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReal: real(complex(r, i)) => r."""
    x = instr.operands[0]
    return x.opcode == "complex" and rw.replace(instr, x.operands[0])


@rewrite("real")
def real_of_real_value(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReal: real(x) => x when x is not complex."""
    x = instr.operands[0]
    return not x.shape.element_type.is_complex and rw.replace(instr, x)


@rewrite("imag")
def imag_of_complex(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleImag: imag(complex(r, i)) => i."""
    x = instr.operands[0]
    return x.opcode == "complex" and rw.replace(instr, x.operands[1])


@rewrite("imag")
def imag_of_real_value(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleImag: imag(x) => 0 when x is not complex."""
    x = instr.operands[0]
    return not x.shape.element_type.is_complex and rw.replace(instr, rw.scalar_like(instr, 0))
