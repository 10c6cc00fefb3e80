"""Numeric helpers shared by the interpreter's reduction, window, linear-algebra and scatter handlers.

XLA's HloEvaluator converts dot / convolution operands to the result element type and then
accumulates in the type's "elementwise" type: f32 for the narrow floats (bf16, f16, f8...), the type
itself for f32 / f64 / complex, and two's-complement wrapping arithmetic for integers. These
helpers pick that accumulation dtype and bring accumulated values back to the element type;
`dot_general` / `matmul` multiply through BLAS, large products in blocks on the interpreter's
threads.

    >>> accumulation_dtype(PRIMITIVE_TYPES["bf16"])
    dtype('float32')
    >>> to_element_type(np.array([130, -129]), PRIMITIVE_TYPES["s8"])
    array([-126,  127], dtype=int8)
"""

from __future__ import annotations

import contextlib
import contextvars
import math

import numpy as np

from hlo_common.hlo.attributes import RawAttr
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType  # noqa: F401  (doctest namespace)
from hlo_common.errors import InterpreterError
from hlo_common.hlo.ir import HloInstruction
from hlo_common.interpreter import parallel


def accumulation_dtype(ptype: PrimitiveType) -> np.dtype:
    """The dtype in which sums of products of `ptype` values are accumulated."""
    if ptype.is_pred:
        return np.dtype(np.int64)
    if ptype.is_integer:
        return np.dtype(np.uint64 if ptype.kind == "unsigned" and ptype.bits == 64 else np.int64)
    if ptype.is_float:
        return np.dtype(np.float64 if ptype.bits == 64 else np.float32)
    if ptype.is_complex:
        return ptype.np_dtype
    raise InterpreterError(f"no arithmetic on element type {ptype.name}")


def wrap_integers(values: np.ndarray, ptype: PrimitiveType) -> np.ndarray:
    """Integers reduced modulo 2**bits into `ptype`'s range (two's complement), in `ptype`'s dtype."""
    bits = ptype.bits
    u = np.asarray(values).astype(np.uint64)
    if bits < 64:
        u = u & np.uint64((1 << bits) - 1)
    if ptype.kind == "signed" and bits < 64:
        signed = u.astype(np.int64)
        signed = np.where(signed >= (1 << (bits - 1)), signed - (1 << bits), signed)
        return signed.astype(ptype.np_dtype)
    return u.astype(ptype.np_dtype)


def to_element_type(values: np.ndarray, ptype: PrimitiveType) -> np.ndarray:
    """Accumulated values rounded (floats) or wrapped (integers) into `ptype`'s dtype."""
    values = np.asarray(values)
    if ptype.is_pred:
        return values != 0
    if ptype.is_integer:
        if values.dtype.kind in "iub":
            return wrap_integers(values, ptype)
        return convert(values, ptype)
    if ptype.is_float and values.dtype.kind == "c":
        values = values.real
    return values.astype(ptype.np_dtype, copy=False)


def convert(values: np.ndarray, ptype: PrimitiveType) -> np.ndarray:
    """XLA's convert for the cases dot/convolution operands need (float->int saturates, NaN -> 0)."""
    values = np.asarray(values)
    if values.dtype == ptype.np_dtype:
        return values
    if ptype.is_pred:
        return values != 0
    if ptype.is_integer and values.dtype.kind in "fcV":
        real = np.nan_to_num(np.real(values).astype(np.float64), nan=0.0)
        lo, hi = _int_range(ptype)
        clipped = np.clip(real, lo, hi)
        if ptype.bits == 64:
            return np.where(real >= 2.0**63 if ptype.kind == "signed" else real >= 2.0**64,
                            hi, clipped.astype(ptype.np_dtype)).astype(ptype.np_dtype)
        return clipped.astype(np.int64).astype(ptype.np_dtype)
    if ptype.is_integer:
        return wrap_integers(values if values.dtype.kind == "u" else values.astype(np.int64), ptype)
    if values.dtype.kind == "c" and not ptype.is_complex:
        values = values.real
    return values.astype(ptype.np_dtype)


def _int_range(ptype: PrimitiveType) -> tuple[int, int]:
    if ptype.kind == "signed":
        return -(1 << (ptype.bits - 1)), (1 << (ptype.bits - 1)) - 1
    return 0, (1 << ptype.bits) - 1


def to_accumulation(values: np.ndarray, result: PrimitiveType) -> np.ndarray:
    """An operand converted to the result type (as XLA does first), then widened for accumulation
    (the operand itself when it already is the accumulation type: callers never write into it)."""
    return convert(values, result).astype(accumulation_dtype(result), copy=False)


# Products of at least PARALLEL_WORK multiply-adds are split (see `matmul`).
PARALLEL_WORK = 1 << 24
BLOCK_ROWS = 256
MAX_BLOCKS = 16


_F32_PRODUCT: contextvars.ContextVar = contextvars.ContextVar("f32_product", default=None)


