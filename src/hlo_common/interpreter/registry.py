"""The interpreter's opcode table: one handler function per opcode (XLA's HloEvaluator role).

A handler takes the instruction, its evaluated operands and the evaluator, and returns the value:

    @register("negate")
    def _negate(instr, operands, ev):
        return np.negative(operands[0])

Values are numpy arrays holding the logical (row-major) elements in the element type's own dtype
(`PrimitiveType.np_dtype`: ml_dtypes.bfloat16 for bf16, ml_dtypes.int4 for s4, ...), a Python
tuple of values for tuple shapes, and `TOKEN` for tokens. Layouts only matter to bitcast.
"""

from __future__ import annotations

from typing import Callable

HANDLERS: dict[str, Callable] = {}


def register(*opcodes: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        for op in opcodes:
            if op in HANDLERS:
                raise AssertionError(f"two interpreter handlers for '{op}'")
            HANDLERS[op] = fn
        return fn

    return deco


class _Token:
    """The value of a token-shaped instruction (after-all, infeed's token, ...)."""

    def __repr__(self) -> str:
        return "TOKEN"


TOKEN = _Token()
