"""GemmThunk on the GPU: one `cublasGemmStridedBatchedEx` call per thunk.

Where it sits: the cuda platform (`backends/cuda.py`). cuBLAS comes from nvmath-python's
bindings when installed, else from the `nvidia-cublas` wheel's library loaded with ctypes
(`cuda.pathfinder`). cuBLAS is column-major; a row-major matrix is its column-major transpose,
so (XLA's `MatrixLayout` trick): a column-major output computes D = op(A) op(B); a row-major
output computes D^T = op(B)^T op(A)^T with the operand transposes flipped. f32 GEMMs use
CUBLAS_COMPUTE_32F (no TF32), so results match the interpreter within rounding.
"""

from __future__ import annotations

import ctypes

from hlo_common.errors import HloError
from hlo_common.manifest import parse_shape_text
from hlo_common.manifest_thunks import GemmConfig, MatrixLayout

OP_N, OP_T = 0, 1
# element type -> (cudaDataType, cublasComputeType, scalar ctype, complex?)
_TYPES = {
    "f16": (2, 68, ctypes.c_float, False),
    "bf16": (14, 68, ctypes.c_float, False),
    "f32": (0, 68, ctypes.c_float, False),
    "f64": (1, 70, ctypes.c_double, False),
    "c64": (4, 68, ctypes.c_float, True),
    "c128": (5, 70, ctypes.c_double, True),
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
        dtype_in, compute, scalar, is_complex = _TYPES[in_type]
        dtype_out = _TYPES[out_type][0]
        if is_complex:
            alpha = (scalar * 2)(cfg.alpha_real, cfg.alpha_imag)
            beta = (scalar * 2)(cfg.beta, 0.0)
        else:
            alpha, beta = scalar(cfg.alpha_real), scalar(cfg.beta)
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
