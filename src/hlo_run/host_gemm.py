"""GemmThunk on the host: the exact semantics of the reference interpreter's dot, plus the epilogue.

Where it sits: hlo-run's host platform (`backends/host.py`) calls `run_gemm` for every GemmThunk;
the cuda platform uses cuBLAS instead. Operands are converted to the output type and multiplied
with accumulation in f32 for 16-bit and narrower floats (`hlo_common.interpreter.numeric`, the
interpreter's own helpers), then

    out = epilogue(alpha * dot(lhs, rhs) + beta * c + bias)     rounded once to the output type

where `bias` (BIAS epilogues) is a vector over the output's column dims, added to every row and
batch; RELU is max(x, 0); GELU is cuBLASLt's tanh approximation.

    >>> cfg = ...                                     # doctest: +SKIP
    >>> run_gemm(cfg, lhs, rhs)                       # logical numpy arrays in, out
"""

from __future__ import annotations

import numpy as np

from hlo_common.interpreter.numeric import dot_general, to_accumulation, to_element_type
from hlo_common.manifest_thunks import GemmConfig
from hlo_common.shape import Shape


def _epilogue_relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _epilogue_gelu(x: np.ndarray) -> np.ndarray:
    c = np.sqrt(2.0 / np.pi).astype(x.dtype) if x.dtype.kind == "f" else np.sqrt(2.0 / np.pi)
    return 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x * x * x)))


ACTIVATIONS = {"DEFAULT": None, "BIAS": None, "RELU": _epilogue_relu, "BIAS_RELU": _epilogue_relu,
               "GELU": _epilogue_gelu, "BIAS_GELU": _epilogue_gelu}


def run_gemm(cfg: GemmConfig, out_shape: Shape, lhs: np.ndarray, rhs: np.ndarray, c: np.ndarray | None = None,
             bias: np.ndarray | None = None) -> np.ndarray:
    """The GEMM's result as a logical array of `out_shape`."""
    out_type = out_shape.element_type
    a = to_accumulation(lhs, out_type)
    b = to_accumulation(rhs, out_type)
    acc = dot_general(a, b, cfg.lhs_batch_dims, cfg.rhs_batch_dims, cfg.lhs_contracting_dims,
                      cfg.rhs_contracting_dims)
    alpha = complex(cfg.alpha_real, cfg.alpha_imag) if acc.dtype.kind == "c" else cfg.alpha_real
    if alpha != 1:
        acc = acc * np.asarray(alpha, dtype=acc.dtype)
    if cfg.beta != 0 and c is not None:
        acc = acc + np.asarray(cfg.beta, dtype=acc.dtype) * to_accumulation(c, out_type)
    if bias is not None:
        m = cfg.output_matrix  # logical output dims are [batch..., rows..., cols...]
        flat = acc.reshape(m.batch, m.rows, m.cols) + to_accumulation(bias, out_type).reshape(1, 1, m.cols)
        acc = flat.reshape(acc.shape)
    activation = ACTIVATIONS.get(cfg.epilogue)
    if activation is not None:
        acc = activation(acc)
    return to_element_type(acc, out_type)
