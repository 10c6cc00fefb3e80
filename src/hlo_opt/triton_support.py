"""What XLA's Triton GEMM emitter takes, as the GEMM fusion pass asks it (`xla/backends/gpu/
codegen/triton/support_legacy.cc`, IsTritonSupportedInstruction, and `xla/service/gpu/
triton_tiling_propagation.cc`, the profitability rules of GetPropagatedDimOrdersAndRequirements-
IfProfitablyFusible at XLA's default --xla_gpu_triton_fusion_level=2).

Where it sits: a helper of `hlo_opt.passes.gemm_fusion` ("triton-gemm-rewriter"). Each query
returns None when XLA would accept, else the one-line reason XLA gives.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.matmul_utils import dot_dims

IO_TOLERANCE_BYTES = 1024       # kIoToleranceBytes: a fusion's traffic may grow by this much
MAX_PARAMS_PER_DOT_OPERAND = 4  # TritonFusionAnalysis::kMaxParameterPerDotOperand

SUPPORTED_TYPES = frozenset({"pred", "s4", "s8", "s16", "s32", "s64", "f16", "bf16", "f32", "f64",
                             "f8e4m3fn", "f8e5m2"})
DOT_INPUT_TYPES = frozenset({"s4", "s8", "f16", "bf16", "f32", "f64", "f8e4m3fn", "f8e5m2"})
DOT_OUTPUT_TYPES = frozenset({"f16", "bf16", "f32", "f64", "s32", "f8e4m3fn", "f8e5m2"})
ELEMENTWISE = frozenset({
    "abs", "ceil", "cosine", "exponential", "exponential-minus-one", "floor", "log", "log-plus-one",
    "negate", "rsqrt", "sine", "sqrt", "cbrt", "tan", "tanh", "erf", "sign", "not", "convert", "copy",
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "compare", "and", "or", "xor",
    "power", "atan2", "remainder", "select", "clamp",
})
LAYOUT_OPS = frozenset({"bitcast", "reshape", "transpose"})
PROLOGUE_OPS = LAYOUT_OPS | {"broadcast", "slice"}


def _etype(instr: HloInstruction) -> str:
    return instr.shape.element_type.name


def _byte_size(instr: HloInstruction) -> int:
    return instr.shape.byte_size()


def input_minus_output_bytes(instr: HloInstruction) -> int:
    return sum(_byte_size(o) for o in instr.operands) - _byte_size(instr)


def _params_or_constants(instr: HloInstruction, single_user: bool) -> bool:
    return all(o.opcode in ("parameter", "constant") and (not single_user or len(o.users) == 1)
               for o in instr.operands)


def is_input_worth_fusing(instr: HloInstruction) -> bool:
    """XLA's IsInputWorthFusing: the fusion reads at most a KiB more, or the op reads only
    parameters/constants that nobody else reads."""
    if input_minus_output_bytes(instr) <= IO_TOLERANCE_BYTES:
        return True
    if len(instr.users) > 1:
        return False
    if instr.opcode == "slice" and _params_or_constants(instr, single_user=False):
        return True
    return _params_or_constants(instr, single_user=True)


def is_output_worth_fusing(instr: HloInstruction) -> bool:
    comp = instr.parent
    if comp is not None and comp.root is instr:
        return True
    return input_minus_output_bytes(instr) >= -IO_TOLERANCE_BYTES


def is_effective_parameter(instr: HloInstruction) -> bool:
    while instr.opcode in ("bitcast", "get-tuple-element"):
        instr = instr.operands[0]
    return instr.opcode == "parameter"


def _type_ok(instr: HloInstruction, cc: tuple[int, int]) -> bool:
    """XLA's IsTritonSupportedDataType: f8e4m3fn needs sm_89 or newer."""
    t = _etype(instr) if instr.shape.is_array else None
    return t in SUPPORTED_TYPES and (t != "f8e4m3fn" or cc >= (8, 9))


def unsupported_instruction(instr: HloInstruction, cc: tuple[int, int] = (9, 0)) -> str | None:
    """Why Triton cannot take this non-dot instruction in a GEMM fusion on a GPU of compute
    capability `cc` (None: it can)."""
    if not _type_ok(instr, cc):
        return "Unsupported data type."
    if not all(_type_ok(o, cc) for o in instr.operands):
        return "Unsupported operand data type."
    if instr.opcode in ELEMENTWISE or instr.opcode in PROLOGUE_OPS:
        return None
    if instr.opcode == "constant" and instr.shape.rank == 0:
        return None
    return "Unsupported instruction."