@contextlib.contextmanager
def f32_product(product):
    """Within it, `dot_general`'s f32 x f32 products not given a `product` run through
    `product(a, b, out)`: hlo-run's host evaluates GEMM fusions with this interpreter and their
    dots with its own two-thread GEMM (hlo_run.host_gemm_fusion)."""
    token = _F32_PRODUCT.set(product)
    try:
        yield
    finally:
        _F32_PRODUCT.reset(token)


def dot_general(lhs: np.ndarray, rhs: np.ndarray, lhs_batch, rhs_batch, lhs_contract,
                rhs_contract, out: np.ndarray | None = None, product=None) -> np.ndarray:
    """numpy dot_general on already-widened operands: result dims = batch, lhs free, rhs free.

    Batch dims stay separate axes of one stacked `np.matmul` (no copy to merge them); the free
    and contracting dims are merged into one matrix per operand, as a view whenever the layout
    allows, and copied only when BLAS could not read the matrix with its strides. `out` (a
    C-contiguous array of the result's dims and dtype, e.g. hlo-run's host output buffer)
    receives the result in place of a new array; `product(a, b, out)` (default: `matmul`) does
    the stacked matrix product (hlo-run's host passes its own GEMM).
    """
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_batch and d not in lhs_contract]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_batch and d not in rhs_contract]
    if lhs.dtype == np.bool_:
        lhs, rhs = lhs.astype(np.int64), rhs.astype(np.int64)
    a = _stacked_matrix(lhs, list(lhs_batch), lhs_free, list(lhs_contract))
    b = _stacked_matrix(rhs, list(rhs_batch), list(rhs_contract), rhs_free)
    dims = [lhs.shape[d] for d in (*lhs_batch, *lhs_free)] + [rhs.shape[d] for d in rhs_free]
    target = None if out is None else out.reshape(a.shape[:-1] + b.shape[-1:])
    if product is None and a.dtype == b.dtype == np.float32:
        product = _F32_PRODUCT.get()
    return (product or matmul)(a, b, target).reshape(dims)


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """np.matmul of [batch..., M, K] and [batch..., K, N] stacks; a large float product is split into
    blocks that run on the interpreter's threads: along the first batch dim (each matrix is one
    BLAS call anyway, so no value changes), else into blocks of BLOCK_ROWS rows (fixed by the
    shape, so the values do not depend on the number of threads either)."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = a.shape[:-2]
    if a.dtype.kind not in "fc" or m * n * k * math.prod(batch) < PARALLEL_WORK or batch != b.shape[:-2]:
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(batch + (m, n), np.result_type(a, b))
    if batch and batch[0] > 1:
        step = -(-batch[0] // MAX_BLOCKS)
        blocks = [(slice(i, i + step),) for i in range(0, batch[0], step)]

        def block(ix: tuple) -> None:
            np.matmul(a[ix], b[ix], out=out[ix])
    elif m >= 2 * BLOCK_ROWS:
        blocks = [(Ellipsis, slice(i, i + BLOCK_ROWS), slice(None)) for i in range(0, m, BLOCK_ROWS)]

        def block(ix: tuple) -> None:
            np.matmul(a[ix], b, out=out[ix])
    else:
        return np.matmul(a, b, out=out)
    parallel.for_each(block, blocks)
    return out


def _stacked_matrix(x: np.ndarray, batch: list[int], rows: list[int], cols: list[int]) -> np.ndarray:
    """x as [batch..., prod(rows), prod(cols)], a view when possible, always readable by BLAS."""
    t = x.transpose(batch + rows + cols)
    n_rows = math.prod(x.shape[d] for d in rows)
    n_cols = math.prod(x.shape[d] for d in cols)
    m = t.reshape(t.shape[:len(batch)] + (n_rows, n_cols))  # copies only when it must
    if m.dtype.kind in "fc" and m.size and not _blas_readable(m):
        m = np.ascontiguousarray(m)
    return m


def _blas_readable(m: np.ndarray) -> bool:
    """True when each [rows, cols] matrix is row- or column-major with a valid leading dimension."""
    item = m.itemsize
    rows, cols = m.shape[-2:]
    s_row, s_col = m.strides[-2:]
    return ((s_col == item or cols == 1) and s_row >= max(1, cols) * item) or \
        ((s_row == item or rows == 1) and s_col >= max(1, rows) * item)


def ints_attr(instr: HloInstruction, key: str) -> tuple[int, ...]:
    """A `{1,2}`-style attribute as a tuple (empty when absent)."""
    value = instr.attrs.get(key)
    return tuple(int(v) for v in value) if value is not None else ()


def bool_attr(instr: HloInstruction, key: str, default: bool = False) -> bool:
    value = instr.attrs.get(key)
    if value is None:
        return default
    if isinstance(value, (RawAttr, str)):
        return str(value) == "true"
    return bool(value)


def word_attr(instr: HloInstruction, key: str, default: str = "") -> str:
    value = instr.attrs.get(key)
    return default if value is None else str(value)


def unsupported(instr: HloInstruction, why: str) -> InterpreterError:
    """The error for an instruction the interpreter cannot evaluate; names it (raise the result)."""
    comp = instr.parent.name if instr.parent is not None else "?"
    return InterpreterError(f"%{instr.name} ({instr.opcode}) in computation {comp}: {why}")
