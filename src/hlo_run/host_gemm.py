"""GemmThunk on the host: the reference semantics of a cuBLAS GEMM, run on the thunk's buffers.

Where it sits: hlo-run's host platform (`backends/host.py`) calls `run_gemm` for every GemmThunk;
the cuda platform uses cuBLAS instead. What a GEMM computes (operand conversion, f32
accumulation for 16-bit floats, alpha, beta * c, the bias and activation epilogues, one rounding)
is defined once in `hlo_common.interpreter.gemm_semantics`, which the interpreter's
`__cublas$gemm` handler uses too. The matrix product itself is the host's own f32 GEMM
(`host_blas.sgemm`, about twice numpy's OpenBLAS on one core) whenever it accumulates in f32
(f32, bf16 and f16 results): such a result differs from the interpreter's (numpy's BLAS) only by
the summation order, as cuBLAS's does. Other types (f64, complex, integers) keep numpy's product,
and agree with the interpreter bit for bit.

    >>> run_gemm(thunk.config, out_shape, lhs, rhs, c, bias)      # doctest: +SKIP
    (logical numpy arrays in, the logical result out)
"""

from __future__ import annotations

import numpy as np

from hlo_common.interpreter.gemm_semantics import ALGORITHM_OPERAND_TYPES, GemmSemantics, evaluate_gemm
from hlo_common.interpreter.numeric import accumulation_dtype, dot_general
from hlo_common.manifest.thunks import GemmConfig
from hlo_common.hlo.shape import Shape
from hlo_run.host_blas import sgemm, sgemm_batched


def semantics_of(cfg: GemmConfig) -> GemmSemantics:
    """The GemmSemantics a manifest's GemmConfig stands for."""
    return GemmSemantics(cfg.lhs_batch_dims, cfg.rhs_batch_dims, cfg.lhs_contracting_dims,
                         cfg.rhs_contracting_dims, cfg.alpha_real, cfg.alpha_imag, cfg.beta, cfg.epilogue)


def host_product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """[batch..., M, K] x [batch..., K, N] stacks of f32 through `sgemm_batched` (the matrices of a
    batch split over the host threads together; a strided view's matrices are read in place)."""
    if out is None:
        out = np.empty(a.shape[:-1] + b.shape[-1:], np.float32)
    if a.ndim == 2:
        sgemm(a, b, out)
    else:
        sgemm_batched(a, b, out)
    return out


def run_gemm(cfg: GemmConfig, out_shape: Shape, lhs: np.ndarray, rhs: np.ndarray, c: np.ndarray | None = None,
             bias: np.ndarray | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The GEMM's result as a logical array of `out_shape` (c is read only when beta != 0; `bias` is
    the bias buffer as a flat vector in memory order). `out` (optional: a C-contiguous logical view
    of the output buffer) receives a plain product directly, as BLAS writes it."""
    sem = semantics_of(cfg)
    f32 = accumulation_dtype(out_shape.element_type) == np.float32
    product = host_product if f32 else None
    if out is not None and _direct(sem, out_shape, lhs, rhs, out, c):
        # evaluate_gemm's steps (acc * alpha, then + c), each the same numpy operation in the
        # result type, in the output buffer: no temporaries beyond the product, no copy back
        # (c, when read, is usually the output buffer itself: a plain product cannot go there)
        alpha = np.asarray(sem.alpha.real, out.dtype)
        acc = dot_general(lhs, rhs, *sem.dims, out=out if sem.beta == 0 else None, product=product)
        if sem.alpha != 1:
            acc = np.multiply(acc, alpha, out=acc)  # the product array: out, or a fresh one when c is read
        return acc if sem.beta == 0 else np.add(acc, c, out=out)
    return evaluate_gemm(sem, out_shape.element_type, lhs, rhs, c if cfg.beta != 0 else None,
                         bias, out_shape.minor_to_major, product=product).result


def _direct(sem: GemmSemantics, out_shape: Shape, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray,
            c: np.ndarray | None) -> bool:
    """True when the GEMM is alpha * product (+ c with beta 1), real alpha, no epilogue, no
    operand rounding, of operands already in the accumulation type, which is the result type:
    then `evaluate_gemm` computes exactly those steps, and they may run in `out`."""
    acc = accumulation_dtype(out_shape.element_type)
    c_ok = sem.beta == 0 or (sem.beta == 1 and c is not None and c.dtype == out.dtype
                             and c.shape == out.shape)
    return (c_ok and complex(sem.alpha).imag == 0 and sem.epilogue == "DEFAULT"
            and sem.algorithm not in ALGORITHM_OPERAND_TYPES and out_shape.element_type.is_float
            and acc == out_shape.element_type.np_dtype == lhs.dtype == rhs.dtype == out.dtype
            and out.flags.c_contiguous and not np.may_share_memory(out, lhs)
            and not np.may_share_memory(out, rhs))
