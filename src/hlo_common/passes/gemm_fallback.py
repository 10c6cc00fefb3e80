"""GemmFallback ("gemm-fallback"): gemm custom calls that cuBLAS cannot run as one legacy GEMM become a
cuBLAS GEMM plus an epilogue kernel, or one kernel (a kLoop fusion of `dot` + epilogue).

Where it sits: hlo-codegen's prepare pipeline (`hlo_codegen.compiler.prepare_pipeline`), before
the fusion wrapper. `hlo_common.gpu.gemm_config.gemm_config_for_custom_call` says which `__cublas$gemm` /
`__cublas$lt$matmul` calls hlo-run's cuBLAS call can run; every other one is rewritten here into
HLO that computes the same thing as `hlo_common.interpreter.gemm_semantics` says.

For the cuda target (`keep_lt_epilogues`) a cuBLASLt call with a BIAS / RELU / GELU epilogue that
cublasLtMatmul computes as the reference does stays one call (a GemmThunk with its epilogue,
`hlo_common.gpu.gemm_config`). Elsewhere, a cuBLASLt call that only its epilogue (BIAS, RELU, GELU,
*_AUX) keeps from cuBLAS (`epilogue_split`) becomes a `__cublas$gemm` call (a GemmThunk: alpha, and beta * c when c can be
the GEMM's initial result) and one kernel for the rest, as XLA:GPU runs the same calls without
cuBLASLt. For 16-bit results the GEMM writes f32 (cuBLAS's bf16 x bf16 -> f32), so the epilogue
rounds once, as the reference does:

    g = (bf16[8,16], s8[W]) custom-call(a, b, v), custom_call_target="__cublas$lt$matmul",
        backend_config={... "alpha_real":2, "epilogue":"BIAS_RELU" ...}
      =>
    m = (f32[8,16], s8[W]) custom-call(a, b), custom_call_target="__cublas$gemm",
        backend_config={... "alpha_real":2, "epilogue":"DEFAULT" ...}
    gemm_epilogue { p0 = f32[8,16] parameter(0), p1 = bf16[16] parameter(1)
      x = add(p0, broadcast(convert(p1)), dimensions={1})      the bias along the minor dims
      ROOT r = convert(maximum(x, broadcast(0))) }            (+ the aux output: x, for *_AUX)
    f = bf16[8,16] fusion(get-tuple-element(m, 0), v), kind=kLoop, calls=gemm_epilogue

Everything else (an s8 GEMM whose sizes are not multiples of 4, mixed operand types such as
bf16 x s4, an amax output, operand layouts cuBLAS cannot read, a c laid out unlike the result)
becomes one kernel, which the emitters' elemental dot runs:

    g = (f32[8,16], f32[], s8[W]) custom-call(a, b, v), custom_call_target="__cublas$lt$matmul",
        backend_config={... "alpha_real":2, "epilogue":"BIAS_RELU", "damax_output":true ...}
      =>
    gemm_fusion { p0, p1, p2
      d = f32[8,16] dot(p0, p1), ...                 operands converted to the result type, then
      s = multiply(d, broadcast(2))                  to f32 for 16-bit floats (one rounding at the end)
      x = add(s, broadcast(p2), dimensions={1})
      ROOT r = maximum(x, broadcast(0)) }            (+ |r| for the amax reduce)
    f = f32[8,16] fusion(a, b, v), kind=kLoop, calls=gemm_fusion

An *_AUX epilogue adds the pre-activation values as a second fusion output; `damax_output` adds
|x| as an output and a top-level max-reduce of it. The call's workspace element becomes zeros (a
memset) where something reads it; the tuple of the call is rebuilt only for users other than
get-tuple-elements.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.errors import HloError
from hlo_common.interpreter.gemm_semantics import (
    ALGORITHM_OPERAND_TYPES, GEMM_CUSTOM_CALL_TARGETS, GemmSemantics, bias_output_dims, parse_gemm_semantics,
)
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.gpu.gemm_config import (
    build_gemm_config, cublas_can_run, gemm_config_for_custom_call, gemm_output_shape, gemm_workspace_index,
)
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.passes._support import global_computations
from hlo_common.passes.call_lowering import CallLowering, ComputationBuilder, once
from hlo_common.hlo.shape import Shape

_DOT_DIM_ATTRS = ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims")
_GELU_C = float(np.sqrt(2.0 / np.pi))


def is_gemm_custom_call(instr: HloInstruction) -> bool:
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in GEMM_CUSTOM_CALL_TARGETS


def lower_unsupported_gemms(module: HloModule, computations: list[HloComputation],
                            lt: bool = False) -> list[HloInstruction]:
    """Rewrite every gemm custom call of `computations` that cuBLAS (with `lt`, or cuBLASLt) cannot
    run; returns the fusions (for a cuBLASLt epilogue, the epilogue's fusion after its new
    `__cublas$gemm` call)."""
    fusions = []
    for comp in computations:
        for instr in list(comp.instructions):
            if is_gemm_custom_call(instr) and gemm_config_for_custom_call(instr, lt) is None:
                split = epilogue_split(instr)
                lowering = GemmLowering(module, comp, instr) if split is None else \
                    EpilogueLowering(module, comp, instr, split)
                fusions.append(lowering.run())
    return fusions


@register_pass
@dataclass
class GemmFallback(HloPass):
    """Gemm custom calls cuBLAS cannot run become a GEMM call + epilogue fusion, or a fusion of dot +
    epilogue."""

    name = "gemm-fallback"
    keep_lt_epilogues: bool = False  # the cuda target: cuBLASLt calls with an epilogue stay one call

    def run(self, module: HloModule) -> bool:
        return bool(lower_unsupported_gemms(module, global_computations(module), self.keep_lt_epilogues))


def accumulation_type(t: PrimitiveType) -> PrimitiveType:
    """The element type the fusion computes in: f32 for narrow floats, the result type otherwise
    (integers wrap in their own type, which equals the reference's wrap of an exact sum)."""
    return PRIMITIVE_TYPES["f32"] if t.is_low_precision_float else t


class GemmLowering(CallLowering):
    """One gemm custom call -> fusion (+ amax reduce, workspace zeros, tuple)."""

    def __init__(self, module: HloModule, comp: HloComputation, call: HloInstruction):
        super().__init__(module, comp, call)
        self.sem: GemmSemantics = parse_gemm_semantics(call)
        self.out = gemm_output_shape(call)
        self.t = self.out.element_type
        self.acc = accumulation_type(self.t)

    fusion_name = "gemm_fusion"

    def run(self) -> HloInstruction:
        body = HloComputation(self.module.unique_computation_name(f"{self.call.name}_{self.fusion_name}"))
        roots = self._emit_body(ComputationBuilder(body))
        if len(roots) == 1:
            body.root = roots[0]
        else:
            body.root = ComputationBuilder(body).add("tuple", roots, Shape.tuple_of([r.shape for r in roots]))
        self._add_computation(body)
        fusion = self._top("fusion", self._fusion_operands(), body.root.shape,
                           {"kind": "kLoop", "calls": body}, name=self.fusion_name)
        outputs = [fusion] if len(roots) == 1 else [
            self._top("get-tuple-element", [fusion], r.shape, {"index": k}) for k, r in enumerate(roots)]
        if not self.call.shape.is_tuple:
            self._replace(self.call, outputs[0])
            return fusion
        self._replace_tuple_call(self._leaves(outputs))
        return fusion

    # -- the fused computation --------------------------------------------------------------------------
    def _operand(self, b: ComputationBuilder, p: HloInstruction, rounds: bool) -> HloInstruction:
        x = p
        rounded = ALGORITHM_OPERAND_TYPES.get(self.sem.algorithm) if rounds else None
        if rounded is not None and x.shape.element_type.is_float:
            x = b.convert(x, PRIMITIVE_TYPES[rounded])
        return b.convert(b.convert(x, self.t), self.acc)

    def _fusion_operands(self) -> list[HloInstruction]:
        return list(self.call.operands)

    def _emit_body(self, b: ComputationBuilder) -> list[HloInstruction]:
        sem = self.sem
        params = [b.add("parameter", [], op.shape, parameter_number=i)
                  for i, op in enumerate(self.call.operands)]
        roles = sem.operand_roles()
        lhs, rhs = (self._operand(b, params[roles[r]], True) for r in ("lhs", "rhs"))
        attrs = {k: tuple(v) for k, v in zip(_DOT_DIM_ATTRS, sem.dims) if v}
        x = b.add("dot", [lhs, rhs], self.out.with_element_type(self.acc), attrs)
        if sem.alpha != 1:
            alpha = sem.alpha if self.acc.is_complex else sem.alpha.real
            x = b.binary("multiply", x, b.scalar_like(alpha, x))
        return self._epilogue(b, x, {r: params[i] for r, i in roles.items() if r in ("c", "bias")})

    def _epilogue(self, b: ComputationBuilder, x: HloInstruction,
                  params: dict[str, HloInstruction]) -> list[HloInstruction]:
        """The roots after `x` = alpha * dot in the accumulation type: + beta * c (when `params`
        holds c) + bias, the activation, rounded once to the result type; aux and |x| outputs."""
        sem, info = self.sem, self.sem.epilogue_info
        if "c" in params:
            c = self._operand(b, params["c"], False)
            x = b.binary("add", x, b.binary("multiply", b.scalar_like(sem.beta, c), c))
        if "bias" in params:
            x = b.binary("add", x, self._bias(b, self._operand(b, params["bias"], False), x))
        pre = x
        if info.activation == "relu":
            x = b.binary("maximum", x, b.scalar_like(0, x))
        elif info.activation == "gelu":
            x = self._gelu(b, x)
        roots = [b.convert(x, self.t)]
        if info.has_aux:
            aux_type = self._aux_shape().element_type
            roots.append(b.convert(pre, aux_type))
        if sem.damax_output:
            f32 = b.convert(x, PRIMITIVE_TYPES["f32"])
            roots.append(b.add("abs", [f32], f32.shape))
        return roots

    def _bias(self, b: ComputationBuilder, bias: HloInstruction, like: HloInstruction) -> HloInstruction:
        """The bias broadcast as cuBLASLt adds it (`gemm_semantics.add_bias`): read in its memory
        order, along the result's most minor physical dims. The bias is put in that order
        (transpose), split into those dims (reshape), ordered as the result (transpose) and
        broadcast."""
        out, et = self.out, bias.shape.element_type
        dims = bias_output_dims(out.minor_to_major, out.dims, bias.shape.num_elements)
        if dims is None:
            raise HloError(f"%{self.call.name}: its bias of {bias.shape.num_elements} elements does not "
                           f"span the most minor dims of its result {out}")
        major_first = list(reversed(dims))
        if bias.shape.rank > 1 and bias.shape.layout is not None and not bias.shape.layout.is_default():
            order = tuple(reversed(bias.shape.minor_to_major))
            bias = b.add("transpose", [bias], Shape.array(et, [bias.shape.dims[d] for d in order]),
                         {"dimensions": order})
        split = tuple(out.dims[d] for d in major_first)
        if bias.shape.dims != split:
            bias = b.add("reshape", [bias], Shape.array(et, split))
        ascending = sorted(major_first)
        if ascending != major_first:
            perm = tuple(major_first.index(d) for d in ascending)
            bias = b.add("transpose", [bias], Shape.array(et, [out.dims[d] for d in ascending]),
                         {"dimensions": perm})
        return b.add("broadcast", [bias], like.shape, {"dimensions": tuple(ascending)})

    def _gelu(self, b: ComputationBuilder, x: HloInstruction) -> HloInstruction:
        """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x*x*x))), in this order."""
        cube = b.binary("multiply", b.binary("multiply", x, x), x)
        inner = b.binary("add", x, b.binary("multiply", b.scalar_like(0.044715, x), cube))
        t = b.add("tanh", [b.binary("multiply", b.scalar_like(_GELU_C, x), inner)], x.shape)
        half_x = b.binary("multiply", b.scalar_like(0.5, x), x)
        return b.binary("multiply", half_x, b.binary("add", b.scalar_like(1, x), t))

    # -- the call's result --------------------------------------------------------------------------------
    def _aux_shape(self) -> Shape:
        shape = self.call.shape
        return shape.tuple_shapes[1] if shape.is_tuple and len(shape.tuple_shapes) > 1 else self.out

    def _leaves(self, outputs: list[HloInstruction]) -> list:
        """One maker per element of the call's tuple result (the interpreter's order: result, aux,
        amax, zeros); leaves are made on first use, so an unread workspace costs nothing."""
        pending = list(outputs[1:])
        leaves = [lambda out=outputs[0]: out]
        has_aux, damax = self.sem.epilogue_info.has_aux, self.sem.damax_output
        for leaf in self.call.shape.tuple_shapes[1:]:
            if has_aux:
                leaves.append(once(lambda out=pending.pop(0): out))
                has_aux = False
            elif damax and leaf.rank == 0 and leaf.element_type.name == "f32":
                leaves.append(once(lambda out=pending.pop(0): self._amax(out)))
                damax = False
            else:
                leaves.append(once(lambda shape=leaf: self._zeros(shape)))
        return leaves

    def _amax(self, abs_values: HloInstruction) -> HloInstruction:
        f32 = PRIMITIVE_TYPES["f32"]
        reducer = HloComputation(self.module.unique_computation_name("amax_max"))
        rb = ComputationBuilder(reducer)
        a, c = (rb.add("parameter", [], Shape.array(f32, ()), parameter_number=i) for i in range(2))
        reducer.root = rb.add("maximum", [a, c], Shape.array(f32, ()))
        self.module.computations.insert(self.module.computations.index(self.comp), reducer)
        reducer.parent = self.module
        init = self._top("constant", [], Shape.array(f32, ()), literal=np.zeros((), np.float32))
        return self._top("reduce", [abs_values, init], Shape.array(f32, ()),
                         {"dimensions": tuple(range(abs_values.shape.rank)), "to_apply": reducer})


# -- cuBLASLt epilogues: a cuBLAS GEMM, then one kernel ------------------------------------------------
# Result types cuBLASLt fuses an epilogue into (XLA's SupportsEpilogueFusion, FP8 aside: hlo-run
# has no FP8 GEMM).
_EPILOGUE_RESULT_TYPES = frozenset({"f16", "bf16", "f32", "f64"})
_OPERAND_NUMBERED_ATTRS = ("output_to_operand_aliasing", "operand_layout_constraints")


@dataclass(frozen=True)
class EpilogueSplit:
    """How a cuBLASLt call with an epilogue runs as a legacy cuBLAS GEMM plus an epilogue kernel."""

    gemm_result: Shape  # the call's result in the accumulation type (f32 for 16-bit floats)
    keeps_c: bool  # beta * c stays in the GEMM (c is the result's shape and type, same layout)


def epilogue_split(call: HloInstruction) -> EpilogueSplit | None:
    """The split of a gemm custom call cuBLAS cannot run only because of its epilogue, or None.

    The GEMM computes alpha * dot (+ beta * c) in the accumulation type, which for 16-bit floats
    is f32 (cuBLAS's bf16 x bf16 -> f32), so the kernel rounds once, as the reference does; c moves
    into the kernel when the GEMM's result type is not c's. Declined (the whole call becomes one
    kernel): amax outputs, non-float results, and calls that stay unrunnable with the DEFAULT
    epilogue (operand types, layouts, algorithms)."""
    sem = parse_gemm_semantics(call)
    out = gemm_output_shape(call)
    if (sem.epilogue == "DEFAULT" or sem.damax_output or not out.is_array
            or out.element_type.name not in _EPILOGUE_RESULT_TYPES):
        return None
    plain = replace(sem, epilogue="DEFAULT")
    lhs, rhs = call.operands[0].shape, call.operands[1].shape
    alpha = (sem.alpha_real, sem.alpha_imag)
    # The operands as the reference converts them (to the result type) must be what cuBLAS reads.
    if not cublas_can_run(plain, lhs) or build_gemm_config(lhs, rhs, out, sem.dims, alpha, sem.beta) is None:
        return None
    result = out.with_element_type(accumulation_type(out.element_type))
    roles = sem.operand_roles()
    keeps_c = "c" in roles and call.operands[roles["c"]].shape.to_string() == result.to_string()
    if build_gemm_config(lhs, rhs, result, sem.dims, alpha, sem.beta if keeps_c else 0.0) is None:
        return None
    return EpilogueSplit(result, keeps_c)


class EpilogueLowering(GemmLowering):
    """One cuBLASLt call with an epilogue -> a `__cublas$gemm` call (a GemmThunk) and a kLoop fusion
    of the epilogue reading its result (+ workspace zeros and tuple, as GemmLowering)."""

    fusion_name = "gemm_epilogue"

    def __init__(self, module: HloModule, comp: HloComputation, call: HloInstruction, split: EpilogueSplit):
        super().__init__(module, comp, call)
        self.split = split

    def _fusion_operands(self) -> list[HloInstruction]:
        call, split, roles = self.call, self.split, self.sem.operand_roles()
        operands = [call.operands[roles["lhs"]], call.operands[roles["rhs"]]]
        if split.keeps_c:
            operands.append(call.operands[roles["c"]])
        ws = gemm_workspace_index(call)
        shape = split.gemm_result
        if ws is not None:
            shape = Shape.tuple_of([shape, call.shape.tuple_shapes[ws[0]]])
        # Operand-numbered attributes may not fit the new operands; out over c ({0}: (2, {})) does
        # when c stays and the result is still a tuple.
        attrs = {k: v for k, v in call.attrs.items() if k not in _OPERAND_NUMBERED_ATTRS}
        if split.keeps_c and ws is not None and "output_to_operand_aliasing" in call.attrs:
            attrs["output_to_operand_aliasing"] = call.attrs["output_to_operand_aliasing"]
        attrs["custom_call_target"] = "__cublas$gemm"
        gemm = self._top("custom-call", operands, shape, attrs, name="cublas-gemm")
        gemm.backend_config_data = self._gemm_backend_config()
        gemm.metadata = list(call.metadata)
        result = gemm if ws is None else \
            self._top("get-tuple-element", [gemm], split.gemm_result, {"index": 0})
        return [result] + [call.operands[roles[r]] for r in list(self._epilogue_operand_shapes())[1:]]

    def _gemm_backend_config(self) -> dict:
        data = copy.deepcopy(self.call.backend_config_data)
        inner = data["gemm_backend_config"] if isinstance(data.get("gemm_backend_config"), dict) else data
        inner["epilogue"] = "DEFAULT"
        if not self.split.keeps_c:
            inner["beta"] = 0
        return data

    def _emit_body(self, b: ComputationBuilder) -> list[HloInstruction]:
        operands = self._epilogue_operand_shapes()
        params = [b.add("parameter", [], shape, parameter_number=i)
                  for i, shape in enumerate(operands.values())]
        named = dict(zip(operands, params))
        return self._epilogue(b, named.pop("gemm"), named)

    def _epilogue_operand_shapes(self) -> dict[str, Shape]:
        roles = self.sem.operand_roles()
        shapes = {"gemm": self.split.gemm_result}
        for r in ("c", "bias"):
            if r in roles and not (r == "c" and self.split.keeps_c):
                shapes[r] = self.call.operands[roles[r]].shape
        return shapes
