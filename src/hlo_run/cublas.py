"""GemmThunk on the GPU: one `cublasGemmStridedBatchedEx` call per thunk.

Where it sits: the cuda platform (`backends/cuda.py`). cuBLAS is the `nvidia-cublas` wheel's
library (found by `cuda.pathfinder`, else the system's `libcublas.so`), called through ctypes;
nvmath-python's cuBLAS bindings are not used yet (the one entry point needed is declared below).
cuBLAS is column-major; a row-major matrix is its column-major transpose, so (XLA's
`MatrixLayout` trick): a column-major output computes D = op(A) op(B); a row-major
output computes D^T = op(B)^T op(A)^T with the operand transposes flipped. f32 GEMMs use
CUBLAS_COMPUTE_32F (no TF32), so results match the interpreter within rounding. s8 x s8 -> s32
uses CUBLAS_COMPUTE_32I with int32 alpha / beta (exact), s8 x s8 -> f32 CUBLAS_COMPUTE_32F;
hlo-codegen hands over int8 GEMMs only when every row and column count is a multiple of 4
(cuBLAS's int8 alignment; `hlo_common/gpu/gemm_config.py`).
"""

from __future__ import annotations

import ctypes

from hlo_common.errors import HloError
from hlo_common.manifest.manifest import parse_shape_text
from hlo_common.manifest.thunks import GemmConfig, MatrixLayout

OP_N, OP_T = 0, 1
CUDA_R_16F, CUDA_R_32F, CUDA_R_64F, CUDA_C_32F, CUDA_C_64F = 2, 0, 1, 4, 5
CUDA_R_8I, CUDA_R_32I, CUDA_R_16BF = 3, 10, 14
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F, CUBLAS_COMPUTE_32I = 68, 70, 72
DATA_TYPES = {"f16": CUDA_R_16F, "bf16": CUDA_R_16BF, "f32": CUDA_R_32F, "f64": CUDA_R_64F, "c64": CUDA_C_32F,
              "c128": CUDA_C_64F, "s8": CUDA_R_8I, "s32": CUDA_R_32I}
# result element type -> (cublasComputeType, scalar ctype of alpha/beta, complex?)
_COMPUTE = {
    "f16": (CUBLAS_COMPUTE_32F, ctypes.c_float, False),
    "bf16": (CUBLAS_COMPUTE_32F, ctypes.c_float, False),
    "f32": (CUBLAS_COMPUTE_32F, ctypes.c_float, False),
    "f64": (CUBLAS_COMPUTE_64F, ctypes.c_double, False),
    "c64": (CUBLAS_COMPUTE_32F, ctypes.c_float, True),
    "c128": (CUBLAS_COMPUTE_64F, ctypes.c_double, True),
    "s32": (CUBLAS_COMPUTE_32I, ctypes.c_int32, False),
}
GEMM_DEFAULT_ALGO = -1


class CublasError(HloError):
    pass


def _load_library() -> ctypes.CDLL:
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return ctypes.CDLL(load_nvidia_dynamic_lib("cublas").abs_path)
    except Exception as exc:  # noqa: BLE001 - any loader failure means: no cuBLAS here
        try:
            return ctypes.CDLL("libcublas.so")
        except OSError:
            raise CublasError(f"cuBLAS is not installed (pip install nvidia-cublas): {exc}") from None


def operand_op(layout: MatrixLayout, transpose: bool) -> tuple[int, int]:
    """(cublasOperation, leading dim) that reads `layout`'s matrix (or its transpose) column-major."""
    op = OP_N if layout.order == "column_major" else OP_T
    if transpose:
        op = OP_T if op == OP_N else OP_N
    return op, layout.leading_dim


def gemm_call(cfg: GemmConfig) -> dict:
    """The arguments of cublasGemmStridedBatchedEx for `cfg` (pointers filled in by the caller)."""
    a, b, d = cfg.lhs_matrix, cfg.rhs_matrix, cfg.output_matrix
    m, n, k = d.rows, d.cols, a.cols
    if d.order == "column_major":
        (opa, lda), (opb, ldb) = operand_op(a, False), operand_op(b, False)
        first, second = ("lhs", a, opa, lda), ("rhs", b, opb, ldb)
    else:
        (opb, ldb), (opa, lda) = operand_op(b, True), operand_op(a, True)
        first, second = ("rhs", b, opb, ldb), ("lhs", a, opa, lda)
        m, n = n, m
    return {"m": m, "n": n, "k": k, "first": first, "second": second, "ldc": d.leading_dim,
            "batch": d.batch,
            "strides": tuple(x.batch_stride if x.batch > 1 else 0 for x in (first[1], second[1], d))}


def scale_factors(cfg: GemmConfig, scalar, is_complex: bool):
    """alpha and beta as cuBLAS reads them (int32 for CUBLAS_COMPUTE_32I, pairs for complex)."""
    if is_complex:
        return (scalar * 2)(cfg.alpha_real, cfg.alpha_imag), (scalar * 2)(cfg.beta, 0.0)
    if scalar is ctypes.c_int32:
        return scalar(int(cfg.alpha_real)), scalar(int(cfg.beta))
    return scalar(cfg.alpha_real), scalar(cfg.beta)


class Cublas:
    """A cuBLAS handle bound to one stream."""

    def __init__(self, stream: int):
        self.lib = _load_library()
        handle = ctypes.c_void_p()
        self._check(self.lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self.handle = handle
        self._check(self.lib.cublasSetStream_v2(handle, ctypes.c_void_p(stream)), "cublasSetStream")

    def close(self) -> None:
        if self.handle is not None:
            self.lib.cublasDestroy_v2(self.handle)
            self.handle = None

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise CublasError(f"{what} failed with cuBLAS status {status}")

    def gemm(self, cfg: GemmConfig, pointers: dict[str, int]) -> None:
        if cfg.epilogue != "DEFAULT":
            raise CublasError(f"gemm epilogue {cfg.epilogue} needs cublasLt, which hlo-run does not call yet")
        in_type = parse_shape_text(cfg.lhs_shape, "gemm").element_type.name
        out_type = parse_shape_text(cfg.output_shape, "gemm").element_type.name
        if in_type not in DATA_TYPES or out_type not in _COMPUTE:
            raise CublasError(f"cuBLAS does not multiply {in_type} into {out_type} here")
        dtype_in, dtype_out = DATA_TYPES[in_type], DATA_TYPES[out_type]
        compute, scalar, is_complex = _COMPUTE[out_type]
        alpha, beta = scale_factors(cfg, scalar, is_complex)
        call = gemm_call(cfg)
        f_name, _, f_op, f_ld = call["first"]
        s_name, _, s_op, s_ld = call["second"]
        sa, sb, sc = (ctypes.c_longlong(s) for s in call["strides"])
        status = self.lib.cublasGemmStridedBatchedEx(
            self.handle, f_op, s_op, call["m"], call["n"], call["k"], ctypes.byref(alpha),
            ctypes.c_void_p(pointers[f_name]), dtype_in, f_ld, sa,
            ctypes.c_void_p(pointers[s_name]), dtype_in, s_ld, sb, ctypes.byref(beta),
            ctypes.c_void_p(pointers["output"]), dtype_out, call["ldc"], sc, call["batch"], compute,
            GEMM_DEFAULT_ALGO)
        self._check(status, "cublasGemmStridedBatchedEx")
