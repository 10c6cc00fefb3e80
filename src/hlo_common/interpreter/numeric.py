"""Small helpers for the reduction / linear-algebra handlers (attribute access, accumulation types).

NOTE (from the core-interpreter helper): the original of this file was overwritten by mistake
while it was still uncommitted; this is a reconstruction from its uses in linalg.py and
ragged_dot.py. Please check it against what you meant and adjust freely; it is yours.
"""

from __future__ import annotations

import numpy as np

from hlo_common.attributes import RawAttr
from hlo_common.dtypes import PrimitiveType
from hlo_common.errors import InterpreterError
from hlo_common.ir import HloInstruction


def unsupported(instr: HloInstruction, message: str) -> InterpreterError:
    """An InterpreterError naming the instruction (raise the result)."""
    comp = instr.parent.name if instr.parent is not None else "?"
    return InterpreterError(f"%{instr.name} ({instr.opcode}) in computation {comp}: {message}")


def ints_attr(instr: HloInstruction, name: str) -> tuple[int, ...]:
    value = instr.attrs.get(name)
    return tuple(int(v) for v in value) if value is not None else ()


def bool_attr(instr: HloInstruction, name: str, default: bool) -> bool:
    value = instr.attrs.get(name)
    if value is None:
        return default
    if isinstance(value, RawAttr):
        return value.text == "true"
    return bool(value)


def word_attr(instr: HloInstruction, name: str, default: str) -> str:
    value = instr.attrs.get(name)
    return default if value is None else str(value)


def accumulation_dtype(result_type: PrimitiveType) -> np.dtype:
    """Where products are summed: f32 for narrow floats, int64/uint64 for integers, else the type."""
    if result_type.is_low_precision_float:
        return np.dtype(np.float32)
    if result_type.is_integer:
        return np.dtype(np.int64 if result_type.kind == "signed" else np.uint64)
    if result_type.is_pred:
        return np.dtype(np.int64)
    return result_type.np_dtype


def to_accumulation(x: np.ndarray, result_type: PrimitiveType) -> np.ndarray:
    return x.astype(accumulation_dtype(result_type), copy=False)


def to_element_type(y: np.ndarray, result_type: PrimitiveType) -> np.ndarray:
    """Round / wrap an accumulated result into the result element type."""
    if result_type.is_pred:
        return np.asarray(y != 0)
    if result_type.is_integer and result_type.bits < 8:
        from hlo_common.interpreter.arith import wrap_int

        return wrap_int(y, result_type).astype(result_type.np_dtype)
    return np.asarray(y).astype(result_type.np_dtype, copy=False)
