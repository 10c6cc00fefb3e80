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

The custom call's format (targets, operands, result, backend config) is documented in
`hlo_opt.matmul_utils`, with the type tables and the matrix-multiplication queries.

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
from hlo_opt.matmul_utils import (
    CLASSICAL_EMITTER_TYPES, EPILOGUE_FUSION_TYPES, F8_TYPES, GEMM_TARGET, HOPPER_WORKSPACE_BYTES,
    LEGACY_CUBLAS_TYPES, LT_MAX_BATCH_COUNT, LT_TARGET, LT_WORKSPACE_BYTES, MAX_BIAS_BYTES, dot_dims,
    element_type, gemm_backend_config, gemm_config, gemm_name, is_cublaslt, is_gemm, is_matrix_multiplication,
    is_matrix_vector_multiplication, is_rank2_transpose, json_number, lt_types_supported,
    too_small_for_rewriting,
)
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.gemm_patterns import (
    both_orders, is_approximate_gelu_cdf, is_broadcast_scalar, one_user, scalar_constant, vector_bias_operand,
)


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
        if too_small_for_rewriting(dot, self.threshold) and element_type(dot) in CLASSICAL_EMITTER_TYPES:
            return
        if any(is_rank2_transpose(op) for op in dot.operands):
            return
        if element_type(dot.operands[0]) in F8_TYPES and element_type(dot.operands[1]) in F8_TYPES:
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
        if not self.enable_cublaslt or any(element_type(op) == "s8" for op in operands):
            return GEMM_TARGET
        types = (element_type(operands[0]), element_type(operands[1]), element_type(dot))
        if not lt_types_supported(*types, config):
            return GEMM_TARGET
        lhs = operands[0].shape
        batch = int(np.prod([lhs.dims[d] for d in dot_dims(dot, "lhs_batch_dims")]))
        return GEMM_TARGET if batch > LT_MAX_BATCH_COUNT else LT_TARGET

    def _convert(self, op: HloInstruction, etype: str, before: HloInstruction) -> HloInstruction:
        shape = op.shape.with_element_type(etype)
        return self.comp.add_new_instruction("convert", [op], shape, before=before)

    def _f8_dot_as_f16(self, dot: HloInstruction) -> HloInstruction:
        """XLA's TurnF8DotIntoF16Dot: f16 (bf16 for a bf16 result) operands, f8 results converted back."""
        etype = "bf16" if element_type(dot) == "bf16" else "f16"
        operands = [self._convert(op, etype, dot) for op in dot.operands]
        if element_type(dot) not in F8_TYPES:
            new = dot.clone(new_operands=operands, name=dot.name)
            self.comp.add_instruction(new, before=dot)
            self.comp.replace_instruction(dot, new)
            return new
        new = dot.clone(new_operands=operands, shape=dot.shape.with_element_type("f16"), name=dot.name)
        self.comp.add_instruction(new, before=dot)
        self.comp.replace_instruction(dot, self._convert(new, element_type(dot), dot))
        return new

    # -- alpha ---------------------------------------------------------------------------------------
    def handle_multiply(self, mul: HloInstruction) -> None:
        for gemm, bcast in (mul.operands, reversed(mul.operands)):
            if not (is_gemm(gemm) and gemm.shape.is_array and len(gemm.users) == 1
                    and bcast.opcode == "broadcast" and len(bcast.users) == 1):
                continue
            scalar = scalar_constant(bcast.operands[0])
            if scalar is None or element_type(gemm) == "s32":
                return
            cfg = gemm_config(gemm)
            if cfg["beta"] != 0:
                return
            alpha = scalar * complex(cfg["alpha_real"], cfg["alpha_imag"])
            cfg["alpha_real"], cfg["alpha_imag"] = json_number(alpha.real), json_number(alpha.imag)
            self.comp.replace_instruction(mul, gemm)
            self.changed = True
            return
        for x, cdf in both_orders(mul):
            wrapper, gemm = (x, x.operands[0]) if x.opcode in ("slice", "bitcast") else (None, x)
            if is_cublaslt(gemm) and gemm.shape.is_array and one_user(cdf) \
                    and is_approximate_gelu_cdf(cdf, x):
                self.fuse_gelu(mul, gemm, wrapper)
                return

    # -- activations -------------------------------------------------------------------------------
    def handle_maximum(self, mx: HloInstruction) -> None:
        """maximum(cuBLASLt matmul, or a slice or bitcast of one, broadcast(0)) -> RELU epilogue."""
        for x, zeros in both_orders(mx):
            if not one_user(x) or not is_broadcast_scalar(zeros, 0.0):
                continue
            wrapper, gemm = (x, x.operands[0]) if x.opcode in ("slice", "bitcast") else (None, x)
            if is_cublaslt(gemm) and gemm.shape.is_array and one_user(gemm):
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
        if epilogue is None or element_type(gemm) not in EPILOGUE_FUSION_TYPES:
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
        if element_type(gemm) not in EPILOGUE_FUSION_TYPES:
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
        for x, bcast in both_orders(add):
            matched = vector_bias_operand(x, bcast)
            if matched is not None and self.fuse_vector_bias(add, bcast, *matched):
                return
        add = self._broadcast_bias_of_batched_matmul(add)
        add = self._hoist_bitcast(add)
        for x, bias in (add.operands, reversed(add.operands)):
            converted = x.opcode == "convert" and len(x.users) == 1
            gemm = x if is_gemm(x) else (x.operands[0] if converted else None)
            if gemm is None or not is_gemm(gemm) or len(gemm.users) != 1 or bias.opcode == "broadcast":
                continue
            a, b, out = element_type(gemm.operands[0]), element_type(gemm.operands[1]), element_type(add)
            supported = lt_types_supported(a, b, out, gemm_config(gemm)) if is_cublaslt(gemm) \
                else (a, b, out) in LEGACY_CUBLAS_TYPES
            consumers_ok = element_type(add) == element_type(gemm) or not add.users or (
                len(add.users) == 1 and add.users[0].opcode == "tuple" and not add.users[0].users)
            if supported and consumers_ok:
                self.fuse_matrix_bias(add, bias, gemm)
                return
        for x, bias in (add.operands, reversed(add.operands)):
            if bias.opcode == "broadcast" or element_type(bias) in F8_TYPES:
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
        if element_type(gemm) not in EPILOGUE_FUSION_TYPES:
            return False
        bias = bcast.operands[0]
        cfg = gemm_config(gemm)
        ddn = cfg["dot_dimension_numbers"]
        num_cols = gemm.operands[1].shape.rank - len(ddn["rhs_batch_dimensions"]) \
            - len(ddn["rhs_contracting_dimensions"])
        if not one_user(gemm) or cfg["epilogue"] != "DEFAULT" or bias.shape.rank != num_cols:
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
        for bc, bcast in both_orders(add):
            if bc.opcode == "bitcast" and one_user(bc) and is_cublaslt(bc.operands[0]) \
                    and one_user(bc.operands[0]) and bcast.opcode == "broadcast" and one_user(bcast):
                gemm = bc.operands[0]
                return self._add_in_gemm_shape(add, gemm, bcast,
                                               gemm.shape.with_element_type(bcast.shape.element_type))
        return add

    def _hoist_bitcast(self, add: HloInstruction) -> HloInstruction:
        """add(bitcast(gemm), c) -> bitcast(add(gemm, bitcast(c))), so the bias can be fused."""
        for bc, bias in (add.operands, reversed(add.operands)):
            if bc.opcode == "bitcast" and len(bc.users) == 1 and is_gemm(bc.operands[0]) \
                    and len(bc.operands[0].users) == 1 and bias.opcode != "broadcast":
                gemm = bc.operands[0]
                return self._add_in_gemm_shape(add, gemm, bias, gemm.shape)
        return add

    def _add_in_gemm_shape(self, add: HloInstruction, gemm: HloInstruction, bias: HloInstruction,
                           bias_shape: Shape) -> HloInstruction:
        """add(bitcast(gemm), bias) -> bitcast(add(gemm, bitcast(bias))): the add in the gemm's own
        shape, where the bias can be fused; returns the new add."""
        new_bias = self.comp.add_new_instruction("bitcast", [bias], bias_shape, before=add)
        new_add = self.comp.add_new_instruction("add", [gemm, new_bias], gemm.shape, name=add.name,
                                                before=add)
        back = self.comp.add_new_instruction("bitcast", [new_add], add.shape, before=add)
        self.comp.replace_instruction(add, back)
        self.changed = True
        return new_add

    def fuse_matrix_bias(self, add: HloInstruction, bias: HloInstruction, gemm: HloInstruction,
                         bitcast: HloInstruction | None = None, slc: HloInstruction | None = None) -> None:
        target = (bitcast or slc or gemm).shape
        if bias.shape.dims != target.dims or not same_m2m(bias.shape, target) or element_type(gemm) == "s32":
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
