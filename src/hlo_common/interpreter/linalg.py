"""Interpreter handlers for dot and its ragged / block-scaled variants, fft and the dense solvers.

Part of the reference interpreter (XLA's HloEvaluator role). Semantics follow HloEvaluator: dot
operands are converted to the result element type, products are accumulated in f32 for the narrow
floats (bf16, f16, f8) and rounded once, integer dots wrap in two's complement, and the result
dimensions are ordered batch, lhs non-contracting, rhs non-contracting. All handlers are
vectorized (BLAS matmuls, `numeric.matmul`); importing this module also registers the convolution and
batch-norm handlers.

    %d = f32[2,3,5] dot(f32[2,3,4] a, f32[2,4,5] b), lhs_batch_dims={0}, rhs_batch_dims={0},
         lhs_contracting_dims={2}, rhs_contracting_dims={1}
"""

from __future__ import annotations

import numpy as np

from hlo_common.interpreter import batchnorm, convolution  # noqa: F401  (registers handlers)
from hlo_common.interpreter.numeric import (
    accumulation_dtype, bool_attr, dot_general, ints_attr, to_accumulation, to_element_type, unsupported,
    word_attr,
)
from hlo_common.interpreter.ragged_dot import ragged_dot
from hlo_common.interpreter.registry import register
from hlo_common.hlo.ir import HloInstruction


def _dot_dims(instr: HloInstruction):
    return (ints_attr(instr, "lhs_batch_dims"), ints_attr(instr, "rhs_batch_dims"),
            ints_attr(instr, "lhs_contracting_dims"), ints_attr(instr, "rhs_contracting_dims"))


def _check_dims(instr: HloInstruction, lhs: np.ndarray, rhs: np.ndarray, dims) -> None:
    lb, rb, lc, rc = dims
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise unsupported(instr, "lhs and rhs batch/contracting dimension counts differ")
    for l_dim, r_dim in list(zip(lb, rb)) + list(zip(lc, rc)):
        if lhs.shape[l_dim] != rhs.shape[r_dim]:
            raise unsupported(instr, f"lhs dim {l_dim} ({lhs.shape[l_dim]}) does not match rhs dim {r_dim} "
                                     f"({rhs.shape[r_dim]})")


@register("dot")
def _dot(instr: HloInstruction, operands, ev) -> np.ndarray:
    result_type = instr.shape.element_type
    lhs, rhs = operands[0], operands[1]
    dims = _dot_dims(instr)
    _check_dims(instr, lhs, rhs, dims)
    a = to_accumulation(lhs, result_type)
    b = to_accumulation(rhs, result_type)
    return to_element_type(dot_general(a, b, *dims), result_type)


@register("scaled-dot")
def _scaled_dot(instr: HloInstruction, operands, ev) -> np.ndarray:
    """dot(lhs * lhs_scale, rhs * rhs_scale): each scale covers a block of the contracting dims.

    A scale operand has the shape of its operand with every dimension divided by a block size
    (1 where it is not blocked); scales are broadcast back by repetition, applied in f32, then
    the product is an ordinary dot.
    """
    result_type = instr.shape.element_type
    dims = _dot_dims(instr)
    lhs = _apply_block_scale(instr, operands[0], operands[2] if len(operands) > 2 else None)
    rhs = _apply_block_scale(instr, operands[1], operands[3] if len(operands) > 3 else None)
    _check_dims(instr, lhs, rhs, dims)
    acc = accumulation_dtype(result_type)
    return to_element_type(dot_general(lhs.astype(acc), rhs.astype(acc), *dims), result_type)


