"""GemmThunk on the host: the reference semantics of a cuBLAS GEMM, run on the thunk's buffers.

Where it sits: hlo-run's host platform (`backends/host.py`) calls `run_gemm` for every GemmThunk;
the cuda platform uses cuBLAS instead. What a GEMM computes (operand conversion, f32
accumulation for 16-bit floats, alpha, beta * c, the bias and activation epilogues, one rounding)
is defined once in `hlo_common.interpreter.gemm_semantics`, which the interpreter's
`__cublas$gemm` handler uses too, so a host GemmThunk and the interpreter agree bit for bit:

    >>> run_gemm(thunk.config, out_shape, lhs, rhs, c, bias)      # doctest: +SKIP
    (logical numpy arrays in, the logical result out)
"""

from __future__ import annotations

import numpy as np

from hlo_common.interpreter.gemm_semantics import GemmSemantics, evaluate_gemm
from hlo_common.manifest.thunks import GemmConfig
from hlo_common.hlo.shape import Shape


def semantics_of(cfg: GemmConfig) -> GemmSemantics:
    """The GemmSemantics a manifest's GemmConfig stands for."""
    return GemmSemantics(cfg.lhs_batch_dims, cfg.rhs_batch_dims, cfg.lhs_contracting_dims,
                         cfg.rhs_contracting_dims, cfg.alpha_real, cfg.alpha_imag, cfg.beta, cfg.epilogue)


def run_gemm(cfg: GemmConfig, out_shape: Shape, lhs: np.ndarray, rhs: np.ndarray, c: np.ndarray | None = None,
             bias: np.ndarray | None = None) -> np.ndarray:
    """The GEMM's result as a logical array of `out_shape` (c is read only when beta != 0; `bias` is
    the bias buffer as a flat vector in memory order)."""
    return evaluate_gemm(semantics_of(cfg), out_shape.element_type, lhs, rhs, c if cfg.beta != 0 else None,
                         bias, out_shape.minor_to_major).result
