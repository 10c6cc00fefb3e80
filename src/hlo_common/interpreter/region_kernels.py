"""Float arithmetic of elementwise-region members, on wide values and into dead operands' buffers.

Inside an elementwise region (`regions.py`) the common float ops do not go through their handlers
(which widen narrow operands, compute, and round into a fresh array of the element type) but
through a kernel: `kernel(operands, out)` computes the op in the compute dtype (f32 for bf16 and
f32, f64 for f64) on operands already in that dtype, writing into `out` (a dead operand's array
that the region hands over, or None for a fresh array). A bf16 member's result is then rounded to
bf16 precision in place (`narrow.round_bf16_in_place`) and stays in f32 for the members that read
it. The arithmetic is the handlers' own (the same numpy functions, and `float_maximum` /
`float_minimum` of `elementwise.py`), so each member's value is bit for bit the handler's.

A bf16 member computing one of the costlier unary functions (`TABLED`: exp, log, erf, ...) has
only 65536 possible operand values: its kernel looks each value up (`narrow_jit.lookup`, one
compiled pass) in a table of that function's own results on every bf16 value, rounded to bf16 as
the handler rounds them (`bf16_table`), instead of computing the function and rounding the
result. numpy computes each element of a unary function the same way wherever it sits in an array,
so the values are the same (tests/unit/hlo_common/interpreter/test_interp_narrow.py checks every
bf16 value of every such function against the handler).

`kernel_for(instr)` gives the kernel of a region member, or None when its handler runs instead
(other opcodes, element types other than f32, f64 and bf16, and converts whose rounding would
differ: from f64 a convert rounds once, straight to the target type).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hlo_common.interpreter import narrow, narrow_jit
from hlo_common.interpreter.elementwise import _FLOAT_UNARY, float_maximum, float_minimum
from hlo_common.hlo.ir import HloInstruction

Kernel = Callable[[list, "np.ndarray | None"], np.ndarray]
_COMPUTE_TYPES = frozenset({"f32", "f64", "bf16"})
_F32_SOURCES = frozenset({"bf16", "f16", "f32"})  # converts from these to f32 / bf16 are exact in f32


@dataclass(frozen=True)
class MemberKernel:
    """`fn` computes the member; `rounds`: its result is then rounded to bf16 precision."""

    fn: Kernel
    rounds: bool


def _binary(ufunc: np.ufunc) -> Kernel:
    return lambda ops, out: ufunc(ops[0], ops[1], out=out)


def _unary(fn) -> Kernel:
    if isinstance(fn, np.ufunc):
        return lambda ops, out: fn(ops[0], out=out)
    return lambda ops, out: fn(ops[0])


def _convert(ops: list, out: np.ndarray | None) -> np.ndarray:
    if out is None:
        return ops[0].astype(np.float32)  # a copy: the result is rounded in place
    np.copyto(out, ops[0])
    return out


def _clamp(ops: list, out: np.ndarray | None) -> np.ndarray:
    lo, x, hi = ops
    return np.minimum(hi, np.maximum(x, lo))


def _select(ops: list, out: np.ndarray | None) -> np.ndarray:
    return np.where(ops[0], ops[1], ops[2])


_KERNELS: dict[str, Kernel] = {
    "add": _binary(np.add), "subtract": _binary(np.subtract), "multiply": _binary(np.multiply),
    "divide": _binary(np.divide), "negate": _unary(np.negative), "abs": _unary(np.abs),
    "maximum": lambda ops, out: float_maximum(ops[0], ops[1]),
    "minimum": lambda ops, out: float_minimum(ops[0], ops[1]),
    "clamp": _clamp, "select": _select,
    **{op: _unary(fn) for op, fn in _FLOAT_UNARY.items()},
}
# Ops whose result is one of their operand values: nothing to round.
_PICKS = frozenset({"select"})
# bf16 unary ops looked up in a table of their results: numpy's evaluation plus the rounding costs
# more than a lookup (not tanh, sqrt or the roundings: about as fast as the lookup, or faster).
TABLED = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "sine", "cosine", "tan", "sinh",
    "cosh", "asin", "acos", "atanh", "asinh", "acosh", "cbrt", "rsqrt", "logistic", "erf",
})
_tables: dict[str, np.ndarray] = {}


def bf16_table(op: str) -> np.ndarray:
    """The bits of unary `op`'s value, rounded to bf16 and held in f32, for each bf16 value (by its
    16 bits): the handler's own computation (f32 function, ml_dtypes rounding) on all of them."""
    table = _tables.get(op)
    if table is None:  # two threads may both build it: the same values
        values = (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)
        with np.errstate(all="ignore"):
            result = np.asarray(_FLOAT_UNARY[op](values))
            assert result.dtype == np.float32, op
            table = _tables[op] = result.astype(narrow.BF16).astype(np.float32).view(np.uint32)
    return table


def _tabled(op: str) -> Kernel:
    fn = _FLOAT_UNARY[op]

    def kernel(ops: list, out: np.ndarray | None) -> np.ndarray:
        x = ops[0]
        dest = np.empty(x.shape, np.float32) if out is None else out
        if narrow_jit.lookup(dest, x, bf16_table(op)):
            return dest
        value = fn(x, out=dest) if isinstance(fn, np.ufunc) else fn(x)
        return narrow.round_bf16_in_place(value)

    return kernel


def kernel_for(instr: HloInstruction) -> MemberKernel | None:
    """The kernel of elementwise region member `instr`, or None (its handler runs)."""
    et = instr.shape.element_type
    op = instr.opcode
    if et.name not in _COMPUTE_TYPES:
        return None
    operand_types = [o.shape.element_type for o in instr.operands]
    if op == "convert":
        if operand_types[0].name not in _F32_SOURCES or et.name == "f64":
            return None
        return MemberKernel(_convert, et.name == "bf16")
    fn = _KERNELS.get(op)
    floats = operand_types[1:] if op == "select" else operand_types
    if fn is None or any(t is not et for t in floats):
        return None
    if op in TABLED and et.name == "bf16":
        return MemberKernel(_tabled(op), False)  # the table holds rounded values
    if op == "select" and not operand_types[0].is_pred:
        return None
    return MemberKernel(fn, et.name == "bf16" and op not in _PICKS)
