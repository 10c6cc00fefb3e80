"""What a GEMM is on the GPU and how its cuBLAS call reads (XLA's `matmul_utils.cc` and the
custom-call targets of `cublas_cudnn.cc`): the two call targets, the type combinations legacy
cuBLAS and cuBLASLt support, which dots are matrix(-vector) multiplications, and the call's
backend config. The cuBLAS GEMM rewriter (`hlo_opt.passes.cublas_gemm_rewriter`) makes the calls;
hlo-codegen's thunk emission and the interpreter read them.

THE CUSTOM CALL (what thunk emission and the interpreter read; all fields always written):
- target `__cublas$lt$matmul` (cuBLASLt) or `__cublas$gemm` (legacy); operands `(lhs, rhs)`, then
  `c` when beta != 0, then the bias vector for BIAS* epilogues;
- result `(out, [aux,] s8[W]{0})`: element 0 is the GEMM result, aux the pre-activation values of
  a *_AUX epilogue, the last a scratch workspace of W bytes: 4 MiB for cuBLASLt calls,
  min(32 MiB, total operand bytes) for legacy ones (its contents mean nothing; the interpreter
  gives zeros); with a matrix bias, `output_to_operand_aliasing={{0}: (2, {})}`: out is written
  over c (always for legacy calls; for cuBLASLt only when c may be overwritten, see the rewriter);
- out = alpha * dot(lhs, rhs) + beta * c, computed as the `dot` with the same dimension numbers
  would be (operands converted to the result type, accumulated in f32 for 16-bit floats), then
  rounded once to out's element type (c's element type when an `add(convert(gemm), c)` was folded);
- matrix layouts come from the shapes: lhs, rhs and out must each lie in memory as
  [batch][rows][cols] or [batch][cols][rows] (XLA's MatrixLayout; layout-assignment ensures it);
- backend_config is XLA's GpuBackendConfig as JSON:
  `{"operation_queue_id":"0","wait_on_operation_queues":[],"gemm_backend_config":{...},
  "force_earliest_schedule":false}` with gemm_backend_config fields, in this order:
  `alpha_real`, `alpha_imag` (numbers; alpha = alpha_real + i*alpha_imag, imag only for complex),
  `beta` (number: 0, or 1 once a bias was folded), `dot_dimension_numbers`
  (`lhs_contracting_dimensions`, `rhs_contracting_dimensions`, `lhs_batch_dimensions`,
  `rhs_batch_dimensions`: lists of int64 as strings, the dot's), `precision_config`
  (`operand_precision`: two of DEFAULT/HIGH/HIGHEST; `algorithm`: ALG_UNSET or the dot's
  `ALG_...`), `epilogue` (DEFAULT, or on cuBLASLt calls BIAS, RELU, BIAS_RELU, GELU, BIAS_GELU,
  GELU_AUX, BIAS_GELU_AUX),
  `lhs_stride`, `rhs_stride` (elements between consecutive batch matrices for a batched dot:
  the product of the two dims after the batch dims, or of the one for a vector; strings),
  `grad_x`, `grad_y` (the dot's frontend attributes), `damax_output`, `is_fp8` (false).
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.ir import HloInstruction

GEMM_TARGET = "__cublas$gemm"
LT_TARGET = "__cublas$lt$matmul"
HOPPER_WORKSPACE_BYTES = 32 * 1024 * 1024
# cuBLASLt calls get a fixed workspace: 4 MiB in every XLA:GPU H100 module of testdata/fusion/xla.
LT_WORKSPACE_BYTES = 4 * 1024 * 1024
LT_MAX_BATCH_COUNT = 65535  # XLA: cuBLASLt batch counts stay below 2^16
MAX_BIAS_BYTES = 8 * 1024 * 1024  # XLA: kMaxMaterializeBiasBytes
F8_TYPES = ("f8e3m4", "f8e4m3", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz")
_MATMUL_TYPES = frozenset(F8_TYPES + ("f16", "bf16", "f32", "f64", "c64", "c128"))
_MATVEC_TYPES = frozenset(("f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64", "c64", "c128"))
CLASSICAL_EMITTER_TYPES = frozenset(("f16", "f32", "bf16"))
# XLA's TypesAreSupportedByLegacyCublas table, collapsed to (lhs, rhs, output) element types.
LEGACY_CUBLAS_TYPES = frozenset({
    ("f16", "f16", "f16"), ("s8", "s8", "s32"), ("bf16", "bf16", "bf16"), ("bf16", "bf16", "f32"),
    ("f16", "f16", "f32"), ("s8", "s8", "f32"), ("f32", "f32", "f32"), ("c64", "c64", "c64"),
    ("f64", "f64", "f64"), ("c128", "c128", "c128"),
})
# XLA's TypesAreSupportedByCublasLt, CUDA rows without FP8 (FP8 GEMMs become f16 dots here).
CUBLASLT_TYPES = LEGACY_CUBLAS_TYPES | {("s8", "s8", "s8")}
# Algorithms cuBLAS or cuBLASLt implement (XLA's algorithm_util::IsSupportedByCublasOrCublasLt).
CUBLASLT_ALGORITHMS = frozenset({
    "ALG_UNSET", "ALG_DOT_F16_F16_F32", "ALG_DOT_BF16_BF16_F32", "ALG_DOT_F32_F32_F32",
    "ALG_DOT_F64_F64_F64", "ALG_DOT_TF32_TF32_F32", "ALG_DOT_ANY_F8_ANY_F8_F32",
    "ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM",
})
# XLA's SupportsEpilogueFusion: result types cuBLASLt fuses a bias or an activation into.
EPILOGUE_FUSION_TYPES = frozenset({"f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64"})


def element_type(instr: HloInstruction) -> str:
    return instr.shape.element_type.name


def dot_dims(dot: HloInstruction, key: str) -> tuple[int, ...]:
    return tuple(int(v) for v in dot.attrs.get(key, ()))


def is_gemm(instr: HloInstruction) -> bool:
    """A legacy cuBLAS GEMM or a cuBLASLt matmul (XLA's GemmOrCublasLtMatmul)."""
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in (GEMM_TARGET, LT_TARGET)


def is_cublaslt(instr: HloInstruction) -> bool:
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == LT_TARGET


def _canonical_ranks(dot: HloInstruction, lhs_extra: int, rhs_extra: int, out_extra: int) -> bool:
    nb = len(dot_dims(dot, "lhs_batch_dims"))
    lhs, rhs = dot.operands
    return (lhs.shape.rank == nb + lhs_extra and rhs.shape.rank == nb + rhs_extra
            and dot.shape.rank == nb + out_extra
            and lhs.shape.num_elements > 0 and rhs.shape.num_elements > 0)


def _type_allowed(dot: HloInstruction, types: frozenset) -> bool:
    out = element_type(dot)
    s8_operands = element_type(dot.operands[0]) == "s8" and element_type(dot.operands[1]) == "s8"
    return out in types or (out == "s32" and s8_operands)


def is_matrix_multiplication(dot: HloInstruction) -> bool:
    return dot.opcode == "dot" and _type_allowed(dot, _MATMUL_TYPES) and _canonical_ranks(dot, 2, 2, 2)


def is_matrix_vector_multiplication(dot: HloInstruction) -> bool:
    return dot.opcode == "dot" and _type_allowed(dot, _MATVEC_TYPES) and (
        _canonical_ranks(dot, 2, 1, 1) or _canonical_ranks(dot, 1, 2, 1))


def too_small_for_rewriting(dot: HloInstruction, threshold: int) -> bool:
    """XLA's IsMatrixMultiplicationTooSmallForRewriting."""
    lhs, rhs = dot.operands
    lb, rb = dot_dims(dot, "lhs_batch_dims"), dot_dims(dot, "rhs_batch_dims")
    lc, rc = dot_dims(dot, "lhs_contracting_dims"), dot_dims(dot, "rhs_contracting_dims")
    contracting = int(np.prod([lhs.shape.dims[d] for d in lc]))
    lhs_free = int(np.prod([s for d, s in enumerate(lhs.shape.dims) if d not in lb and d not in lc]))
    rhs_free = int(np.prod([s for d, s in enumerate(rhs.shape.dims) if d not in rb and d not in rc]))
    return (lhs_free + rhs_free) * contracting < threshold


def is_rank2_transpose(instr: HloInstruction) -> bool:
    return instr.opcode == "transpose" and tuple(instr.attrs["dimensions"]) == (1, 0)


def json_number(v: float) -> int | float:
    return int(v) if float(v).is_integer() else float(v)


def _frontend_flag(instr: HloInstruction, key: str) -> bool:
    return any(k == key and v.strip('"') == "true" for k, v in instr.frontend_attributes)


def gemm_backend_config(dot: HloInstruction) -> dict:
    """GemmBackendConfig of a freshly rewritten dot (alpha 1, beta 0), inside a GpuBackendConfig."""
    nb = len(dot_dims(dot, "lhs_batch_dims"))
    strides = []
    for op in dot.operands:
        d = op.shape.dims
        strides.append(str(d[nb] if op.shape.rank == nb + 1 else d[nb] * d[nb + 1]))
    precision = [str(p).upper() for p in dot.attrs.get("operand_precision", ())] or ["DEFAULT", "DEFAULT"]
    algorithm = dot.attrs.get("algorithm")
    gemm = {
        "alpha_real": 1, "alpha_imag": 0, "beta": 0,
        "dot_dimension_numbers": {key: [str(v) for v in dot_dims(dot, attr)] for key, attr in (
            ("lhs_contracting_dimensions", "lhs_contracting_dims"),
            ("rhs_contracting_dimensions", "rhs_contracting_dims"),
            ("lhs_batch_dimensions", "lhs_batch_dims"), ("rhs_batch_dimensions", "rhs_batch_dims"))},
        "precision_config": {"operand_precision": precision,
                             "algorithm": "ALG_" + str(algorithm).upper() if algorithm else "ALG_UNSET"},
        "epilogue": "DEFAULT", "lhs_stride": strides[0], "rhs_stride": strides[1],
        "grad_x": _frontend_flag(dot, "grad_x"), "grad_y": _frontend_flag(dot, "grad_y"),
        "damax_output": False, "is_fp8": False,
    }
    old = dot.backend_config_data if isinstance(dot.backend_config_data, dict) else {}
    return {"operation_queue_id": str(old.get("operation_queue_id", "0")),
            "wait_on_operation_queues": list(old.get("wait_on_operation_queues", [])),
            "gemm_backend_config": gemm,
            "force_earliest_schedule": bool(old.get("force_earliest_schedule", False))}


def gemm_config(instr: HloInstruction) -> dict:
    return instr.backend_config_data["gemm_backend_config"]


def gemm_name(config: dict, target: str = GEMM_TARGET) -> str:
    """XLA's SetName: cublas-lt-matmul, or cublas-gemm / cublas-batch-gemm for legacy calls."""
    if target == LT_TARGET:
        return "cublas-lt-matmul"
    ddn = config["gemm_backend_config"]["dot_dimension_numbers"]
    batched = ddn["lhs_batch_dimensions"] or ddn["rhs_batch_dimensions"]
    return "cublas-batch-gemm" if batched else "cublas-gemm"


def lt_types_supported(a: str, b: str, out: str, config: dict) -> bool:
    """XLA's TypesAreSupportedByCublasLt (CUDA, no FP8): the type combination and the algorithm."""
    algorithm = config.get("precision_config", {}).get("algorithm", "ALG_UNSET")
    return (a, b, out) in CUBLASLT_TYPES and algorithm in CUBLASLT_ALGORITHMS
