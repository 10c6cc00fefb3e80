"""GEMM configurations: when a dot is a cuBLAS call, and how cuBLAS sees its operands.

Where it sits: hlo-codegen's thunk emission (XLA: `GemmConfig::For` in
`xla/service/gpu/matmul_utils.cc`). A `dot` or a `__cublas$gemm` / `__cublas$lt$matmul` custom
call becomes a `GemmThunk` whose `GemmConfig` holds the HLO semantics (shapes, dot dimension
numbers, alpha, beta, epilogue) and one `MatrixLayout` per operand: cuBLAS multiplies `batch`
matrices of `rows x cols`, each row- or column-major, so the dims of each operand must sit in
memory as [batch dims][row dims][col dims] (or [batch][col][row]), each group contiguous and in
the order of the dimension numbers (size-1 dims may be anywhere).

    lhs f32[2,3]{1,0} . rhs f32[3,4]{0,1}  (contract lhs 1 with rhs 0)
      lhs: batch 1, rows 2 (M), cols 3 (K), row_major
      rhs: batch 1, rows 3 (K), cols 4 (N), column_major   <- the {0,1} layout

The custom call's backend_config is XLA's `GemmBackendConfig` JSON (`alpha_real`, `alpha_imag`,
`beta`, `dot_dimension_numbers` with int64 numbers as strings, `epilogue`, `precision_config`),
either at the top level or under `gemm_backend_config`. Operands: lhs, rhs, then c when
beta != 0, then the bias vector for BIAS epilogues; the result is the array or element {0} of a
tuple whose last element may be an s8 workspace.
"""

from __future__ import annotations

from hlo_common.errors import HloError
from hlo_common.ir import HloInstruction
from hlo_common.manifest_thunks import EPILOGUES, GemmConfig, MatrixLayout
from hlo_common.shape import Shape

GEMM_CUSTOM_CALL_TARGETS = frozenset({"__cublas$gemm", "__cublas$lt$matmul"})
# Element types cuBLAS multiplies (same type in and out), plus 16-bit floats into f32.
GEMM_TYPES = frozenset({"f16", "bf16", "f32", "f64", "c64", "c128"})
WIDENING = frozenset({("f16", "f32"), ("bf16", "f32")})


def _prod(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def matrix_layout(shape: Shape, batch: list[int], rows: list[int], cols: list[int]) -> MatrixLayout | None:
    """The cuBLAS view of `shape` with these logical dim groups, or None when memory order forbids."""
    dims = shape.dims
    physical = [d for d in reversed(shape.minor_to_major) if dims[d] != 1]

    def keep(group: list[int]) -> list[int]:
        return [d for d in group if dims[d] != 1]

    b, r, c = keep(batch), keep(rows), keep(cols)
    n_rows, n_cols = _prod(dims[d] for d in rows), _prod(dims[d] for d in cols)
    n_batch = _prod(dims[d] for d in batch)
    if physical == b + r + c:
        order = "row_major"
    elif physical == b + c + r:
        order = "column_major"
    else:
        return None
    leading = n_cols if order == "row_major" else n_rows
    return MatrixLayout(n_batch, n_rows, n_cols, order, max(1, leading), n_rows * n_cols)


def _free_dims(rank: int, batch, contracting) -> list[int]:
    return [d for d in range(rank) if d not in batch and d not in contracting]


def build_gemm_config(lhs: Shape, rhs: Shape, out: Shape, dims: tuple, alpha=(1.0, 0.0), beta: float = 0.0,
                      epilogue: str = "DEFAULT") -> GemmConfig | None:
    """A GemmConfig for these shapes and dot dimension numbers, or None when cuBLAS cannot do it."""
    lb, rb, lc, rc = (list(d) for d in dims)
    if not (lhs.is_array and rhs.is_array and out.is_array) or len(lb) != len(rb) or len(lc) != len(rc):
        return None
    types = (lhs.element_type.name, rhs.element_type.name, out.element_type.name)
    if types[0] != types[1] or types[0] not in GEMM_TYPES:
        return None
    if types[2] != types[0] and (types[0], types[2]) not in WIDENING:
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
    data = instr.backend_config_data
    if not isinstance(data, dict):
        return {}
    inner = data.get("gemm_backend_config", data)
    return inner if isinstance(inner, dict) else {}


def _config_dims(cfg: dict, instr: HloInstruction) -> tuple:
    ddn = cfg.get("dot_dimension_numbers", {})
    try:
        return tuple(tuple(int(v) for v in ddn.get(k, ())) for k in (
            "lhs_batch_dimensions", "rhs_batch_dimensions", "lhs_contracting_dimensions",
            "rhs_contracting_dimensions"))
    except (TypeError, ValueError, AttributeError):
        raise HloError(f"%{instr.name}: bad dot_dimension_numbers in its gemm backend_config") from None


def gemm_config_for_custom_call(instr: HloInstruction) -> tuple[GemmConfig, dict[str, int]]:
    """The GemmConfig of a `__cublas$gemm` custom call and which operand is what
    (`{"lhs": 0, "rhs": 1, "c": 2, "bias": 3}`); HloError naming the call when unusable."""
    cfg = gemm_backend_config(instr)
    epilogue = str(cfg.get("epilogue", "DEFAULT"))
    if epilogue not in EPILOGUES:
        raise HloError(f"%{instr.name}: gemm epilogue {epilogue} is not supported (supported: "
                       f"{', '.join(EPILOGUES)})")
    alpha = (float(cfg.get("alpha_real", 1.0)), float(cfg.get("alpha_imag", 0.0)))
    beta = float(cfg.get("beta", 0.0))
    roles = {"lhs": 0, "rhs": 1}
    if beta != 0.0:
        roles["c"] = len(roles)
    if epilogue.startswith("BIAS"):
        roles["bias"] = len(roles)
    if len(instr.operands) != len(roles):
        raise HloError(f"%{instr.name}: a gemm with beta={beta:g} and epilogue {epilogue} takes "
                       f"{len(roles)} operands, it has {len(instr.operands)}")
    out = gemm_output_shape(instr)
    lhs, rhs = instr.operands[0].shape, instr.operands[1].shape
    config = build_gemm_config(lhs, rhs, out, _config_dims(cfg, instr), alpha, beta, epilogue)
    if config is None:
        raise HloError(f"%{instr.name}: cuBLAS cannot run this gemm (types "
                       f"{instr.operands[0].shape} x {instr.operands[1].shape} -> {out}, or operand layouts "
                       "that are not [batch, rows, cols] in memory)")
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
