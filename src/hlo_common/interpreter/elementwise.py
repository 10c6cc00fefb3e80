"""Interpreter handlers for the elementwise arithmetic opcodes (unary, binary, ternary).

Semantics follow XLA's HloEvaluator: narrow floats are computed in f32 and rounded once per op;
integers wrap (integer power is exact modulo 2^bits); integer division by zero gives -1 (signed)
or all ones (unsigned) and x % 0 gives x; INT_MIN / -1 is INT_MIN and INT_MIN % -1 is 0.
maximum, minimum and clamp propagate NaN, and order -0 below +0 as XLA:CPU does. Conversions,
compare and the bit-level ops (shifts, popcnt, clz, mulhi) live in `conversions.py` and
`bitwise.py`.

Handlers use the instruction only for element types, never for dimensions, so the same code runs
on whole arrays when `Evaluator.map_computation` vectorizes a scalar computation.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.interpreter.arith import down, erf, int_compute, up
from hlo_common.interpreter.registry import register
from hlo_common.hlo.ir import HloInstruction


def _etype(instr: HloInstruction) -> PrimitiveType:
    return instr.shape.element_type


def _in_type(instr: HloInstruction, i: int = 0) -> PrimitiveType:
    return instr.operands[i].shape.element_type


# -- floating-point unary functions (computed in f32 for narrow floats) --------------------------------


def _round_afz(x: np.ndarray) -> np.ndarray:
    """Round half away from zero, exactly (x - trunc(x) is exact in floating point)."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)  # keeps the sign of -0 and -0.3


