"""Recognizing an arg-max / arg-min reduce (algebraic_simplifier.cc's MatchArgMax, MatchArgMin and
MatchArgMinMax), for the HandleReduce rewrite in `reductions` that lets a plain max (min) reduce of
the same rows read the variadic reduce's value output instead of reducing a second time.

An arg-max reduce, as jnp.argmax lowers it: `reduce(x, iota, -inf, 0)` whose reducer over
(p0 value, p1 index, p2 value, p3 index) returns

    pick  = or(compare(p0, p2, GT), compare(p0, p0, NE))            (either operand order of or)
    tuple(select(pick, p0, p2),
          select(or(pick', and(compare(p0, p2, EQ), compare(p1, p3, LT))), p1, p3))

with pick' the same pattern as pick (not necessarily the same instruction); arg-min has LT in
pick and +inf as the value's init. Integer types use their lowest (highest) value for -inf (+inf).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.passes.algsimp.base import is_scalar_constant


def _is_param(instr: HloInstruction, number: int) -> bool:
    return instr.opcode == "parameter" and instr.parameter_number == number


def _is_compare(instr: HloInstruction, lhs: int, rhs: int, direction: str) -> bool:
    return instr.opcode == "compare" and instr.attrs.get("direction") == direction \
        and _is_param(instr.operands[0], lhs) and _is_param(instr.operands[1], rhs)


def _is_or_any_order(instr: HloInstruction, first, second) -> bool:
    if instr.opcode != "or":
        return False
    a, b = instr.operands
    return (first(a) and second(b)) or (first(b) and second(a))


def _is_value_pick(instr: HloInstruction, is_max: bool) -> bool:
    return _is_or_any_order(instr, lambda i: _is_compare(i, 0, 2, "GT" if is_max else "LT"),
                            lambda i: _is_compare(i, 0, 0, "NE"))


def _is_tie_to_smaller_index(instr: HloInstruction) -> bool:
    return instr.opcode == "and" and _is_compare(instr.operands[0], 0, 2, "EQ") \
        and _is_compare(instr.operands[1], 1, 3, "LT")


def _is_select_of(instr: HloInstruction, on_true: int, on_false: int) -> bool:
    return instr.opcode == "select" and _is_param(instr.operands[1], on_true) \
        and _is_param(instr.operands[2], on_false)


def match_arg_min_max_reducer(root: HloInstruction, is_max: bool) -> bool:
    """XLA's MatchArgMinMax on the reducer's root (see the module docstring)."""
    if root.opcode != "tuple" or len(root.operands) != 2:
        return False
    value, index = root.operands
    if not (_is_select_of(value, 0, 2) and _is_value_pick(value.operands[0], is_max)):
        return False
    return _is_select_of(index, 1, 3) and _is_or_any_order(
        index.operands[0], lambda i: _is_value_pick(i, is_max), _is_tie_to_smaller_index)


def _scalar_extreme(instr: HloInstruction, lowest: bool) -> bool:
    """XLA's IsScalarConstantNegInf (lowest) / IsScalarConstantInf: -inf / +inf for types with
    infinities, else the type's lowest / highest value."""
    if not is_scalar_constant(instr):
        return False
    etype = instr.shape.element_type
    if etype.is_complex:
        return False
    v = np.asarray(instr.literal).reshape(-1)[0]
    if etype.is_float:
        with np.errstate(invalid="ignore"):
            has_inf = bool(np.isinf(np.array(np.inf).astype(etype.np_dtype)))
        bound = np.inf if has_inf else float(ml_dtypes.finfo(etype.np_dtype).max)
        return bool(float(v) == (-bound if lowest else bound))
    if etype.is_pred:
        return bool(v) is (not lowest)
    bits, signed = etype.bits, etype.is_signed
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return int(v) == (lo if lowest else hi)


def is_scalar_constant_neg_inf(instr: HloInstruction) -> bool:
    return _scalar_extreme(instr, lowest=True)


def is_scalar_constant_inf(instr: HloInstruction) -> bool:
    return _scalar_extreme(instr, lowest=False)


def _match_arg(reduce: HloInstruction, is_max: bool) -> bool:
    if reduce.opcode != "reduce" or len(reduce.operands) != 4 or not reduce.shape.is_tuple \
            or reduce.operands[1].opcode != "iota":
        return False
    init = reduce.operands[2]
    if not (is_scalar_constant_neg_inf(init) if is_max else is_scalar_constant_inf(init)):
        return False
    if not (is_scalar_constant(reduce.operands[3]) and not reduce.operands[3].shape.element_type.is_complex
            and np.asarray(reduce.operands[3].literal).reshape(-1)[0] == 0):
        return False
    return match_arg_min_max_reducer(reduce.attrs["to_apply"].root, is_max)


def match_arg_max(reduce: HloInstruction) -> bool:
    """XLA's MatchArgMax: a (max, arg-max) variadic reduce over (x, iota) from (-inf, 0)."""
    return _match_arg(reduce, is_max=True)


def match_arg_min(reduce: HloInstruction) -> bool:
    """XLA's MatchArgMin: a (min, arg-min) variadic reduce over (x, iota) from (+inf, 0)."""
    return _match_arg(reduce, is_max=False)
