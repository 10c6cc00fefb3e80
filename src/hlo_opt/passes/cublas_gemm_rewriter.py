"""GemmRewriter ("cublas-gemm-rewriter"): dots become cuBLASLt matmul (or legacy cuBLAS GEMM) custom
calls, with a scalar multiply folded into alpha, a matrix bias add into beta, and on cuBLASLt calls
a vector bias, ReLU and the tanh-approximate GELU into the epilogue (`xla/service/gpu/transforms/
gemm_rewriter.cc`, the non-FP8 rewrite, plus its workspace rewrite).

Where it sits: "hlo normalization", after layout assignment (operand layouts are what cuBLAS can
read) and before layout_normalization; hlo-codegen turns each call into a GemmThunk and the
reference interpreter evaluates it (`hlo_common/interpreter/gemm.py`).

    d = f32[64,32]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    m = f32[64,32]{1,0} multiply(d, broadcast(f32[] constant(0.5)))
    r = f32[64,32]{1,0} add(m, c)                       c: not a parameter, no other user
    becomes
    g = (f32[64,32]{1,0}, s8[W]{0}) custom-call(a, b, c), custom_call_target="__cublas$gemm",
        output_to_operand_aliasing={{0}: (2, {})}, backend_config={... "alpha_real":0.5, "beta":1 ...}
    r = f32[64,32]{1,0} get-tuple-element(g), index=0

    d = f32[64,32]{1,0} dot(a, b), ...;  x = add(d, broadcast(f32[32] v), dimensions={1})
    r = maximum(x, broadcast(f32[] constant(0)))
    becomes (cuBLASLt, XLA's default in the XLA:GPU the fusion bench compares with)
    g = (f32[64,32]{1,0}, s8[4194304]{0}) custom-call(a, b, v), custom_call_target="__cublas$lt$matmul",
        backend_config={... "epilogue":"BIAS_RELU" ...}

THE CUSTOM CALL (what thunk emission and the interpreter read; all fields always written):
- target `__cublas$lt$matmul` (cuBLASLt) or `__cublas$gemm` (legacy); operands `(lhs, rhs)`, then
  `c` when beta != 0, then the bias vector for BIAS* epilogues;
- result `(out, [aux,] s8[W]{0})`: element 0 is the GEMM result, aux the pre-activation values of
  a *_AUX epilogue, the last a scratch workspace of W bytes: 4 MiB for cuBLASLt calls,
  min(32 MiB, total operand bytes) for legacy ones (its contents mean nothing; the interpreter
  gives zeros); with a matrix bias, `output_to_operand_aliasing={{0}: (2, {})}`: out is written
  over c (always for legacy calls; for cuBLASLt only when c may be overwritten, see below);
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

What is rewritten (XLA's non-FP8 path, H100):
- a dot with one contracting and one free dim per operand beyond the batch dims (or a
  matrix-vector dot), result f16/bf16/f32/f64/c64/c128/f8 or s8 x s8 -> s32, no zero-sized
  operand, neither operand a rank-2 transpose, and not tiny: (lhs free + rhs free) * contracting
  >= 100 elements unless the result type has no elemental emitter (anything but f16/f32/bf16);
  f8 operands are converted to f16 (bf16 for a bf16 result) first; algorithm dot_bf16_bf16_f32
  converts the operands to bf16;
- `multiply(gemm, broadcast(constant scalar))`, both single-use, beta still 0, result not s32:
  alpha *= the scalar;
- `add(gemm, c)` (c not a broadcast), `add(convert(gemm), c)` when cuBLAS supports the type
  combination, `add(bitcast(gemm), c)` (c is bitcast to the gemm's shape) and
  `add(slice(gemm), c)` for a slice of leading elements: c becomes the third operand with beta 1,
  provided the gemm has one user, beta is 0, the result is not s32 and cuBLAS may overwrite c
  (c has no other user and is not a parameter, unless an input/output alias donates it);
  a bias that is a reshape/transpose/bitcast of a broadcast constant is folded to a constant;
  a cuBLASLt call may take c even when it cannot overwrite it (it then writes elsewhere);
- the call is cuBLASLt when `enable_cublaslt` (XLA's --xla_gpu_enable_cublaslt, default on here),
  neither operand is s8, cuBLASLt has the (lhs, rhs, out) type combination and the algorithm, and
  the batch count is below 2^16; legacy otherwise. Only cuBLASLt calls take epilogues, and only
  for f16/bf16/f32/f64/f8 results:
- BIAS: `add(matmul, broadcast(v))`, optionally through a slice and/or a bitcast of the matmul
  (each with one user), epilogue DEFAULT, v of rank = the number of rhs free dims, the most
  minor physical dims of the result being v's dims in v's minor-to-major order;
  `add(bitcast(matmul), broadcast(v))` that is no vector bias becomes a matrix bias through the
  bitcast;
- RELU / BIAS_RELU: `maximum(matmul, broadcast(0))` (optionally through a slice or bitcast), the
  matmul with one user and epilogue DEFAULT / BIAS;
- GELU / BIAS_GELU: `x * (0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x))))` with x the
  matmul (or a slice or bitcast of it), the constants within 128 epsilons where XLA allows it,
  every inner product and sum used once; with users of x besides the four in the formula the
  epilogue is *_AUX and those users read the aux output.
Declines FP8 matmuls (f8 dots become f16 dots first) and everything above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.attributes import OutputOperandAliasing, PaddingConfig
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.hlo_evaluation import try_evaluate
from hlo_opt.layout_util import byte_size, same_m2m
from hlo_common.hlo_pass.pass_base import HloPass, register_pass

GEMM_TARGET = "__cublas$gemm"
LT_TARGET = "__cublas$lt$matmul"
HOPPER_WORKSPACE_BYTES = 32 * 1024 * 1024
# cuBLASLt calls get a fixed workspace: 4 MiB in every XLA:GPU H100 module of testdata/fusion/xla.
LT_WORKSPACE_BYTES = 4 * 1024 * 1024
LT_MAX_BATCH_COUNT = 65535  # XLA: cuBLASLt batch counts stay below 2^16
MAX_BIAS_BYTES = 8 * 1024 * 1024  # XLA: kMaxMaterializeBiasBytes
_F8 = ("f8e3m4", "f8e4m3", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz")
_MATMUL_TYPES = frozenset(_F8 + ("f16", "bf16", "f32", "f64", "c64", "c128"))
_MATVEC_TYPES = frozenset(("f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64", "c64", "c128"))
_CLASSICAL_EMITTER_TYPES = frozenset(("f16", "f32", "bf16"))
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
_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
# 128 machine epsilons of the constant's type: how near a GELU constant must be (XLA's BcastConstScalarNear).
_NEAR_EPSILON = {"f16": 128 * 2.0 ** -10, "bf16": 128 * 2.0 ** -7, "f32": 128 * 2.0 ** -23,
                 "f64": 128 * 2.0 ** -52}


def _type(instr: HloInstruction) -> str:
    return instr.shape.element_type.name


def _dims(dot: HloInstruction, key: str) -> tuple[int, ...]:
    return tuple(int(v) for v in dot.attrs.get(key, ()))


def is_gemm(instr: HloInstruction) -> bool:
    """A legacy cuBLAS GEMM or a cuBLASLt matmul (XLA's GemmOrCublasLtMatmul)."""
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in (GEMM_TARGET, LT_TARGET)


def is_cublaslt(instr: HloInstruction) -> bool:
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == LT_TARGET


def _canonical_ranks(dot: HloInstruction, lhs_extra: int, rhs_extra: int, out_extra: int) -> bool:
    nb = len(_dims(dot, "lhs_batch_dims"))
    lhs, rhs = dot.operands
    return (lhs.shape.rank == nb + lhs_extra and rhs.shape.rank == nb + rhs_extra
            and dot.shape.rank == nb + out_extra
            and lhs.shape.num_elements > 0 and rhs.shape.num_elements > 0)


def _type_allowed(dot: HloInstruction, types: frozenset) -> bool:
    out = _type(dot)
    s8_operands = _type(dot.operands[0]) == "s8" and _type(dot.operands[1]) == "s8"
    return out in types or (out == "s32" and s8_operands)


def is_matrix_multiplication(dot: HloInstruction) -> bool:
    return dot.opcode == "dot" and _type_allowed(dot, _MATMUL_TYPES) and _canonical_ranks(dot, 2, 2, 2)


def is_matrix_vector_multiplication(dot: HloInstruction) -> bool:
    return dot.opcode == "dot" and _type_allowed(dot, _MATVEC_TYPES) and (
        _canonical_ranks(dot, 2, 1, 1) or _canonical_ranks(dot, 1, 2, 1))


def too_small_for_rewriting(dot: HloInstruction, threshold: int) -> bool:
    """XLA's IsMatrixMultiplicationTooSmallForRewriting."""
    lhs, rhs = dot.operands
    lb, rb = _dims(dot, "lhs_batch_dims"), _dims(dot, "rhs_batch_dims")
    lc, rc = _dims(dot, "lhs_contracting_dims"), _dims(dot, "rhs_contracting_dims")
    contracting = int(np.prod([lhs.shape.dims[d] for d in lc]))
    lhs_free = int(np.prod([s for d, s in enumerate(lhs.shape.dims) if d not in lb and d not in lc]))
    rhs_free = int(np.prod([s for d, s in enumerate(rhs.shape.dims) if d not in rb and d not in rc]))
    return (lhs_free + rhs_free) * contracting < threshold


def is_rank2_transpose(instr: HloInstruction) -> bool:
    return instr.opcode == "transpose" and tuple(instr.attrs["dimensions"]) == (1, 0)


def _number(v: float) -> int | float:
    return int(v) if float(v).is_integer() else float(v)


def _frontend_flag(instr: HloInstruction, key: str) -> bool:
    return any(k == key and v.strip('"') == "true" for k, v in instr.frontend_attributes)


def gemm_backend_config(dot: HloInstruction) -> dict:
    """GemmBackendConfig of a freshly rewritten dot (alpha 1, beta 0), inside a GpuBackendConfig."""
    nb = len(_dims(dot, "lhs_batch_dims"))
    strides = []
    for op in dot.operands:
        d = op.shape.dims
        strides.append(str(d[nb] if op.shape.rank == nb + 1 else d[nb] * d[nb + 1]))
    precision = [str(p).upper() for p in dot.attrs.get("operand_precision", ())] or ["DEFAULT", "DEFAULT"]
    algorithm = dot.attrs.get("algorithm")
    gemm = {
        "alpha_real": 1, "alpha_imag": 0, "beta": 0,
        "dot_dimension_numbers": {key: [str(v) for v in _dims(dot, attr)] for key, attr in (
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


def _scalar_constant(instr: HloInstruction) -> complex | None:
    if instr.opcode != "constant" or instr.literal is None or instr.shape.num_elements != 1:
        return None
    value = np.asarray(instr.literal).reshape(-1)[0]
    return complex(value) if np.iscomplexobj(value) else complex(float(value))


def _bcast_scalar(instr: HloInstruction, value: float, near: bool = False) -> bool:
    """broadcast(constant scalar) equal to `value` (or, with `near`, within 128 epsilons of its type)."""
    if instr.opcode != "broadcast":
        return False
    c = _scalar_constant(instr.operands[0])
    if c is None or c.imag != 0:
        return False
    if not near:
        return c.real == value
    eps = _NEAR_EPSILON.get(_type(instr))
    return eps is not None and abs(c.real - value) < abs(c.real + value) * eps


def _both_orders(instr: HloInstruction):
    """The operand pairs of a commutative binary op, as XLA's *AnyOrder patterns try them."""
    a, b = instr.operands
    return ((a, b), (b, a))


def _one_user(instr: HloInstruction) -> bool:
    return len(instr.users) == 1


def _is_multiply_of(instr: HloInstruction, first, second) -> bool:
    """multiply(first', second') in either order, each side checked by a predicate."""
    return instr.opcode == "multiply" and any(first(a) and second(b) for a, b in _both_orders(instr))


def is_approximate_gelu_cdf(cdf: HloInstruction, x: HloInstruction) -> bool:
    """cdf == 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x))), the inner products and
    sums used by nothing else (XLA's GELU pattern in GemmRewriter::HandleMultiply)."""
    def is_x(v):
        return v is x

    def cube(v):
        return _one_user(v) and _is_multiply_of(
            v, is_x, lambda w: _one_user(w) and _is_multiply_of(w, is_x, is_x))

    def scaled_cube(v):
        return _one_user(v) and _is_multiply_of(v, lambda w: _bcast_scalar(w, 0.044715, near=True), cube)

    def inner(v):
        return _one_user(v) and v.opcode == "add" and any(
            is_x(a) and scaled_cube(b) for a, b in _both_orders(v))

    def tanh_arg(v):
        return _one_user(v) and _is_multiply_of(
            v, lambda w: _bcast_scalar(w, _SQRT_2_OVER_PI, near=True), inner)

    def one_plus_tanh(v):
        return v.opcode == "add" and any(
            _bcast_scalar(a, 1.0) and b.opcode == "tanh" and _one_user(b) and tanh_arg(b.operands[0])
            for a, b in _both_orders(v))

    return _is_multiply_of(cdf, lambda w: _bcast_scalar(w, 0.5), one_plus_tanh)


class GemmRewriterVisitor:
    """Rewrites the dots of one computation, then folds their multiplies and adds (post order)."""

    def __init__(self, comp: HloComputation, threshold: int, enable_cublaslt: bool = True):
        self.comp, self.threshold, self.changed = comp, threshold, False
        self.enable_cublaslt = enable_cublaslt

    def run(self) -> bool:
        handlers = {"dot": self.handle_dot, "multiply": self.handle_multiply, "add": self.handle_add,
                    "maximum": self.handle_maximum}
        for instr in self.comp.post_order():
            handler = handlers.get(instr.opcode)
            if handler is not None and instr.parent is self.comp:
                handler(instr)
        return self.changed

    # -- dot ---------------------------------------------------------------------------------------
    def handle_dot(self, dot: HloInstruction) -> None:
        if not (is_matrix_multiplication(dot) or is_matrix_vector_multiplication(dot)):
            return
        if "sparsity" in dot.attrs:
            return
        if too_small_for_rewriting(dot, self.threshold) and _type(dot) in _CLASSICAL_EMITTER_TYPES:
            return
        if any(is_rank2_transpose(op) for op in dot.operands):
            return
        if _type(dot.operands[0]) in _F8 and _type(dot.operands[1]) in _F8:
            dot = self._f8_dot_as_f16(dot)
        operands = list(dot.operands)
        if str(dot.attrs.get("algorithm", "")).lower() == "dot_bf16_bf16_f32":
            operands = [self._convert(op, "bf16", dot) for op in operands]
        config = gemm_backend_config(dot)
        if operands != list(dot.operands):
            config["gemm_backend_config"]["precision_config"]["algorithm"] = "ALG_UNSET"
        target = self._gemm_target(dot, operands, config["gemm_backend_config"])
        call = self.comp.add_new_instruction("custom-call", operands, dot.shape,
                                             {"custom_call_target": target}, name=gemm_name(config, target),
                                             before=dot)
        call.backend_config_data = config
        call.metadata, call.frontend_attributes = list(dot.metadata), list(dot.frontend_attributes)
        self.comp.replace_instruction(dot, call)
        self.changed = True

    def _gemm_target(self, dot: HloInstruction, operands: list[HloInstruction], config: dict) -> str:
        """XLA's GetNonFp8GemmCustomCallTarget: cuBLASLt when enabled and it supports the GEMM (no
        s8 operands, a supported type combination and algorithm, fewer than 2^16 batches)."""
        if not self.enable_cublaslt or any(_type(op) == "s8" for op in operands):
            return GEMM_TARGET
        if not lt_types_supported(_type(operands[0]), _type(operands[1]), _type(dot), config):
            return GEMM_TARGET
        lhs = operands[0].shape
        batch = int(np.prod([lhs.dims[d] for d in _dims(dot, "lhs_batch_dims")]))
        return GEMM_TARGET if batch > LT_MAX_BATCH_COUNT else LT_TARGET

    def _convert(self, op: HloInstruction, etype: str, before: HloInstruction) -> HloInstruction:
        shape = op.shape.with_element_type(etype)
        return self.comp.add_new_instruction("convert", [op], shape, before=before)

    def _f8_dot_as_f16(self, dot: HloInstruction) -> HloInstruction:
        """XLA's TurnF8DotIntoF16Dot: f16 (bf16 for a bf16 result) operands, f8 results converted back."""
        etype = "bf16" if _type(dot) == "bf16" else "f16"
        operands = [self._convert(op, etype, dot) for op in dot.operands]
        if _type(dot) not in _F8:
            new = dot.clone(new_operands=operands, name=dot.name)
            self.comp.add_instruction(new, before=dot)
            self.comp.replace_instruction(dot, new)
            return new
        new = dot.clone(new_operands=operands, shape=dot.shape.with_element_type("f16"), name=dot.name)
        self.comp.add_instruction(new, before=dot)
        self.comp.replace_instruction(dot, self._convert(new, _type(dot), dot))
        return new

    # -- alpha ---------------------------------------------------------------------------------------
    def handle_multiply(self, mul: HloInstruction) -> None:
        for gemm, bcast in (mul.operands, reversed(mul.operands)):
            if not (is_gemm(gemm) and gemm.shape.is_array and len(gemm.users) == 1
                    and bcast.opcode == "broadcast" and len(bcast.users) == 1):
                continue
            scalar = _scalar_constant(bcast.operands[0])
            if scalar is None or _type(gemm) == "s32":
                return
            cfg = gemm_config(gemm)
            if cfg["beta"] != 0:
                return
            alpha = scalar * complex(cfg["alpha_real"], cfg["alpha_imag"])
            cfg["alpha_real"], cfg["alpha_imag"] = _number(alpha.real), _number(alpha.imag)
            self.comp.replace_instruction(mul, gemm)
            self.changed = True
            return
        for x, cdf in _both_orders(mul):
            wrapper, gemm = (x, x.operands[0]) if x.opcode in ("slice", "bitcast") else (None, x)
            if is_cublaslt(gemm) and gemm.shape.is_array and _one_user(cdf) \
                    and is_approximate_gelu_cdf(cdf, x):
                self.fuse_gelu(mul, gemm, wrapper)
                return

    # -- activations -------------------------------------------------------------------------------
    def handle_maximum(self, mx: HloInstruction) -> None:
        """maximum(cuBLASLt matmul, or a slice or bitcast of one, broadcast(0)) -> RELU epilogue."""
        for x, zeros in _both_orders(mx):
            if not _one_user(x) or not _bcast_scalar(zeros, 0.0):
                continue
            wrapper, gemm = (x, x.operands[0]) if x.opcode in ("slice", "bitcast") else (None, x)
            if is_cublaslt(gemm) and gemm.shape.is_array and _one_user(gemm):
                self._set_activation(mx, gemm, wrapper, {"DEFAULT": "RELU", "BIAS": "BIAS_RELU"})
                return

    def fuse_gelu(self, mul: HloInstruction, gemm: HloInstruction, wrapper: HloInstruction | None) -> None:
        """XLA's FuseGeluActivation: GELU / BIAS_GELU, with an aux output (the pre-activation
        values) when the matmul has users besides the four inside the GELU."""
        has_aux = len(gemm.users) > 4
        if has_aux and wrapper is not None:
            return  # XLA would slice a tuple here; keep the ops
        names = {"DEFAULT": "GELU_AUX", "BIAS": "BIAS_GELU_AUX"} if has_aux else \
            {"DEFAULT": "GELU", "BIAS": "BIAS_GELU"}
        if not has_aux:
            self._set_activation(mul, gemm, wrapper, names)
            return
        epilogue = names.get(gemm_config(gemm)["epilogue"])
        if epilogue is None or _type(gemm) not in EPILOGUE_FUSION_TYPES:
            return
        shape = Shape.tuple_of([gemm.shape, gemm.shape])
        new = self.comp.add_instruction(gemm.clone(shape=shape, name=gemm_name({}, LT_TARGET)), before=mul)
        gemm_config(new)["epilogue"] = epilogue
        aux = self.comp.add_new_instruction("get-tuple-element", [new], gemm.shape, {"index": 1}, before=mul)
        out = self.comp.add_new_instruction("get-tuple-element", [new], gemm.shape, {"index": 0}, before=mul)
        self.comp.replace_instruction(mul, out)
        self.comp.replace_instruction(gemm, aux)
        self.changed = True

    def _set_activation(self, instr: HloInstruction, gemm: HloInstruction, wrapper: HloInstruction | None,
                        names: dict[str, str]) -> None:
        """XLA's FuseReluActivation / FuseGeluActivation without aux: the matmul with the new
        epilogue (re-applying the slice or bitcast) replaces `instr`."""
        if _type(gemm) not in EPILOGUE_FUSION_TYPES:
            return
        epilogue = names.get(gemm_config(gemm)["epilogue"])
        if epilogue is None:
            return
        new = self.comp.add_instruction(gemm.clone(name=gemm_name({}, LT_TARGET)), before=instr)
        gemm_config(new)["epilogue"] = epilogue
        if wrapper is not None:
            new = self.comp.add_instruction(wrapper.clone(new_operands=[new]), before=instr)
        self.comp.replace_instruction(instr, new)
        self.changed = True

    # -- matrix bias -------------------------------------------------------------------------------
    def handle_add(self, add: HloInstruction) -> None:
        for x, bcast in _both_orders(add):
            matched = _vector_bias_operand(x, bcast)
            if matched is not None and self.fuse_vector_bias(add, bcast, *matched):
                return
        add = self._broadcast_bias_of_batched_matmul(add)
        add = self._hoist_bitcast(add)
        for x, bias in (add.operands, reversed(add.operands)):
            converted = x.opcode == "convert" and len(x.users) == 1
            gemm = x if is_gemm(x) else (x.operands[0] if converted else None)
            if gemm is None or not is_gemm(gemm) or len(gemm.users) != 1 or bias.opcode == "broadcast":
                continue
            a, b, out = _type(gemm.operands[0]), _type(gemm.operands[1]), _type(add)
            supported = lt_types_supported(a, b, out, gemm_config(gemm)) if is_cublaslt(gemm) \
                else (a, b, out) in LEGACY_CUBLAS_TYPES
            consumers_ok = _type(add) == _type(gemm) or not add.users or (
                len(add.users) == 1 and add.users[0].opcode == "tuple" and not add.users[0].users)
            if supported and consumers_ok:
                self.fuse_matrix_bias(add, bias, gemm)
                return
        for x, bias in (add.operands, reversed(add.operands)):
            if bias.opcode == "broadcast" or _type(bias) in _F8:
                continue
            bitcast = slc = None
            node = x
            if node.opcode == "bitcast" and len(node.users) == 1:
                bitcast, node = node, node.operands[0]
            if node.opcode == "slice" and len(node.users) == 1:
                slc, node = node, node.operands[0]
            if is_gemm(node) and node.shape.is_array and len(node.users) == 1:
                self.fuse_matrix_bias(add, bias, node, bitcast, slc)
                return

    def fuse_vector_bias(self, add: HloInstruction, bcast: HloInstruction, gemm: HloInstruction,
                         slc: HloInstruction | None, bitcast: HloInstruction | None) -> bool:
        """XLA's FuseVectorBiasAdd: add(matmul, broadcast(v)) -> matmul(..., v) with epilogue BIAS,
        when v spans exactly the result's column (rhs free) dims and those are its most minor
        physical dims, in v's own minor-to-major order."""
        if _type(gemm) not in EPILOGUE_FUSION_TYPES:
            return False
        bias = bcast.operands[0]
        cfg = gemm_config(gemm)
        ddn = cfg["dot_dimension_numbers"]
        num_cols = gemm.operands[1].shape.rank - len(ddn["rhs_batch_dimensions"]) \
            - len(ddn["rhs_contracting_dimensions"])
        if not _one_user(gemm) or cfg["epilogue"] != "DEFAULT" or bias.shape.rank != num_cols:
            return False
        bdims = [int(d) for d in bcast.attrs.get("dimensions", ())]
        out_m2m = (bitcast or gemm).shape.minor_to_major
        for i in range(num_cols):
            if out_m2m[i] not in bdims or bias.shape.minor_to_major[i] != bdims.index(out_m2m[i]):
                return False
        new = gemm.clone(new_operands=list(gemm.operands) + [bias], name=gemm_name({}, LT_TARGET))
        gemm_config(new)["epilogue"] = "BIAS"
        result = self.comp.add_instruction(new, before=add)
        for wrapper in (slc, bitcast):
            if wrapper is not None:
                result = self.comp.add_instruction(wrapper.clone(new_operands=[result]), before=add)
        self.comp.replace_instruction(add, result)
        self.changed = True
        return True

    def _broadcast_bias_of_batched_matmul(self, add: HloInstruction) -> HloInstruction:
        """add(bitcast(matmul), broadcast(v)) -> bitcast(add(matmul, bitcast(broadcast(v)))), so
        the broadcast is fused as a matrix bias (cuBLASLt matmuls only, as XLA)."""
        for bc, bcast in _both_orders(add):
            if bc.opcode == "bitcast" and _one_user(bc) and is_cublaslt(bc.operands[0]) \
                    and _one_user(bc.operands[0]) and bcast.opcode == "broadcast" and _one_user(bcast):
                gemm = bc.operands[0]
                new_bias = self.comp.add_new_instruction("bitcast", [bcast], gemm.shape.with_element_type(
                    bcast.shape.element_type), before=add)
                new_add = self.comp.add_new_instruction("add", [gemm, new_bias], gemm.shape, name=add.name,
                                                        before=add)
                back = self.comp.add_new_instruction("bitcast", [new_add], add.shape, before=add)
                self.comp.replace_instruction(add, back)
                self.changed = True
                return new_add
        return add

    def _hoist_bitcast(self, add: HloInstruction) -> HloInstruction:
        """add(bitcast(gemm), c) -> bitcast(add(gemm, bitcast(c))), so the bias can be fused."""
        for bc, bias in (add.operands, reversed(add.operands)):
            if bc.opcode == "bitcast" and len(bc.users) == 1 and is_gemm(bc.operands[0]) \
                    and len(bc.operands[0].users) == 1 and bias.opcode != "broadcast":
                gemm = bc.operands[0]
                new_bias = self.comp.add_new_instruction("bitcast", [bias], gemm.shape, before=add)
                new_add = self.comp.add_new_instruction("add", [gemm, new_bias], gemm.shape, name=add.name,
                                                        before=add)
                back = self.comp.add_new_instruction("bitcast", [new_add], add.shape, before=add)
                self.comp.replace_instruction(add, back)
                self.changed = True
                return new_add
        return add

    def fuse_matrix_bias(self, add: HloInstruction, bias: HloInstruction, gemm: HloInstruction,
                         bitcast: HloInstruction | None = None, slc: HloInstruction | None = None) -> None:
        target = (bitcast or slc or gemm).shape
        if bias.shape.dims != target.dims or not same_m2m(bias.shape, target) or _type(gemm) == "s32":
            return
        if slc is not None and any(s != 0 or st != 1 for s, _l, st in slc.attrs["slice"].dims):
            return
        cfg = gemm_config(gemm)
        can_overwrite = self._can_overwrite(bias)
        if cfg["beta"] != 0 or len(gemm.users) != 1 or cfg["epilogue"] not in ("DEFAULT", "BIAS") \
                or not (can_overwrite or is_cublaslt(gemm)):
            return
        c = self._maybe_constant_fold(bias, add)
        if bitcast is not None:
            inner = (slc or gemm).shape.with_element_type(c.shape.element_type)
            c = self.comp.add_new_instruction("bitcast", [c], inner, before=add)
        c = self._pad_to(c, gemm.shape, add)
        target = gemm.attrs["custom_call_target"]
        fused = gemm.clone(new_operands=list(gemm.operands[:2]) + [c] + list(gemm.operands[2:]),
                           shape=gemm.shape.with_element_type(c.shape.element_type),
                           name=gemm_name(gemm.backend_config_data, target))
        gemm_config(fused)["beta"] = 1
        if target == GEMM_TARGET or can_overwrite:  # cuBLASLt may write elsewhere than c
            fused.attrs["output_to_operand_aliasing"] = OutputOperandAliasing((((), 2, ()),))
        result = self.comp.add_instruction(fused, before=add)
        for wrapper in (slc, bitcast):
            if wrapper is not None:
                result = self.comp.add_instruction(wrapper.clone(new_operands=[result]), before=add)
        self.comp.replace_instruction(add, result)
        self.changed = True

    def _can_overwrite(self, bias: HloInstruction) -> bool:
        if len(bias.users) > 1:
            return False
        if bias.opcode != "parameter":
            return True
        if not bias.parent.is_entry:
            return False
        aliases = bias.parent.parent.header_attr("input_output_alias") if bias.parent.parent else None
        return bool(aliases) and re.search(rf"\(\s*{bias.parameter_number}\s*,", aliases) is not None

    def _maybe_constant_fold(self, bias: HloInstruction, before: HloInstruction) -> HloInstruction:
        """XLA's MaybeConstantFoldBias: reshape/transpose/bitcast of a broadcast non-scalar constant."""
        if bias.opcode not in ("reshape", "transpose", "bitcast") or byte_size(bias.shape) > MAX_BIAS_BYTES:
            return bias
        inner = bias.operands[0]
        if inner.opcode != "broadcast" or inner.operands[0].opcode != "constant" \
                or inner.operands[0].shape.num_elements == 1:
            return bias
        value = try_evaluate(bias)
        if value is None:
            return bias
        return self._constant(value, bias.shape.element_type, bias.shape, before)

    def _constant(self, value, etype, shape: Shape, before: HloInstruction) -> HloInstruction:
        literal = np.asarray(value).astype(etype.np_dtype)
        return self.comp.add_new_instruction("constant", [], shape, literal=literal, name="constant",
                                             before=before)

    def _pad_to(self, x: HloInstruction, target: Shape, before: HloInstruction) -> HloInstruction:
        if x.shape.dims == target.dims:
            return x
        et = x.shape.element_type
        zero = self._constant(0, et, Shape.array(et, ()), before)
        config = PaddingConfig(tuple((0, t - d, 0) for d, t in zip(x.shape.dims, target.dims)))
        shape = target.with_element_type(et)
        return self.comp.add_new_instruction("pad", [x, zero], shape, {"padding": config}, before=before)


def add_workspace(call: HloInstruction, workspace_bytes: int) -> None:
    """XLA's GemmWorkspaceRewriteVisitor: result becomes (result, [aux,] s8[workspace]); legacy
    calls get at most their operands' bytes, cuBLASLt calls LT_WORKSPACE_BYTES."""
    comp = call.parent
    if is_cublaslt(call):
        workspace = LT_WORKSPACE_BYTES
    else:
        workspace = min(workspace_bytes, sum(byte_size(op.shape) for op in call.operands))
    outputs = list(call.shape.tuple_shapes) if call.shape.is_tuple else [call.shape]
    shape = Shape.tuple_of(outputs + [Shape.array("s8", (workspace,))])
    new = call.clone(shape=shape, name=call.name)
    if "output_to_operand_aliasing" in new.attrs:
        new.attrs["output_to_operand_aliasing"] = OutputOperandAliasing((((0,), 2, ()),))
    comp.add_instruction(new, before=call)
    if call.shape.is_tuple:  # an *_AUX epilogue: its get-tuple-elements read the new call
        for user in list(call.users):
            user.replace_operand_with(call, new)
        comp.remove_instruction(call)
        new.name = call.name
        return
    result = comp.add_new_instruction("get-tuple-element", [new], call.shape, {"index": 0}, before=call)
    old_name = call.name
    comp.replace_instruction(call, result)
    new.name = old_name


def _has_workspace(call: HloInstruction) -> bool:
    """Whether the call already returns its workspace: a tuple ending in an s8 array (an *_AUX
    epilogue's (out, aux) pair ends in a float array)."""
    if not call.shape.is_tuple or not call.shape.tuple_shapes:
        return False
    last = call.shape.tuple_shapes[-1]
    return last.is_array and last.element_type.name == "s8"


def lt_types_supported(a: str, b: str, out: str, config: dict) -> bool:
    """XLA's TypesAreSupportedByCublasLt (CUDA, no FP8): the type combination and the algorithm."""
    algorithm = config.get("precision_config", {}).get("algorithm", "ALG_UNSET")
    return (a, b, out) in CUBLASLT_TYPES and algorithm in CUBLASLT_ALGORITHMS


def _vector_bias_operand(x: HloInstruction, bcast: HloInstruction):
    """(matmul, slice, bitcast) when x is OptionalBitcast(OptionalSlice(cuBLASLt matmul)), each
    with one user, and bcast a broadcast (XLA's vector-bias pattern in HandleAdd); else None."""
    if bcast.opcode != "broadcast" or not _one_user(x):
        return None
    node, bitcast, slc = x, None, None
    if node.opcode == "bitcast":
        bitcast, node = node, node.operands[0]
        if not _one_user(node):
            return None
    if node.opcode == "slice":
        slc, node = node, node.operands[0]
    if not is_cublaslt(node) or not node.shape.is_array or not _one_user(node):
        return None
    return node, slc, bitcast


@register_pass
@dataclass
class GemmRewriter(HloPass):
    """Dots become cuBLASLt (or legacy cuBLAS) calls with alpha, bias and ReLU/GELU epilogues fused."""

    name = "cublas-gemm-rewriter"
    gemm_rewrite_size_threshold: int = 100
    workspace_bytes: int = HOPPER_WORKSPACE_BYTES
    enable_cublaslt: bool = True  # XLA's --xla_gpu_enable_cublaslt, on in the XLA the bench compares with

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            changed |= GemmRewriterVisitor(comp, self.gemm_rewrite_size_threshold, self.enable_cublaslt).run()
            for instr in comp.post_order():
                if is_gemm(instr) and instr.parent is comp and not _has_workspace(instr):
                    add_workspace(instr, self.workspace_bytes)
                    changed = True
        return changed