def _logistic(x: np.ndarray) -> np.ndarray:
    one = np.ones((), x.dtype)
    return one / (one + np.exp(-x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.ones((), x.dtype) / np.sqrt(x)


_FLOAT_UNARY = {
    "exponential": np.exp, "exponential-minus-one": np.expm1, "log": np.log, "log-plus-one": np.log1p,
    "sine": np.sin, "cosine": np.cos, "tan": np.tan, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh,
    "asin": np.arcsin, "acos": np.arccos, "atanh": np.arctanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "sqrt": np.sqrt, "rsqrt": _rsqrt, "cbrt": np.cbrt, "ceil": np.ceil, "floor": np.floor,
    "round-nearest-even": np.rint, "round-nearest-afz": _round_afz, "logistic": _logistic, "erf": erf,
}


def _float_unary_handler(fn):
    def handler(instr, operands, ev):
        return down(fn(up(operands[0])), _etype(instr))

    return handler


for _op, _fn in _FLOAT_UNARY.items():
    register(_op)(_float_unary_handler(_fn))


@register("abs")
def _abs(instr, operands, ev):
    x = operands[0]
    et = _in_type(instr)
    if et.kind == "unsigned":
        return x
    if et.is_integer:
        return down(np.abs(int_compute(x)), et)
    return down(np.abs(up(x)), _etype(instr))


@register("negate")
def _negate(instr, operands, ev):
    et = _etype(instr)
    return down(np.negative(int_compute(up(operands[0]))), et)


@register("sign")
def _sign(instr, operands, ev):
    x = up(operands[0])
    et = _etype(instr)
    if et.is_complex:
        mag = np.abs(x)
        safe = np.where(mag == 0, 1, mag).astype(mag.dtype)
        return down(np.where(mag == 0, 0, x / safe), et)
    if et.is_float:
        mag = (x != 0).astype(x.dtype)
        return down(np.where(np.isnan(x), x, np.copysign(mag, x)), et)
    return down(np.sign(int_compute(x)), et)


@register("is-finite")
def _is_finite(instr, operands, ev):
    return np.isfinite(up(operands[0]))


@register("real")
def _real(instr, operands, ev):
    return down(np.real(operands[0]), _etype(instr))


@register("imag")
def _imag(instr, operands, ev):
    x = operands[0]
    if not np.iscomplexobj(x):
        return np.zeros_like(x)
    return down(np.imag(x), _etype(instr))


# -- binary arithmetic ---------------------------------------------------------------------------------


def _binary(instr, operands):
    """Both operands in their compute dtype, and the result type."""
    a, b = operands
    return int_compute(up(a)), int_compute(up(b)), _etype(instr)


@register("add")
def _add(instr, operands, ev):
    a, b, et = _binary(instr, operands)
    return down(np.logical_or(a, b) if et.is_pred else np.add(a, b), et)


@register("subtract")
def _subtract(instr, operands, ev):
    a, b, et = _binary(instr, operands)
    return down(np.logical_xor(a, b) if et.is_pred else np.subtract(a, b), et)


@register("multiply")
def _multiply(instr, operands, ev):
    a, b, et = _binary(instr, operands)
    return down(np.logical_and(a, b) if et.is_pred else np.multiply(a, b), et)


def float_maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """maximum of floats: NaN propagates, and -0 < +0 (as XLA:CPU computes it)."""
    if np.size(b) == 1 and np.size(a) > 1:  # relu's max(x, 0): one value to compare with
        return _with_scalar(np.maximum, a, b, keep_sign_of_zero=bool(np.signbit(b)))
    return np.where(a == b, np.where(np.signbit(a), b, a), np.maximum(a, b))


def float_minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """minimum of floats: NaN propagates, and -0 < +0."""
    if np.size(b) == 1 and np.size(a) > 1:
        return _with_scalar(np.minimum, a, b, keep_sign_of_zero=not np.signbit(b))
    return np.where(a == b, np.where(np.signbit(a), a, b), np.minimum(a, b))


def _with_scalar(ufunc: np.ufunc, a: np.ndarray, b: np.ndarray, keep_sign_of_zero: bool) -> np.ndarray:
    """`float_maximum` / `float_minimum` of an array and one value `b`, in one or three passes.

    Where a == b the result must be a's value with the sign of zero settled by the -0 < +0 order;
    numpy's own maximum / minimum may return either operand of a tie. A nonzero (or NaN) `b` ties
    only with equal bits, so numpy's result is exact; a zero `b` ties with both zeros: the result
    of maximum with -0 (minimum with +0) is then `a` itself, of maximum with +0 (minimum with -0)
    is `b`."""
    r = ufunc(a, b)
    if b.reshape(()) != 0:
        return r
    np.copyto(r, a if keep_sign_of_zero else np.broadcast_to(b, r.shape), where=a == b)
    return r


@register("maximum")
def _maximum(instr, operands, ev):
    a, b, et = _binary(instr, operands)
    return down(float_maximum(a, b) if et.is_float else np.maximum(a, b), et)


@register("minimum")
def _minimum(instr, operands, ev):
    a, b, et = _binary(instr, operands)
    return down(float_minimum(a, b) if et.is_float else np.minimum(a, b), et)


def _int_limits(et: PrimitiveType) -> tuple[int, int]:
    if et.kind == "signed":
        return -(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1
    return 0, (1 << et.bits) - 1


def _complex_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b with C99 Annex G's recovery of infinities where the plain formula gives NaN + NaN i
    (finite / infinite is 0, infinite / finite is infinite, x / 0 is infinite), as XLA computes."""
    q = np.divide(a, b)
    both_nan = np.isnan(q.real) & np.isnan(q.imag)
    if not both_nan.any():
        return q
    x, y, c, d = a.real, a.imag, b.real, b.imag
    inf = np.asarray(np.inf, x.dtype)
    zero_den = (c == 0) & (d == 0) & ~(np.isnan(x) & np.isnan(y))
    num_inf = (np.isinf(x) | np.isinf(y)) & np.isfinite(c) & np.isfinite(d)
    den_inf = (np.isinf(c) | np.isinf(d)) & np.isfinite(x) & np.isfinite(y)
    xi, yi = np.copysign(np.isinf(x).astype(x.dtype), x), np.copysign(np.isinf(y).astype(x.dtype), y)
    ci, di = np.copysign(np.isinf(c).astype(x.dtype), c), np.copysign(np.isinf(d).astype(x.dtype), d)
    cand = [
        (zero_den, np.copysign(inf, c) * x, np.copysign(inf, c) * y),
        (num_inf, inf * (xi * c + yi * d), inf * (yi * c - xi * d)),
        (den_inf, 0 * (x * ci + y * di), 0 * (y * ci - x * di)),
    ]
    re, im = q.real.copy(), q.imag.copy()
    for cond, r, i in reversed(cand):  # the first matching rule wins
        sel = both_nan & cond
        re, im = np.where(sel, r, re), np.where(sel, i, im)
    out = np.empty(q.shape, q.dtype)
    out.real, out.imag = re, im
    return out


@register("divide")
def _divide(instr, operands, ev):
    a, b, et = _binary(instr, operands)
    if et.is_complex:
        return down(_complex_divide(a, b), et)
    if not et.is_integer:
        return down(np.divide(a, b), et)
    special = (b == 0) | (b == -1) if et.kind == "signed" else (b == 0)
    safe_b = np.where(special, np.ones((), b.dtype), b)
    q = np.floor_divide(a, safe_b)
    r = a - q * safe_b
    if et.kind == "signed":  # floor -> truncation toward zero
        q = q + ((r != 0) & ((a < 0) != (safe_b < 0))).astype(q.dtype)
        q = np.where(b == -1, np.negative(a), q)  # INT_MIN / -1 wraps to INT_MIN
        q = np.where(b == 0, np.full((), -1, q.dtype), q)
    else:
        q = np.where(b == 0, np.full((), _int_limits(et)[1], q.dtype), q)
    return down(q, et)


@register("remainder")
def _remainder(instr, operands, ev):
    a, b, et = _binary(instr, operands)
    if not et.is_integer:
        return down(np.fmod(a, b), et)
    special = (b == 0) | (b == -1) if et.kind == "signed" else (b == 0)
    safe_b = np.where(special, np.ones((), b.dtype), b)
    r = np.fmod(a, safe_b)  # C's %: the sign of the dividend
    if et.kind == "signed":
        r = np.where(b == -1, np.zeros((), r.dtype), r)
    return down(np.where(b == 0, a, r), et)


@register("power")
def _power(instr, operands, ev):
    a, b, et = _binary(instr, operands)
    if et.is_pred:
        return np.logical_or(a, np.logical_not(b))
    if et.is_integer:  # exact modulo 2^bits (XLA:CPU uses only the exponent's low 6 bits)
        neg = b < 0 if et.kind == "signed" else np.zeros((), bool)
        r = np.power(a, np.where(neg, np.zeros((), b.dtype), b))
        # Negative exponents: 1^-n = 1, (-1)^-n = +-1 (as XLA:CPU), anything else truncates to 0.
        odd = (b & 1) != 0
        neg_result = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(r.dtype)
        r = np.where(neg, neg_result, r)
        return down(r, et)
    one = np.ones((), a.dtype)
    r = np.power(a, b)
    return down(np.where((a == one) | (b == 0), one, r), et)


@register("atan2")
def _atan2(instr, operands, ev):
    a, b, et = _binary(instr, operands)
    if et.is_complex:  # atan2(y, x) = -i * log((x + i*y) / sqrt(x^2 + y^2)), as the evaluator does
        i = np.asarray(1j, a.dtype)
        return down(-i * np.log((b + i * a) / np.sqrt(b * b + a * a)), et)
    return down(np.arctan2(a, b), et)


@register("complex")
def _complex(instr, operands, ev):
    re, im = operands
    et = _etype(instr)
    shape = np.broadcast_shapes(np.shape(re), np.shape(im))
    out = np.empty(shape, et.np_dtype)
    out.real = re
    out.imag = im
    return out


# -- ternary ---------------------------------------------------------------------------------------------


@register("select")
def _select(instr, operands, ev):
    pred, on_true, on_false = operands
    if np.ndim(pred) == 0:
        return on_true if bool(pred) else on_false
    return np.where(pred, on_true, on_false)


@register("clamp")
def _clamp(instr, operands, ev):
    lo, x, hi = (int_compute(up(v)) for v in operands)
    et = _etype(instr)
    return down(np.minimum(hi, np.maximum(x, lo)), et)
