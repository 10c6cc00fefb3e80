"""GemmThunks with a cuBLASLt epilogue on the GPU: one `cublasLtMatmul` call per thunk, the GEMM,
bias and activation together, as XLA:GPU runs a `__cublas$lt$matmul` call
(`xla/service/gpu/matmul_utils.cc`, `xla/stream_executor/cuda/cuda_blas_lt.cc`).

Where it sits: the cuda platform (`backends/cuda.py`) sends a GemmThunk here when its epilogue is
not DEFAULT (hlo-codegen keeps such calls whole for the cuda target: `gemm-fallback` with
`keep_lt_epilogues`); legacy GEMMs stay with `hlo_run.cublas`. cuBLASLt is reached through
nvmath-python's maintained bindings (`nvmath.bindings.cublasLt`, the `gpu` extra), imported only
when such a thunk runs.

`lt_matmul` is the translation, a plain function of the thunk's GemmConfig (tested without a
GPU): the operand order, transposes and leading dimensions of `hlo_run.cublas.gemm_call` (a
row-major output computes D^T = B^T A^T), one matrix layout per operand with its batch count and
stride, the compute and scale types of the legacy call, and the epilogue under cuBLASLt's name.
cuBLASLt adds the bias along D's rows, its `m`: the output's most minor dim in both orders, which
is where XLA's BIAS epilogue adds it. `CublasLt` builds a descriptor, the layouts and a heuristic
algorithm once per config (plans cached) and sets the bias pointer on each call.

Not yet run on hardware in this repository (no GPU was lent to the session that wrote it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.manifest.manifest import parse_shape_text
from hlo_common.manifest.thunks import GemmConfig
from hlo_run.cublas import _COMPUTE, CUDA_R_32F, CUDA_R_64F, DATA_TYPES, OP_T, CublasError, gemm_call

# the manifest's epilogue -> cublasLtEpilogue_t's name (nvmath.bindings.cublasLt.Epilogue)
LT_EPILOGUES = {"DEFAULT": "DEFAULT", "RELU": "RELU", "BIAS": "BIAS", "BIAS_RELU": "RELU_BIAS",
                "GELU": "GELU", "BIAS_GELU": "GELU_BIAS"}


@dataclass(frozen=True)
class LtLayout:
    """One cublasLtMatrixLayout: column-major rows x cols with leading dim `ld`, `batch` matrices
    `stride` elements apart (0 when one matrix serves every batch)."""

    data_type: int
    rows: int
    cols: int
    ld: int
    batch: int
    stride: int


@dataclass(frozen=True)
class LtMatmul:
    """The arguments of one cublasLtMatmul: which operand is cuBLAS's A and B, their operations,
    the layouts of A, B and D (C is D's), the types, the epilogue and the bias' type and length."""

    a_role: str
    b_role: str
    trans_a: int
    trans_b: int
    a: LtLayout
    b: LtLayout
    d: LtLayout
    compute_type: int
    scale_type: int
    epilogue: str
    bias_type: int | None
    bias_length: int


def lt_matmul(cfg: GemmConfig, bias_elements: int | None) -> LtMatmul:
    """The cublasLtMatmul of `cfg` (CublasError where cuBLASLt cannot compute it as the reference)."""
    in_type = parse_shape_text(cfg.lhs_shape, "gemm").element_type.name
    out_type = parse_shape_text(cfg.output_shape, "gemm").element_type.name
    if cfg.epilogue not in LT_EPILOGUES:
        raise CublasError(f"cuBLASLt has no epilogue {cfg.epilogue}")
    if in_type not in DATA_TYPES or out_type not in ("f16", "bf16", "f32", "f64"):
        raise CublasError(f"cuBLASLt epilogues are not run on {in_type} -> {out_type} here")
    compute, scalar, _ = _COMPUTE[out_type]
    call = gemm_call(cfg)
    (a_role, a_mat, op_a, lda), (b_role, b_mat, op_b, ldb) = call["first"], call["second"]
    m, n, k = call["m"], call["n"], call["k"]
    sa, sb, sd = call["strides"]
    t_in, t_out = DATA_TYPES[in_type], DATA_TYPES[out_type]
    # A is m x k as cuBLAS reads it (stored k x m when transposed), B k x n
    a = LtLayout(t_in, *((k, m) if op_a == OP_T else (m, k)), lda, call["batch"], sa)
    b = LtLayout(t_in, *((n, k) if op_b == OP_T else (k, n)), ldb, call["batch"], sb)
    d = LtLayout(t_out, m, n, call["ldc"], call["batch"], sd)
    adds_bias = cfg.epilogue.startswith("BIAS")
    if adds_bias and bias_elements != m:
        raise CublasError(f"the bias has {bias_elements} elements; cuBLASLt adds one per row of D ({m})")
    scale = CUDA_R_64F if out_type == "f64" else CUDA_R_32F
    return LtMatmul(a_role, b_role, op_a, op_b, a, b, d, compute, scale, LT_EPILOGUES[cfg.epilogue],
                    t_out if adds_bias else None, m if adds_bias else 0)


class CublasLt:
    """A cuBLASLt handle on one stream, with a plan (descriptors and algorithm) per GEMM config."""

    def __init__(self, stream: int):
        try:
            from nvmath.bindings import cublasLt
        except ImportError as exc:
            raise CublasError(f"cuBLASLt epilogues need nvmath-python (pip install -e '.[gpu]'): "
                              f"{exc}") from None
        self.lt = cublasLt
        self.handle = cublasLt.create()
        self.stream = stream
        self._plans: dict[tuple[GemmConfig, int, int | None], tuple] = {}

    def close(self) -> None:
        for desc, layouts, pref, _, _ in self._plans.values():
            self.lt.matmul_preference_destroy(pref)
            for layout in layouts:
                self.lt.matrix_layout_destroy(layout)
            self.lt.matmul_desc_destroy(desc)
        self._plans.clear()
        if self.handle:
            self.lt.destroy(self.handle)
            self.handle = 0

    def _set(self, setter, getter, obj: int, attr, value) -> None:
        buf = np.asarray([value], dtype=getter(attr))
        setter(obj, attr, buf.ctypes.data, buf.itemsize)

    def _layout(self, lay: LtLayout) -> int:
        lt = self.lt
        layout = lt.matrix_layout_create(lay.data_type, lay.rows, lay.cols, lay.ld)
        attrs = lt.MatrixLayoutAttribute
        self._set(lt.matrix_layout_set_attribute, lt.get_matrix_layout_attribute_dtype, layout,
                  attrs.BATCH_COUNT, lay.batch)
        self._set(lt.matrix_layout_set_attribute, lt.get_matrix_layout_attribute_dtype, layout,
                  attrs.STRIDED_BATCH_OFFSET, lay.stride)
        return layout

    def _plan(self, call: LtMatmul, workspace_size: int) -> tuple:
        lt = self.lt
        desc = lt.matmul_desc_create(call.compute_type, call.scale_type)
        attrs = lt.MatmulDescAttribute
        set_desc = (lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype)
        self._set(*set_desc, desc, attrs.TRANSA, call.trans_a)
        self._set(*set_desc, desc, attrs.TRANSB, call.trans_b)
        self._set(*set_desc, desc, attrs.EPILOGUE, int(getattr(lt.Epilogue, call.epilogue)))
        if call.bias_type is not None:
            self._set(*set_desc, desc, attrs.BIAS_DATA_TYPE, call.bias_type)
        layouts = (self._layout(call.a), self._layout(call.b), self._layout(call.d))
        pref = lt.matmul_preference_create()
        self._set(lt.matmul_preference_set_attribute, lt.get_matmul_preference_attribute_dtype, pref,
                  lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES, workspace_size)
        found = lt.MatmulHeuristicResult(1)
        count = np.zeros(1, np.int32)
        a, b, d = layouts
        lt.matmul_algo_get_heuristic(self.handle, desc, a, b, d, d, pref, 1, found.ptr, count.ctypes.data)
        if count[0] < 1:
            raise CublasError(f"cuBLASLt has no algorithm for this GEMM with epilogue {call.epilogue}")
        return desc, layouts, pref, found

    def matmul(self, cfg: GemmConfig, pointers: dict[str, int], bias_elements: int | None,
               workspace_size: int) -> None:
        key = (cfg, workspace_size, bias_elements)
        if key not in self._plans:  # translated and planned once per config, not per call
            call = lt_matmul(cfg, bias_elements)
            self._plans[key] = (*self._plan(call, workspace_size), call)
        desc, (a, b, d), _, found, call = self._plans[key]
        lt = self.lt
        if call.bias_type is not None:
            self._set(lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype, desc,
                      lt.MatmulDescAttribute.BIAS_POINTER, pointers["bias"])
        scalar = np.float64 if call.scale_type == CUDA_R_64F else np.float32
        alpha, beta = np.asarray([cfg.alpha_real], scalar), np.asarray([cfg.beta], scalar)
        out = pointers["output"]
        lt.matmul(self.handle, desc, alpha.ctypes.data, pointers[call.a_role], a, pointers[call.b_role], b,
                  beta.ctypes.data, out, d, out, d, found.ptr, pointers.get("workspace", 0), workspace_size,
                  self.stream)