def _apply_block_scale(instr: HloInstruction, x: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    xf = x.astype(np.float64)
    if scale is None or scale.size == 1 and scale.ndim == 0:
        return xf if scale is None else xf * float(scale.astype(np.float64))
    if scale.ndim != x.ndim:
        raise unsupported(instr, f"scale rank {scale.ndim} differs from operand rank {x.ndim}")
    s = scale.astype(np.float64)
    for d in range(x.ndim):
        if s.shape[d] == x.shape[d]:
            continue
        if s.shape[d] == 0 or x.shape[d] % s.shape[d]:
            raise unsupported(instr, f"scale dim {d} ({s.shape[d]}) does not divide {x.shape[d]}")
        s = np.repeat(s, x.shape[d] // s.shape[d], axis=d)
    return xf * s


@register("ragged-dot")
def _ragged_dot(instr: HloInstruction, operands, ev) -> np.ndarray:
    """A dot whose lhs ragged dimension is split into consecutive groups (group_sizes).

    Three modes, by where `lhs_ragged_dims` lies: a non-contracting dim (each row block of group
    g multiplies rhs group g; rhs has `rhs_group_dims`), a contracting dim (one output per group,
    contracting only that group's slice; the group dim comes first in the result), or a batch dim
    (an ordinary batched dot). group_sizes' leading dims are the lhs dims before the ragged one
    that it varies with; in the first two modes positions beyond the sum of the group sizes take
    part in no product.
    """

    lhs, rhs, group_sizes = operands[0], operands[1], operands[2]
    result_type = instr.shape.element_type
    a = to_accumulation(lhs, result_type)
    b = to_accumulation(rhs, result_type)
    out = ragged_dot(instr, a, b, np.asarray(group_sizes).astype(np.int64), _dot_dims(instr),
                     ints_attr(instr, "lhs_ragged_dims"), ints_attr(instr, "rhs_group_dims"))
    return to_element_type(out, result_type)


# -- fft -------------------------------------------------------------------------------------------

@register("fft")
def _fft(instr: HloInstruction, operands, ev) -> np.ndarray:
    x = operands[0]
    kind = word_attr(instr, "fft_type", "FFT")
    lengths = ints_attr(instr, "fft_length")
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    out_type = instr.shape.element_type
    if kind == "FFT":
        y = np.fft.fftn(x.astype(np.complex128), s=lengths, axes=axes)
    elif kind == "IFFT":
        y = np.fft.ifftn(x.astype(np.complex128), s=lengths, axes=axes)
    elif kind == "RFFT":
        y = np.fft.rfftn(x.astype(np.float64), s=lengths, axes=axes)
    elif kind == "IRFFT":
        y = np.fft.irfftn(x.astype(np.complex128), s=lengths, axes=axes)
    else:
        raise unsupported(instr, f"unknown fft_type {kind}")
    return y.astype(out_type.np_dtype)


# -- cholesky and triangular-solve -----------------------------------------------------------------

@register("cholesky")
def _cholesky(instr: HloInstruction, operands, ev) -> np.ndarray:
    """L (lower=true, a = L L^H) or U (a = U^H U) read from that triangle only; the other
    triangle of the result is zero. A matrix that is not positive definite gives NaNs."""
    a = operands[0]
    lower = bool_attr(instr, "lower", False)
    wide = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    if not lower:
        wide = np.conj(np.swapaxes(wide, -1, -2))
    # Mirror the chosen triangle so numpy sees the Hermitian matrix XLA reads.
    low = np.tril(wide)
    herm = low + np.conj(np.swapaxes(np.tril(wide, -1), -1, -2))
    flat = herm.reshape((-1,) + herm.shape[-2:])
    out = np.empty_like(flat)
    for i, m in enumerate(flat):
        try:
            out[i] = np.linalg.cholesky(m)
        except np.linalg.LinAlgError:
            out[i] = np.nan
    out = out.reshape(herm.shape)
    if not lower:
        out = np.conj(np.swapaxes(out, -1, -2))
    return out.astype(instr.shape.element_type.np_dtype)


@register("triangular-solve")
def _triangular_solve(instr: HloInstruction, operands, ev) -> np.ndarray:
    """Solves op(a) x = b (left_side) or x op(a) = b, reading only a's `lower`/upper triangle."""
    a, b = operands[0], operands[1]
    left = bool_attr(instr, "left_side", False)
    lower = bool_attr(instr, "lower", False)
    unit = bool_attr(instr, "unit_diagonal", False)
    transpose = word_attr(instr, "transpose_a", "NO_TRANSPOSE")
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    t = np.tril(a.astype(wide)) if lower else np.triu(a.astype(wide))
    if unit:
        n = t.shape[-1]
        t = t.copy()
        t[..., np.arange(n), np.arange(n)] = 1
    if transpose in ("TRANSPOSE", "ADJOINT"):
        t = np.swapaxes(t, -1, -2)
        if transpose == "ADJOINT":
            t = np.conj(t)
        lower = not lower
    elif transpose != "NO_TRANSPOSE":
        raise unsupported(instr, f"unknown transpose_a {transpose}")
    rhs = b.astype(wide)
    if not left:  # x t = b  <=>  t^T x^T = b^T
        t, rhs, lower = np.swapaxes(t, -1, -2), np.swapaxes(rhs, -1, -2), not lower
    x = _substitute(t, rhs, lower)
    if not left:
        x = np.swapaxes(x, -1, -2)
    return x.astype(instr.shape.element_type.np_dtype)


def _substitute(t: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """Forward (lower) or back substitution for t x = b, vectorized over batch and columns."""
    n = t.shape[-1]
    x = np.zeros(np.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:], dtype=b.dtype)
    rows = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in rows:
            acc = b[..., i, :] - np.einsum("...j,...jk->...k", t[..., i, :], x)
            x[..., i, :] = acc / t[..., i, i][..., None]
    return x
