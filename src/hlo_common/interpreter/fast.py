"""Specialized handlers for the ops that dominate loop bodies (a plan-time choice, same values).

The general handlers (`elementwise.py`, `bitwise.py`, ...) serve every element type: they widen
narrow floats, carry sub-byte integers, wrap and round. On the "plain" numpy types (8- to 64-bit
integers, f32, f64) most of that is a no-op, and on the scalars and tiny arrays of a while body
the bookkeeping costs several times the arithmetic. When the evaluation plan is built,
`specialize(instr)` returns a handler made for the instruction's types, or None to use the
registered one:

- binary arithmetic and compare on two scalars use numpy scalar arithmetic (an order of
  magnitude cheaper than a ufunc call on 0-d arrays; same C arithmetic, same wrap-around);
- shifts clamp the amount instead of selecting with `np.where`: x << min(s, bits-1), zeroed
  when s >= bits (XLA's result for out-of-range amounts), and an arithmetic right shift by
  bits-1 is the sign fill;
- get-tuple-element reads its index once; a broadcast of a scalar into at most
  `SMALL_BROADCAST` elements is materialized (cheaper than a broadcast view).

`tests/unit/hlo_common/interpreter/test_interp_fast.py` checks each against the general handler on
edge values.
"""

from __future__ import annotations

import operator
from typing import Callable

import numpy as np

from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.hlo.ir import HloInstruction

Handler = Callable[[HloInstruction, list, object], object]
SMALL_BROADCAST = 4096
_UNSIGNED_OF_BITS = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_SIGNED_OF_BITS = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def is_plain(t: PrimitiveType) -> bool:
    """8- to 64-bit integers, f32 and f64: types numpy computes exactly as XLA does."""
    return (t.is_integer and t.bits >= 8) or (t.is_float and t.bits in (32, 64))


def _binary(scalar_op: Callable, ufunc: np.ufunc) -> Handler:
    def handler(instr, operands, ev):
        a, b = operands
        if a.ndim or b.ndim:
            return ufunc(a, b)
        return np.array(scalar_op(a[()], b[()]))

    return handler


_ARITH = {
    "add": (operator.add, np.add), "subtract": (operator.sub, np.subtract),
    "multiply": (operator.mul, np.multiply),
}
_INT_ONLY = {
    "and": (operator.and_, np.bitwise_and), "or": (operator.or_, np.bitwise_or),
    "xor": (operator.xor, np.bitwise_xor), "maximum": (max, np.maximum), "minimum": (min, np.minimum),
}
_FLOAT_ONLY = {"divide": (operator.truediv, np.divide)}
_COMPARE = {
    "EQ": (operator.eq, np.equal), "NE": (operator.ne, np.not_equal), "LT": (operator.lt, np.less),
    "LE": (operator.le, np.less_equal), "GT": (operator.gt, np.greater),
    "GE": (operator.ge, np.greater_equal),
}


def _elementwise_types(instr: HloInstruction) -> PrimitiveType | None:
    """The common plain element type of the operands (and result), or None."""
    types = {o.shape.element_type for o in instr.operands if o.shape.is_array and not o.shape.is_tuple}
    if len(types) != 1 or len(instr.operands) != 2:
        return None
    t = types.pop()
    return t if is_plain(t) else None


def _specialize_binary(instr: HloInstruction) -> Handler | None:
    t = _elementwise_types(instr)
    if t is None or instr.shape.element_type is not t:
        return None
    op = instr.opcode
    pair = _ARITH.get(op) or (_INT_ONLY.get(op) if t.is_integer else _FLOAT_ONLY.get(op))
    return _binary(*pair) if pair else None


def _specialize_compare(instr: HloInstruction) -> Handler | None:
    t = _elementwise_types(instr)
    if t is None:
        return None
    default = "FLOAT" if t.is_float else ("SIGNED" if t.kind == "signed" else "UNSIGNED")
    if str(instr.attrs.get("type", default)) != default:
        return None
    pair = _COMPARE.get(str(instr.attrs.get("direction", "EQ")))
    return _binary(*pair) if pair else None


def _specialize_shift(instr: HloInstruction) -> Handler | None:
    t = _elementwise_types(instr)
    if t is None or not t.is_integer:
        return None
    dtype, unsigned, signed = t.np_dtype, _UNSIGNED_OF_BITS[t.bits], _SIGNED_OF_BITS[t.bits]
    last = np.array(t.bits - 1, unsigned)
    op = instr.opcode

    def handler(instr, operands, ev):
        x, s = operands
        u = s.view(unsigned)  # amounts are read as unsigned: a negative one is out of range
        amount = np.minimum(u, last)
        if op == "shift-right-arithmetic":  # by bits - 1: the sign fill of out-of-range amounts
            return np.asarray(np.right_shift(x.view(signed), amount.astype(signed))).view(dtype)
        bits = x.view(unsigned)
        shifted = np.left_shift(bits, amount) if op == "shift-left" else np.right_shift(bits, amount)
        return np.asarray(shifted * (u <= last)).view(dtype)

    return handler


def _specialize_gte(instr: HloInstruction) -> Handler | None:
    index = int(instr.attrs["index"])
    return lambda instr, operands, ev: operands[0][index]


def _specialize_broadcast(instr: HloInstruction) -> Handler | None:
    shape = instr.shape
    if instr.operands[0].shape.rank != 0 or shape.num_elements > SMALL_BROADCAST:
        return None
    dims, dtype = shape.dims, shape.element_type.np_dtype

    def handler(instr, operands, ev):
        out = np.empty(dims, dtype)
        out[...] = operands[0]
        return out
    return handler


def _specialize_convert(instr: HloInstruction) -> Handler | None:
    src, dst = instr.operands[0].shape.element_type, instr.shape.element_type
    if not (is_plain(src) and is_plain(dst)) or (src.is_float and dst.is_integer):
        return None  # float -> int saturates (the general handler)
    dtype = dst.np_dtype
    return lambda instr, operands, ev: operands[0].astype(dtype)


_SPECIALIZERS: dict[str, Callable[[HloInstruction], Handler | None]] = {
    **{op: _specialize_binary for op in (*_ARITH, *_INT_ONLY, *_FLOAT_ONLY)},
    "compare": _specialize_compare,
    "shift-left": _specialize_shift, "shift-right-logical": _specialize_shift,
    "shift-right-arithmetic": _specialize_shift,
    "get-tuple-element": _specialize_gte,
    "broadcast": _specialize_broadcast,
    "convert": _specialize_convert,
}


def specialize(instr: HloInstruction) -> Handler | None:
    """A handler specialized to `instr`'s types, or None (use the registered handler)."""
    make = _SPECIALIZERS.get(instr.opcode)
    return make(instr) if make is not None else None
