"""AlgebraicSimplifier rewrites of divide, power, remainder and the unary math ops (XLA's
HandleDivide, HandlePower, HandleRemainder, HandleAbs, HandleExp, HandleLog, HandleRsqrt,
HandleNot in algebraic_simplifier.cc), in XLA's order.

Integer division and remainder by a power of two become shifts and masks (with a sign fix-up for
signed types); float division by a constant becomes a multiplication by its reciprocal, for every
constant as XLA does (the result may differ from the quotient in the last bit).
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.passes.algsimp.base import (
    Rewriter, is_all, is_non_negative, is_scalar_constant, known_constant, pred_shape, rewrite,
    scalar_constant_of_broadcast,
)


def _integral(instr: HloInstruction) -> bool:
    return instr.shape.is_array and instr.shape.element_type.is_integer


def _int_divisor(b: HloInstruction) -> int | None:
    """The value of an effective-scalar integer constant, directly or under a broadcast."""
    c = b if is_scalar_constant(b) else scalar_constant_of_broadcast(b)
    if c is None or not c.shape.element_type.is_integer:
        return None
    return int(np.asarray(c.literal).reshape(-1)[0])


def _power_of_two_exponent(instr: HloInstruction, value: int | None) -> int | None:
    """k when value == 2^k (and positive for signed types, as XLA's TryDivideToShift)."""
    if value is None or value <= 0 or value & (value - 1):
        return None
    return value.bit_length() - 1


def _signed_fixup(rw: Rewriter, instr: HloInstruction, a: HloInstruction, opcode: str, amount) -> bool:
    """select(a < 0, -(op(|a|, amount)), op(|a|, amount)): division/remainder of a signed dividend."""
    negative = rw.add("compare", [a, rw.scalar_like(a, 0)], pred_shape(a.shape), {"direction": "LT"})
    magnitude = rw.add("select", [negative, rw.add("negate", [a], a.shape), a], a.shape)
    result = rw.binary(opcode, magnitude, rw.scalar_like(magnitude, amount), instr.shape)
    return rw.replace_with_new(instr, "select", [negative, rw.add("negate", [result], result.shape), result])


# -- divide ----------------------------------------------------------------------------------------
@rewrite("divide")
def divide_by_one(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide: A / 1 => A."""
    a, b = instr.operands
    return is_all(b, 1) and rw.replace_if_compatible(instr, a)


@rewrite("divide")
def divide_integer_by_power_of_two(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide (TryDivideToShift): integer A / 2^k => A >> k (logical shift); for signed A the
    shift applies to |A| and the sign is put back, so the quotient still rounds toward zero."""
    if not _integral(instr):
        return False
    a, b = instr.operands
    value = _int_divisor(b)
    if value is not None and not instr.shape.element_type.is_signed:
        value &= (1 << instr.shape.element_type.bits) - 1
    k = _power_of_two_exponent(instr, value)
    if k is None:
        return False
    if instr.shape.element_type.is_signed:
        return _signed_fixup(rw, instr, a, "shift-right-logical", k)
    return rw.replace_with_new(instr, "shift-right-logical", [a, rw.scalar_like(a, k)])


@rewrite("divide")
def divide_by_power(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide: A / pow(B, C) => A * pow(B, -C). Floats only here: XLA applies it to integers
    too, where pow(B, -C) truncates to 0 and the result changes."""
    a, p = instr.operands
    if p.opcode != "power" or _integral(instr):
        return False
    b, c = p.operands
    power = rw.binary("power", b, rw.add("negate", [c], c.shape), b.shape)
    return rw.replace_with_new(instr, "multiply", [a, power])


@rewrite("divide")
def divide_by_sqrt(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide: A / sqrt(B) => A * rsqrt(B) when the sqrt has no other user."""
    a, s = instr.operands
    if s.opcode != "sqrt" or len(s.users) != 1:
        return False
    return rw.replace_with_new(instr, "multiply", [a, rw.add("rsqrt", [s.operands[0]], instr.shape)])


@rewrite("divide")
def divide_by_rsqrt(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide: A / rsqrt(B) => A * sqrt(B) when the rsqrt has no other user."""
    a, s = instr.operands
    if s.opcode != "rsqrt" or len(s.users) != 1:
        return False
    return rw.replace_with_new(instr, "multiply", [a, rw.add("sqrt", [s.operands[0]], instr.shape)])


def _reciprocal(literal, etype) -> np.ndarray:
    arr = np.asarray(literal)
    with np.errstate(all="ignore"):
        if etype.is_complex or etype.bits >= 32:
            return (np.asarray(1, arr.dtype) / arr).astype(arr.dtype)
        return (np.float32(1) / arr.astype(np.float32)).astype(arr.dtype)


@rewrite("divide")
def divide_by_constant(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide: A / C => A * (1 / C) for a float or complex constant C (or a broadcast of one)
    and a non-constant A; the reciprocal is computed here, in C's type."""
    a, b = instr.operands
    et = instr.shape.element_type
    if _integral(instr) or a.opcode == "constant" or not (et.is_float or et.is_complex):
        return False
    c = b if b.opcode == "constant" else b.operands[0] if b.opcode == "broadcast" else None
    if c is None or not known_constant(c):
        return False
    inverse = rw.add("constant", [], c.shape, literal=_reciprocal(c.literal, c.shape.element_type))
    if b is not c:
        inverse = rw.broadcast(inverse, b.shape, b.attrs["dimensions"])
    return rw.replace(instr, rw.binary("multiply", a, inverse))


@rewrite("divide")
def divide_of_divides(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide: (A / B) / (C / D) => (A * D) / (B * C) (floats)."""
    top, bottom = instr.operands
    if _integral(instr) or top.opcode != "divide" or bottom.opcode != "divide":
        return False
    (a, b), (c, d) = top.operands, bottom.operands
    return rw.replace(instr, rw.binary("divide", rw.binary("multiply", a, d), rw.binary("multiply", b, c)))


@rewrite("divide")
def divide_of_divide(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide: (A / B) / C => A / (B * C) (floats)."""
    top, c = instr.operands
    if _integral(instr) or top.opcode != "divide":
        return False
    a, b = top.operands
    return rw.replace(instr, rw.binary("divide", a, rw.binary("multiply", b, c)))


@rewrite("divide")
def divide_by_divide(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide: A / (B / C) => (A * C) / B (floats)."""
    a, bottom = instr.operands
    if _integral(instr) or bottom.opcode != "divide":
        return False
    b, c = bottom.operands
    return rw.replace(instr, rw.binary("divide", rw.binary("multiply", a, c), b))


@rewrite("divide")
def divide_converted_pred_by_broadcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDivide: convert(P) / broadcast(y) with P a pred and y a scalar =>
    broadcast(1 / y) * convert(P)."""
    a, bcast = instr.operands
    if _integral(instr) or a.opcode != "convert" or not a.operands[0].shape.element_type.is_pred \
            or bcast.opcode != "broadcast" or bcast.operands[0].shape.rank != 0:
        return False
    y = bcast.operands[0]
    recip = rw.binary("divide", rw.scalar_like(y, 1), y)
    return rw.replace(instr, rw.binary("multiply", rw.broadcast(recip, instr.shape, ()), a))


# -- power -----------------------------------------------------------------------------------------
def _is_all_float(instr: HloInstruction, value: float) -> bool:
    return instr.shape.element_type.is_float and is_all(instr, value)


@rewrite("power")
def power_zero(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePower: pow(A, 0) => 1."""
    return is_all(instr.operands[1], 0) and rw.replace(instr, rw.scalar_like(instr, 1))


@rewrite("power")
def power_one(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePower: pow(A, 1) => A."""
    return is_all(instr.operands[1], 1) and rw.replace_if_compatible(instr, instr.operands[0])


@rewrite("power")
def power_two(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePower: pow(A, 2) => A * A."""
    a, e = instr.operands
    return is_all(e, 2) and rw.replace_with_new(instr, "multiply", [a, a])


@rewrite("power")
def power_three(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePower: pow(A, 3) => A * (A * A) (the cube in GELU)."""
    a, e = instr.operands
    if not is_all(e, 3):
        return False
    return rw.replace_with_new(instr, "multiply", [a, rw.binary("multiply", a, a, instr.shape)])


@rewrite("power")
def power_minus_one(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePower: pow(A, -1) => 1 / A."""
    a, e = instr.operands
    return is_all(e, -1) and rw.replace_with_new(instr, "divide", [rw.scalar_like(a, 1), a])


@rewrite("power")
def power_half(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePower: pow(A, 0.5) => sqrt(A) when A is provably non-negative (pow(-0, 0.5) is +0)."""
    a, e = instr.operands
    return _is_all_float(e, 0.5) and is_non_negative(a) and rw.replace_with_new(instr, "sqrt", [a])


# -- remainder -------------------------------------------------------------------------------------
@rewrite("remainder")
def remainder_of_remainder(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleRemainder: (A % B) % B => A % B."""
    a, b = instr.operands
    return a.opcode == "remainder" and a.operands[1] is b and rw.replace(instr, a)


@rewrite("remainder")
def remainder_by_power_of_two(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleRemainder (TryRemainderToAnd): integer A % 2^k => A & (2^k - 1); for signed A the mask
    applies to |A| and the result takes A's sign."""
    if not _integral(instr):
        return False
    a, b = instr.operands
    value = _int_divisor(b)
    if value is not None and not instr.shape.element_type.is_signed:
        value &= (1 << instr.shape.element_type.bits) - 1
    if _power_of_two_exponent(instr, value) is None:
        return False
    if instr.shape.element_type.is_signed:
        return _signed_fixup(rw, instr, a, "and", value - 1)
    return rw.replace_with_new(instr, "and", [a, rw.scalar_like(b, value - 1)])


def _iota_and_divisor(instr: HloInstruction):
    """(numerator, iota bound, divisor constant, divisor broadcast) for x % broadcast(c)."""
    x, bcast = instr.operands
    c = scalar_constant_of_broadcast(bcast)
    if c is None or not c.shape.element_type.is_integer:
        return None
    return x, c, bcast


@rewrite("remainder")
def remainder_of_small_iota(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleRemainder: iota % broadcast(N) => iota when N >= the iota's size (never wraps)."""
    match = _iota_and_divisor(instr)
    if match is None or match[0].opcode != "iota":
        return False
    iota, c, _ = match
    bound = iota.shape.dims[iota.attrs["iota_dimension"]]
    return int(np.asarray(c.literal).reshape(-1)[0]) >= bound and rw.replace(instr, iota)


@rewrite("remainder")
def remainder_of_iota_plus_divisor(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleRemainder: (iota + broadcast(N)) % broadcast(N) => iota % broadcast(N), the same constant
    N on both sides, when iota + N cannot overflow the element type."""
    match = _iota_and_divisor(instr)
    if match is None or match[0].opcode != "add":
        return False
    total, c, bcast = match
    for iota, addend in (total.operands, reversed(total.operands)):
        if iota.opcode == "iota" and scalar_constant_of_broadcast(addend) is c:
            et = iota.shape.element_type
            hi = (1 << (et.bits - 1)) - 1 if et.is_signed else (1 << et.bits) - 1
            bound = iota.shape.dims[iota.attrs["iota_dimension"]]
            largest = int(np.asarray(c.literal).reshape(-1)[0]) + bound
            return largest <= hi and rw.replace_with_new(instr, "remainder", [iota, bcast])
    return False


# -- unary -----------------------------------------------------------------------------------------
@rewrite("abs")
def abs_of_non_negative(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleAbs: abs(A) => A when A is provably non-negative (exp, iota, abs of unsigned, ...)."""
    return is_non_negative(instr.operands[0]) and rw.replace(instr, instr.operands[0])


@rewrite("exponential")
def exp_of_zero(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleExp: exp(0) => 1 (a scalar zero constant, or a broadcast of one)."""
    x = instr.operands[0]
    c = x if is_scalar_constant(x) else scalar_constant_of_broadcast(x)
    return c is not None and is_all(c, 0) and rw.replace(instr, rw.scalar_like(instr, 1))


@rewrite("log")
def log_of_power(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleLog: log(pow(A, B)) => select(B == 0, 0, B * log(|A|)) (|A| skipped for complex A)."""
    p = instr.operands[0]
    if p.opcode != "power":
        return False
    a, b = p.operands
    magnitude = a if a.shape.element_type.is_complex else rw.add("abs", [a], instr.shape)
    scaled = rw.binary("multiply", rw.add("log", [magnitude], instr.shape), b, instr.shape)
    b_is_zero = rw.add("compare", [b, rw.scalar_like(b, 0)], pred_shape(b.shape), {"direction": "EQ"})
    return rw.replace_with_new(instr, "select", [b_is_zero, rw.scalar_like(instr, 0), scaled])


def _log_scaled(instr: HloInstruction, rw: Rewriter, opcode: str, factor: float) -> bool:
    x = instr.operands[0]
    if x.opcode != opcode:
        return False
    new_log = rw.add("log", [x.operands[0]], instr.shape)
    return rw.replace_with_new(instr, "multiply", [new_log, rw.scalar_like(instr, factor)])


@rewrite("log")
def log_of_sqrt(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleLog: log(sqrt(A)) => log(A) * 0.5."""
    return _log_scaled(instr, rw, "sqrt", 0.5)


@rewrite("log")
def log_of_rsqrt(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleLog: log(rsqrt(A)) => log(A) * -0.5."""
    return _log_scaled(instr, rw, "rsqrt", -0.5)


@rewrite("rsqrt")
def rsqrt_of_power_minus_two(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleRsqrt: rsqrt(pow(A, -2)) => A when A is provably non-negative."""
    p = instr.operands[0]
    return p.opcode == "power" and is_all(p.operands[1], -2) and is_non_negative(p.operands[0]) \
        and rw.replace(instr, p.operands[0])


@rewrite("rsqrt")
def rsqrt_of_reciprocal(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleRsqrt: rsqrt(1 / A) => sqrt(A) when A is provably non-negative."""
    d = instr.operands[0]
    if d.opcode != "divide" or not is_all(d.operands[0], 1) or not is_non_negative(d.operands[1]):
        return False
    return rw.replace_with_new(instr, "sqrt", [d.operands[1]])


@rewrite("not")
def not_of_not(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleNot: not(not(x)) => x."""
    inner = instr.operands[0]
    return inner.opcode == "not" and rw.replace_if_compatible(instr, inner.operands[0])