def unsupported_dot(dot: HloInstruction, cc: tuple[int, int] = (9, 0)) -> str | None:
    """XLA's IsTritonSupportedDot: one contracting dim per side (any number of batch dims, as
    jaxlib 0.10's XLA takes the batch dim split-k adds), every operand with a non-trivial free
    dim, supported types (no s32 operands)."""
    if _etype(dot) not in DOT_OUTPUT_TYPES:
        return "Unsupported output data type for Dot op."
    if len(dot.operands) != 2 or dot.attrs.get("sparsity"):
        return "Sparse dots are not supported."
    if any(_etype(o) not in DOT_INPUT_TYPES or not _type_ok(o, cc) for o in dot.operands):
        return "Unsupported input data type for Dot op."
    for side, operand in (("lhs", dot.operands[0]), ("rhs", dot.operands[1])):
        contracting, batch = dot_dims(dot, f"{side}_contracting_dims"), dot_dims(dot, f"{side}_batch_dims")
        if len(contracting) != 1:
            return "Multiple contracting dimensions are not supported."
        free = [s for d, s in enumerate(operand.shape.dims) if d not in contracting and d not in batch]
        if not free:
            return "No non-contracting dimensions."
        size = 1
        for s in free:
            size *= s
        if size <= 1:
            return "Trivial non-contracting dimensions."
    return None


# Legacy Triton support (support_legacy.cc), as DotStrengthReduction asks it: the dot output types
# (IsTritonSupportedDotOutputType; f8e4m3fn from Hopper on), the data types (those and pred, s8,
# s16, s32), and the precision algorithms Triton implements on CUDA (IsDotAlgorithmSupportedByTriton).
LEGACY_DOT_OUTPUT_TYPES = frozenset({"f16", "f32", "bf16", "s32", "f8e5m2", "f8e4m3fn"})
LEGACY_DATA_TYPES = LEGACY_DOT_OUTPUT_TYPES | {"pred", "s8", "s16"}
LEGACY_TRITON_ALGORITHMS = frozenset({
    "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3", "dot_f32_f32_f32", "dot_bf16_bf16_f32",
    "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6"})


def _legacy_type_ok(t: str, cc: tuple[int, int], output: bool = False) -> bool:
    if t == "f8e4m3fn" and cc < (9, 0):
        return False
    return t in (LEGACY_DOT_OUTPUT_TYPES if output else LEGACY_DATA_TYPES)


def cannot_handle_gemm(dot: HloInstruction, cc: tuple[int, int] = (9, 0)) -> str | None:
    """Why XLA's legacy CanTritonHandleGEMM refuses `dot` on a CUDA GPU of compute capability `cc`
    (None: it takes it). TensorFloat-32 counts as enabled, as in JAX."""
    algorithm = dot.attrs.get("algorithm")
    if algorithm is None:
        if any(str(p).lower() != "default" for p in dot.attrs.get("operand_precision", ())):
            return "Having non-default operand precisions for Dot op with unset algorithm."
    elif str(algorithm).lower() not in LEGACY_TRITON_ALGORITHMS:
        return f"Unsupported algorithm on the current device(s): {algorithm}"
    out, lhs, rhs = _etype(dot), _etype(dot.operands[0]), _etype(dot.operands[1])
    if not _legacy_type_ok(out, cc, output=True):
        return "Unsupported output data type for Dot op."
    if not (_legacy_type_ok(lhs, cc) and _legacy_type_ok(rhs, cc)):
        return "Unsupported input data type for Dot op."
    if out == "s32" and not {lhs, rhs} <= {"s8", "u8"}:
        return "Currently, S32 output is only supported for 8-bit integral inputs."
    if len(dot_dims(dot, "lhs_batch_dims")) > 1:
        return "Multiple batch dimensions."
    return None


__all__ = ["MAX_PARAMS_PER_DOT_OPERAND", "cannot_handle_gemm", "input_minus_output_bytes",
           "is_effective_parameter", "is_input_worth_fusing", "is_output_worth_fusing", "unsupported_dot", "unsupported_instruction"]
