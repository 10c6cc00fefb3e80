"""GEMM configurations: when a dot is a cuBLAS call, and how cuBLAS sees its operands.

Where it sits: hlo-codegen's thunk emission and the `gemm-fallback` pass of `hlo_common.passes`,
which share it (XLA: `GemmConfig::For` in `xla/service/gpu/matmul_utils.cc`). A `dot` or a
`__cublas$gemm` / `__cublas$lt$matmul` custom call becomes a `GemmThunk` whose `GemmConfig`
holds the HLO semantics (shapes, dot dimension numbers, alpha, beta, epilogue) and one
`MatrixLayout` per operand: cuBLAS multiplies `batch` matrices of `rows x cols`, each row- or
column-major, so the dims of each operand must sit in memory as [batch dims][row dims][col dims]
(or [batch][col][row], or with the batch between the two), each group contiguous and in the
order of the dimension numbers (size-1 dims may be anywhere).

    lhs f32[2,3]{1,0} . rhs f32[3,4]{0,1}  (contract lhs 1 with rhs 0)
      lhs: batch 1, rows 2 (M), cols 3 (K), row_major
      rhs: batch 1, rows 3 (K), cols 4 (N), column_major   <- the {0,1} layout

The custom call's backend_config is XLA's `GemmBackendConfig` JSON (`alpha_real`, `alpha_imag`,
`beta`, `dot_dimension_numbers` with int64 numbers as strings, `epilogue`, `precision_config`),
either at the top level or under `gemm_backend_config`. Operands: lhs, rhs, then c when
beta != 0, then the bias vector for BIAS epilogues; the result is the array or element {0} of a
tuple whose last element may be an s8 workspace.

Which GEMMs become GemmThunks: those hlo-run's cuBLAS call (`hlo_run/cublas.py`, one
`cublasGemmStridedBatchedEx`) can run exactly as the reference computes them
(`hlo_common.interpreter.gemm_semantics`): a type combination of `CUBLAS_TYPES` (XLA's
TypesAreSupportedByLegacyCublas), operands and result in a memory order MatrixLayout takes, a c operand
of exactly the result's shape and layout (cuBLAS overwrites it in place), the DEFAULT epilogue
(with `lt`, below, also BIAS/RELU/GELU), no amax output, no algorithm that rounds f32 operands to 16 bits,
and for s8 operands XLA's int8 rules: every row and column count of the two operands a
multiple of 4 (what XLA's cublas-pad-for-gemms guarantees: cuBLAS needs 4-aligned leading dims
and batch strides for int8) and, for an s32 result, integral alpha and beta (an int32 scale).
The host target takes the same decision, so a host run executes the thunks the GPU runs. Every
other gemm custom call is rewritten by `hlo_common.passes.gemm_fallback` (never a failure): a
cuBLASLt call whose only obstacle is its epilogue becomes a `__cublas$gemm` call plus an epilogue
kernel, the rest one kernel each. For the cuda target (`lt=True`) a cuBLASLt call with a BIAS, RELU or
GELU epilogue (no aux output, no amax) on f16/bf16/f32/f64 results, whose bias has the result's type
and one element per element of the result's most minor dim, stays one GemmThunk with its epilogue:
one `cublasLtMatmul` (`hlo_run/cublas_lt.py`), as XLA:GPU runs it.
"""

from __future__ import annotations

from hlo_common.interpreter.gemm_semantics import (
    ALGORITHM_OPERAND_TYPES, GEMM_CUSTOM_CALL_TARGETS, GemmSemantics, gemm_backend_config as _inner_config,
    parse_gemm_semantics,
)
from typing import TYPE_CHECKING

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape

if TYPE_CHECKING:  # the manifest's thunk types load with the first GEMM (hlo-opt's start-up needs none)
    from hlo_common.manifest.thunks import GemmConfig, MatrixLayout

__all__ = ["GEMM_CUSTOM_CALL_TARGETS", "CUBLAS_TYPES", "build_gemm_config", "gemm_config_for_dot",
           "gemm_config_for_custom_call", "gemm_output_shape", "gemm_workspace_index"]

# (operand type, result type) pairs hlo-run's cublasGemmEx call multiplies (both operands alike).
CUBLAS_TYPES = frozenset({
    ("f16", "f16"), ("bf16", "bf16"), ("f32", "f32"), ("f64", "f64"), ("c64", "c64"), ("c128", "c128"),
    ("f16", "f32"), ("bf16", "f32"), ("s8", "s32"), ("s8", "f32"),
})
INT8_ALIGNMENT = 4  # cuBLAS int8 GEMMs: rows and cols of both operands multiples of 4 (XLA pads to it)


def _prod(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def matrix_layout(shape: Shape, batch: list[int], rows: list[int], cols: list[int]) -> MatrixLayout | None:
    """The cuBLAS view of `shape` with these logical dim groups, or None when memory order forbids.
    As XLA's MatrixLayout::For, the batch may also sit between rows and cols ([rows][batch][cols]
    or [cols][batch][rows]): then a matrix's leading dim strides over the batch too."""
    from hlo_common.manifest.thunks import MatrixLayout

    dims = shape.dims
    physical = [d for d in reversed(shape.minor_to_major) if dims[d] != 1]

    def keep(group: list[int]) -> list[int]:
        return [d for d in group if dims[d] != 1]

    b, r, c = keep(batch), keep(rows), keep(cols)
    n_rows, n_cols = _prod(dims[d] for d in rows), _prod(dims[d] for d in cols)
    n_batch = _prod(dims[d] for d in batch)
    if physical in (b + r + c, r + b + c):
        order, minor = "row_major", n_cols
    elif physical in (b + c + r, c + b + r):
        order, minor = "column_major", n_rows
    else:
        return None
    if physical[:len(b)] == b:  # batch most major: matrices one after another
        return MatrixLayout(n_batch, n_rows, n_cols, order, max(1, minor), n_rows * n_cols)
    return MatrixLayout(n_batch, n_rows, n_cols, order, max(1, n_batch * minor), minor)


def _free_dims(rank: int, batch, contracting) -> list[int]:
    return [d for d in range(rank) if d not in batch and d not in contracting]


def _int8_rules_hold(layouts, alpha, beta, out_type: str) -> bool:
    if any(m.rows % INT8_ALIGNMENT or m.cols % INT8_ALIGNMENT for m in layouts[:2]):
        return False
    integral = all(float(v).is_integer() and abs(v) < 2 ** 31 for v in (*alpha, beta))
    return out_type != "s32" or (integral and alpha[1] == 0)


def build_gemm_config(lhs: Shape, rhs: Shape, out: Shape, dims: tuple, alpha=(1.0, 0.0), beta: float = 0.0,
                      epilogue: str = "DEFAULT") -> GemmConfig | None:
    """A GemmConfig for these shapes and dot dimension numbers, or None when cuBLAS cannot do it."""
    from hlo_common.manifest.thunks import GemmConfig

    lb, rb, lc, rc = (list(d) for d in dims)
    if not (lhs.is_array and rhs.is_array and out.is_array) or len(lb) != len(rb) or len(lc) != len(rc):
        return None
    types = (lhs.element_type.name, rhs.element_type.name, out.element_type.name)
    if types[0] != types[1] or (types[0], types[2]) not in CUBLAS_TYPES:
        return None
    lf, rf = _free_dims(lhs.rank, lb, lc), _free_dims(rhs.rank, rb, rc)
    nb = len(lb)
    if out.rank != nb + len(lf) + len(rf):
        return None
    out_batch = list(range(nb))
    out_rows = list(range(nb, nb + len(lf)))
    out_cols = list(range(nb + len(lf), out.rank))
    layouts = (matrix_layout(lhs, lb, lf, lc), matrix_layout(rhs, rb, rc, rf),
               matrix_layout(out, out_batch, out_rows, out_cols))
    if any(m is None for m in layouts):
        return None
    if types[0] == "s8" and not _int8_rules_hold(layouts, alpha, beta, types[2]):
        return None
    return GemmConfig(lhs.to_string(), rhs.to_string(), out.to_string(), tuple(lb), tuple(rb), tuple(lc),
                      tuple(rc), *layouts, alpha_real=float(alpha[0]), alpha_imag=float(alpha[1]),
                      beta=float(beta), epilogue=epilogue)


def _dims_of_dot(dot: HloInstruction) -> tuple:
    return tuple(tuple(int(v) for v in dot.attrs.get(k, ())) for k in
                 ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"))


def gemm_config_for_dot(dot: HloInstruction) -> GemmConfig | None:
    """The GEMM of a plain `dot` (alpha 1, beta 0), or None when it needs a kernel instead."""
    if len(dot.operands) != 2 or "sparsity" in dot.attrs:
        return None
    return build_gemm_config(dot.operands[0].shape, dot.operands[1].shape, dot.shape, _dims_of_dot(dot))


def gemm_backend_config(instr: HloInstruction) -> dict:
    """The GemmBackendConfig of a gemm custom call as a dict (empty when there is none)."""
    return _inner_config(instr.backend_config_data) or {}


LT_EPILOGUES = frozenset({"RELU", "BIAS", "BIAS_RELU", "GELU", "BIAS_GELU"})  # one cublasLtMatmul each
LT_RESULT_TYPES = frozenset({"f16", "bf16", "f32", "f64"})


def cublas_can_run(sem: GemmSemantics, lhs: Shape, lt: bool = False) -> bool:
    """Whether hlo-run's legacy cuBLAS call (with `lt`, or its cuBLASLt call) computes `sem` as the
    reference does (shapes aside)."""
    rounds = ALGORITHM_OPERAND_TYPES.get(sem.algorithm)
    epilogue_ok = sem.epilogue == "DEFAULT" or (lt and sem.epilogue in LT_EPILOGUES)
    return epilogue_ok and not sem.damax_output and (rounds is None or lhs.element_type.name == rounds)


def _lt_fits(instr: HloInstruction, sem: GemmSemantics, out: Shape, config: GemmConfig) -> bool:
    """A cuBLASLt epilogue's operands as cublasLtMatmul takes them: a result type it fuses into, and
    a bias of the result's type with one element per row of D as cuBLAS sees it (the output's
    minor rows or columns: hlo_run/cublas.py's operand swap), read in memory order."""
    if sem.epilogue == "DEFAULT":
        return True
    if not out.is_array or out.element_type.name not in LT_RESULT_TYPES:
        return False
    roles = sem.operand_roles()
    if "bias" not in roles:
        return True
    bias = instr.operands[roles["bias"]].shape
    d = config.output_matrix
    rows = d.rows if d.order == "column_major" else d.cols
    return bias.element_type is out.element_type and bias.num_elements == rows


def gemm_config_for_custom_call(instr: HloInstruction, lt: bool = False
                                ) -> tuple[GemmConfig, dict[str, int]] | None:
    """The GemmConfig of a `__cublas$gemm` custom call and which operand is what
    (`{"lhs": 0, "rhs": 1, "c": 2}`), or None when cuBLAS (with `lt`, or cuBLASLt) cannot run it
    (then `gemm_fallback` makes it a kernel); HloError naming the call when its config is unusable."""
    sem = parse_gemm_semantics(instr)
    lhs, rhs = instr.operands[0].shape, instr.operands[1].shape
    out, roles = gemm_output_shape(instr), sem.operand_roles()
    if not cublas_can_run(sem, lhs, lt):
        return None
    # cuBLAS reads c as the output it overwrites (hlo-run copies c's bytes into the output first).
    if "c" in roles and instr.operands[roles["c"]].shape.to_string() != out.to_string():
        return None
    config = build_gemm_config(lhs, rhs, out, sem.dims, (sem.alpha_real, sem.alpha_imag), sem.beta,
                               sem.epilogue)
    if config is None or not _lt_fits(instr, sem, out, config):
        return None
    return config, roles


def gemm_output_shape(instr: HloInstruction) -> Shape:
    """The result array of a gemm custom call (element {0} when it returns a tuple)."""
    shape = instr.shape
    return shape.tuple_shapes[0] if shape.is_tuple else shape


def gemm_workspace_index(instr: HloInstruction) -> tuple[int, ...] | None:
    """The shape index of the s8 workspace in a gemm custom call's tuple result, if any."""
    shape = instr.shape
    if shape.is_tuple and len(shape.tuple_shapes) > 1 and shape.tuple_shapes[-1].element_type.name == "s8":
        return (len(shape.tuple_shapes) - 1,)
    return None
