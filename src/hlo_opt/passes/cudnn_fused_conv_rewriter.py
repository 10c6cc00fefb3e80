"""CudnnFusedConvRewriter ("cudnn-fused-convolution-rewriter"): folds what follows a forward cuDNN
convolution into one `__cudnn$convBiasActivationForward` call
(`xla/backends/gpu/transforms/cudnn_fused_conv_rewriter.cc`).

Where it sits: "conv_canonicalization", right after `cudnn-conv-rewriter`. cuDNN computes
`activation(conv_result_scale * conv + side_input_scale * side_input + bias)`; the pass matches,
inside out and in XLA's order:

    alpha:      multiply(gte(conv), broadcast(constant a))   -> conv_result_scale = a
    bias:       add(gte(conv), broadcast(b, {feature dim}))   -> operand 2 = b (rank-0 b broadcast)
    side input: add(gte(conv), s)                             -> operand 3 = s, side_input_scale = 1
    side alpha: operand 3 = reshapes/transposes(multiply(s, broadcast(constant a)))  -> scale a
    relu:       maximum(gte(conv), broadcast(0))              -> activation kRelu
    f16:        convert<f16>(gte(f32 conv of values f16 holds exactly)) -> an f16 conv

then bias, side input and relu once more (for f16 convs whose epilogue follows the convert).
elu, relu6 and leaky relu (f16 convs with even channel counts, no side input) need cuDNN's
runtime fusion, which XLA enables only with `--xla_gpu_use_runtime_fusion` (off by default):
here the option `use_runtime_fusion`. Depthwise convolutions (input features = groups) are never
fused (cuDNN's fused kernels are slower for them); bias and side input are not added after an
activation; everything fused must have been the conv's only use.

Not written: the f8 graph convolutions and the s8 conversions (FuseConvertToS8,
FuseRemoveConvertInConv); integer convolutions stay as `cudnn-conv-rewriter` wrote them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hlo_common.cli_util import NOTES_LOGGER
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.cudnn_conv_utils import BIAS_ACTIVATION, CALL_NAMES, FORWARD, is_forward_conv

_LOG = logging.getLogger(NOTES_LOGGER)
F16, F32, F64, S8 = (PRIMITIVE_TYPES[t] for t in ("f16", "f32", "f64", "s8"))


def _config(conv: HloInstruction) -> dict:
    return conv.backend_config_data["cudnn_conv_backend_config"]


def is_depthwise(conv: HloInstruction) -> bool:
    groups = int(conv.attrs.get("feature_group_count", 1) or 1)
    features = conv.operands[0].shape.dims[conv.attrs["dim_labels"].input_feature]
    return groups > 1 and features == groups


def _non_depthwise(conv: HloInstruction) -> bool:
    return is_forward_conv(conv) and not is_depthwise(conv)


def _scalar_constant(instr: HloInstruction) -> float | None:
    """The value of a one-element constant (XLA's ConstantEffectiveScalar), else None."""
    if instr.opcode != "constant" or not instr.shape.is_array or instr.shape.num_elements != 1:
        return None
    lit = np.asarray(instr.literal)
    return None if lit.size != 1 else lit.reshape(-1)[0].item()


def _broadcast_scalar(instr: HloInstruction, value: float | None = None) -> HloInstruction | None:
    """The constant of `broadcast(constant)` (equal to `value` when given), else None."""
    if instr.opcode != "broadcast" or not instr.operands:
        return None
    v = _scalar_constant(instr.operands[0])
    if v is None or (value is not None and v != value):
        return None
    return instr.operands[0]


def _preserves_values(src: PrimitiveType, dst: PrimitiveType) -> bool:
    """XLA's primitive_util::CastPreservesValues for the types convolutions meet."""
    if src is dst:
        return True
    if src.is_float and dst.is_float:
        widths = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}
        a, b = widths.get(src.name), widths.get(dst.name)
        return a is not None and b is not None and a[0] <= b[0] and a[1] <= b[1]
    if src.is_integer and dst.is_float:
        digits = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}.get(dst.name, 0)
        return src.bits - (1 if src.is_signed else 0) <= digits
    if src.is_integer and dst.is_integer:
        return (src.is_signed == dst.is_signed and src.bits <= dst.bits) or (
            not src.is_signed and dst.is_signed and src.bits < dst.bits)
    return False


def lossless_to(instr: HloInstruction, t: PrimitiveType) -> bool:
    """XLA's IsLosslesslyConvertibleTo: `instr`'s values survive a round trip through type `t`."""
    if instr.shape.element_type is t:
        return True
    if instr.opcode == "convert" and instr.operands[0].shape.element_type is t:
        return _preserves_values(t, instr.shape.element_type)
    if instr.opcode == "constant" and instr.shape.is_array and instr.literal is not None:
        lit = np.asarray(instr.literal)
        with np.errstate(all="ignore"):
            back = lit.astype(t.np_dtype).astype(lit.dtype)
        return bool(np.array_equal(back, lit, equal_nan=lit.dtype.kind == "f"))
    if instr.opcode in ("broadcast", "reshape", "transpose"):
        return lossless_to(instr.operands[0], t)
    return False


def _conv_of_gte(gte: HloInstruction, pred: Callable[[HloInstruction], bool],
                 index: int | None = 0) -> HloInstruction | None:
    if gte.opcode != "get-tuple-element" or (index is not None and int(gte.attrs.get("index", -1)) != index):
        return None
    conv = gte.operands[0]
    return conv if pred(conv) else None


class _Fuser:
    """The fusions of one computation; each method is one of XLA's Fuse* functions."""

    def __init__(self, module: HloModule, comp: HloComputation, use_runtime_fusion: bool):
        self.module, self.comp, self.runtime = module, comp, use_runtime_fusion

    def each(self, fuse: Callable[[HloInstruction], bool]) -> bool:
        changed = False
        for instr in self.comp.post_order():
            if instr.parent is self.comp:
                changed |= bool(fuse(instr))
        return changed

    def _replace_conv(self, conv: HloInstruction, operands: list[HloInstruction],
                      shape: Shape | None = None, target: str | None = None) -> HloInstruction:
        new = conv.clone_with_new_operands(operands, shape=shape or conv.shape)
        if target is not None:
            new.attrs["custom_call_target"] = target
        new.name = self.comp.unique_name(CALL_NAMES[target] if target else conv.name)
        self.comp.add_instruction(new, before=conv)
        return new

    def ensure_bias_activation(self, conv: HloInstruction) -> HloInstruction:
        """XLA's EnsureIsConvBiasActivation: a forward call gains a zero bias."""
        if conv.attrs["custom_call_target"] == BIAS_ACTIVATION:
            return conv
        result = conv.shape.tuple_shapes[0]
        bias_t = F32 if result.element_type.is_integer else result.element_type
        features = result.dims[conv.attrs["dim_labels"].output_feature]
        zero = self.comp.add_new_instruction("constant", [], Shape.array(bias_t, ()), before=conv,
                                             literal=np.zeros((), bias_t.np_dtype))
        bias = self.comp.add_new_instruction("broadcast", [zero], Shape.array(bias_t, (features,)),
                                             {"dimensions": ()}, before=conv)
        new = self._replace_conv(conv, list(conv.operands) + [bias], target=BIAS_ACTIVATION)
        self.comp.replace_instruction(conv, new)
        return new

    def _gte(self, conv: HloInstruction, like: HloInstruction) -> HloInstruction:
        return self.comp.add_new_instruction("get-tuple-element", [conv], conv.shape.tuple_shapes[0],
                                             {"index": 0}, before=like)

    # -- alpha, bias, side input -------------------------------------------------------------------
    def conv_alpha(self, instr: HloInstruction) -> bool:
        if instr.opcode != "multiply":
            return False
        for gte, other in (instr.operands, instr.operands[::-1]):
            conv = _conv_of_gte(gte, _non_depthwise)
            alpha = _broadcast_scalar(other)
            if conv is None or alpha is None or len(gte.users) != 1:
                continue
            alpha_t = F64 if gte.shape.element_type is F64 else F32
            if not lossless_to(alpha, alpha_t) or _config(conv)["conv_result_scale"] != 1:
                continue
            conv = self.ensure_bias_activation(conv)
            _config(conv)["conv_result_scale"] = _number(_scalar_constant(alpha))
            self.comp.replace_instruction(instr, gte)
            return True
        return False

    def bias_or_side_input(self, instr: HloInstruction) -> bool:
        if instr.opcode != "add":
            return False
        for gte, addend in (instr.operands, instr.operands[::-1]):
            conv = _conv_of_gte(gte, _non_depthwise)
            if conv is not None and len(gte.users) == 1 and len(conv.users) == 1:
                return self._fuse_addend(instr, conv, gte, addend)
        return False

    def _fuse_addend(self, instr: HloInstruction, conv: HloInstruction, gte: HloInstruction,
                     addend: HloInstruction) -> bool:
        if _config(conv)["activation_mode"] != "kNone":
            return False
        ops = conv.operands
        can_bias = len(ops) < 3 or _broadcast_scalar(ops[2], 0) is not None
        can_side = len(ops) < 4
        conv_t = gte.shape.element_type
        bias_t = conv_t if conv_t.is_float else F32
        is_bcast = addend.opcode == "broadcast" and lossless_to(addend, bias_t)
        dims = tuple(addend.attrs.get("dimensions", ())) if is_bcast else None
        rank1 = is_bcast and dims == (conv.attrs["dim_labels"].output_feature,)
        rank0 = is_bcast and dims == ()
        conv = self.ensure_bias_activation(conv)
        operands = list(conv.operands)
        if can_bias and (rank1 or rank0):
            bias = self._convert(addend.operands[0], bias_t, conv)
            if rank0:
                features = gte.shape.dims[conv.attrs["dim_labels"].output_feature]
                bias = self.comp.add_new_instruction("broadcast", [bias], Shape.array(bias_t, (features,)),
                                                     {"dimensions": ()}, before=conv)
            operands[2] = bias
        elif can_side:
            operands.append(addend)
        else:
            return False
        new = self._replace_conv(conv, operands)
        if len(operands) == 4 and operands[3] is addend:
            _config(new)["side_input_scale"] = 1
        self.comp.replace_instruction(instr, self._gte(new, instr))
        return True

    def _convert(self, x: HloInstruction, t: PrimitiveType, before: HloInstruction) -> HloInstruction:
        if x.shape.element_type is t:
            return x
        return self.comp.add_new_instruction("convert", [x], x.shape.with_element_type(t), before=before)

    def side_input_alpha(self, conv: HloInstruction) -> bool:
        if not is_forward_conv(conv) or len(conv.operands) < 4 or _config(conv)["side_input_scale"] != 1:
            return False
        chain, base = [], conv.operands[3]
        while base.opcode in ("reshape", "transpose"):
            chain.append(base)
            base = base.operands[0]
        alpha_t = F64 if conv.shape.tuple_shapes[0].element_type is F64 else F32
        if base.opcode != "multiply":
            return False
        for x, other in (base.operands, base.operands[::-1]):
            alpha = _broadcast_scalar(other)
            if alpha is None or not lossless_to(alpha, alpha_t):
                continue
            for link in reversed(chain):  # the reshapes/transposes again, on the unscaled input
                x = self.comp.add_instruction(link.clone_with_new_operands([x]), before=conv)
                x.name = self.comp.unique_name(link.name)
            new = self._replace_conv(conv, list(conv.operands[:3]) + [x])
            _config(new)["side_input_scale"] = _number(_scalar_constant(alpha))
            self.comp.replace_instruction(conv, new)
            return True
        return False

    # -- activations and the f16 conversion ----------------------------------------------------------
    def _activate(self, instr: HloInstruction, gte: HloInstruction, conv: HloInstruction, mode: str,
                  alpha: float | None = None) -> bool:
        if _config(conv)["activation_mode"] != "kNone":
            return False
        conv = self.ensure_bias_activation(conv)
        _config(conv)["activation_mode"] = mode
        if alpha is not None:
            _config(conv)["leakyrelu_alpha"] = _number(alpha)
        self.comp.replace_instruction(instr, gte)
        return True

    def relu(self, instr: HloInstruction) -> bool:
        if instr.opcode != "maximum":
            return False
        for zero, gte in (instr.operands, instr.operands[::-1]):
            conv = _conv_of_gte(gte, _non_depthwise, index=None)
            if (conv is not None and _broadcast_scalar(zero, 0) is not None and len(gte.users) == 1
                    and len(conv.users) == 1):
                return self._activate(instr, gte, conv, "kRelu")
        return False

    def relu6(self, instr: HloInstruction) -> bool:
        if instr.opcode != "clamp" or not self.runtime:
            return False
        lo, gte, hi = instr.operands
        conv = _conv_of_gte(gte, _non_depthwise, index=None)
        if (conv is None or gte.shape.element_type is not F16 or len(gte.users) != 1 or len(conv.users) != 1
                or _broadcast_scalar(lo, 0) is None or _broadcast_scalar(hi, 6) is None
                or not _runtime_fusible(conv)):
            return False
        return self._activate(instr, gte, conv, "kRelu6")

    def elu_or_leaky_relu(self, instr: HloInstruction) -> bool:
        """select(gte > 0, gte, expm1(gte)) -> kElu; select(gte > 0, gte, gte * a) -> kLeakyRelu."""
        if instr.opcode != "select" or not self.runtime:
            return False
        cmp, gte, neg = instr.operands
        conv = _conv_of_gte(gte, _non_depthwise)
        if (conv is None or gte.shape.element_type is not F16 or len(conv.users) != 1
                or cmp.opcode != "compare" or str(cmp.attrs.get("direction")) != "GT"
                or cmp.operands[0] is not gte or _broadcast_scalar(cmp.operands[1], 0) is None
                or len(gte.users) != 3 or len(cmp.users) != 1 or len(neg.users) != 1
                or not _runtime_fusible(conv)):
            return False
        if neg.opcode == "exponential-minus-one" and neg.operands[0] is gte:
            return self._activate(instr, gte, conv, "kElu")
        alpha = _broadcast_scalar(neg.operands[1]) if neg.opcode == "multiply" else None
        if alpha is not None and neg.operands[0] is gte:
            return self._activate(instr, gte, conv, "kLeakyRelu", _scalar_constant(alpha))
        return False

    def remove_convert(self, instr: HloInstruction) -> bool:
        """XLA's FuseRemoveConvertInConv: convert<f32>(gte(s32 or s8 conv)) and convert<s8>(gte(f32
        conv)) become a conv of the converted type."""
        if instr.opcode != "convert":
            return False
        gte = instr.operands[0]
        conv = _conv_of_gte(gte, is_forward_conv)
        pair = (gte.shape.element_type.name, instr.shape.element_type.name)
        if conv is None or len(gte.users) != 1 or pair not in (("s32", "f32"), ("s8", "f32"), ("f32", "s8")):
            return False
        result = instr.shape.with_layout(gte.shape.layout)
        shape = Shape.tuple_of([result] + list(conv.shape.tuple_shapes[1:]))
        new = conv.clone_with_new_operands(list(conv.operands), shape=shape)
        new.name = self.comp.unique_name(conv.name)
        self.comp.add_instruction(new, before=conv)
        self.comp.replace_instruction(instr, self._gte(new, instr))
        return True

    def convert_to_s8(self, instr: HloInstruction) -> bool:
        """XLA's FuseConvertToS8: convert<s8>(clamp(-128, gte, 127)) and convert<s8>(gte(f32 conv))
        make an s8 -> s8 conv, a plain f32 result of s8 operands an s8 -> f32 conv."""
        gte, out_t = None, None
        if instr.opcode == "convert" and instr.shape.element_type is S8:
            inner = instr.operands[0]
            if (inner.opcode == "clamp" and _broadcast_scalar(inner.operands[0], -128) is not None
                    and _broadcast_scalar(inner.operands[2], 127) is not None):
                gte, out_t = inner.operands[1], S8
            elif inner.shape.element_type is F32:
                gte, out_t = inner, S8
        elif instr.opcode == "get-tuple-element" and instr.shape.element_type is F32:
            gte, out_t = instr, F32
        conv = _conv_of_gte(gte, is_forward_conv) if gte is not None else None
        if conv is None or (out_t is S8 and len(gte.users) != 1):
            return False
        ops = list(conv.operands)
        side_ok = len(ops) < 4 or (lossless_to(ops[3], S8) if out_t is S8
                                   else ops[3].shape.element_type is F32)
        if not (lossless_to(ops[0], S8) and lossless_to(ops[1], S8) and side_ok):
            return False
        if out_t is F32 and ops[0].shape.element_type is S8 and ops[1].shape.element_type is S8:
            return False  # already an s8 -> f32 conv: nothing to change
        ops[0], ops[1] = self._convert(ops[0], S8, conv), self._convert(ops[1], S8, conv)
        if len(ops) > 3:
            ops[3] = self._convert(ops[3], out_t, conv)
        result = conv.shape.tuple_shapes[0].with_element_type(out_t)
        new = self._replace_conv(conv, ops, Shape.tuple_of([result] + list(conv.shape.tuple_shapes[1:])))
        self.comp.replace_instruction(instr, self._gte(new, instr))
        return True

    def convert_to_f16(self, instr: HloInstruction) -> bool:
        if instr.opcode != "convert" or instr.shape.element_type is not F16:
            return False
        gte = instr.operands[0]
        conv = _conv_of_gte(gte, is_forward_conv)
        if conv is None or len(gte.users) != 1:
            return False
        if not all(op.shape.element_type is F32 and lossless_to(op, F16) for op in conv.operands):
            return False
        operands = [self._convert(op, F16, conv) for op in conv.operands]
        result = conv.shape.tuple_shapes[0].with_element_type(F16)
        new = self._replace_conv(conv, operands, Shape.tuple_of([result] + list(conv.shape.tuple_shapes[1:])))
        self.comp.replace_instruction(instr, self._gte(new, instr))
        return True


def _illegal_integer(conv: HloInstruction) -> bool:
    """XLA's CheckNoIllegalIntegerConvs: an integer type other than s8 in the input, filter,
    result or side input of a forward call."""
    values = [conv.shape.tuple_shapes[0], conv.operands[0].shape, conv.operands[1].shape]
    values += [conv.operands[3].shape] if len(conv.operands) > 3 else []
    return any(s.element_type.is_integer and s.element_type is not S8 for s in values)


def unfuse_illegal_integer_convs(comp: HloComputation) -> bool:
    """Integer calls cuDNN cannot run (XLA fails the compile on them) become convolutions of ours
    again, with their epilogue in the result type, each named once in the notes
    (`hlo_common.cli_util.pass_notes`: hlo-opt --verbose)."""
    changed = False
    for conv in [i for i in comp.instructions if is_forward_conv(i) and _illegal_integer(i)]:
        op_name = conv.metadata_value("op_name")
        _LOG.info("%%%s%s: cuDNN runs integer convolutions only as s8 -> s8 or s8 -> f32; this one "
                  "(%s) stays a convolution of ours", conv.name, f" (op_name {op_name})" if op_name else "",
                  ", ".join(str(op.shape.element_type.name) for op in conv.operands[:2])
                  + f" -> {conv.shape.tuple_shapes[0].element_type.name}")
        y = conv.shape.tuple_shapes[0]
        attrs = {k: conv.attrs[k] for k in ("window", "dim_labels", "feature_group_count",
                                            "operand_precision") if k in conv.attrs}
        out = comp.add_new_instruction("convolution", list(conv.operands[:2]), y, attrs, before=conv)
        out.metadata = list(conv.metadata)
        if conv.attrs["custom_call_target"] == BIAS_ACTIVATION:
            out = _integer_epilogue(comp, conv, out)
        scratch = comp.add_new_instruction("constant", [], conv.shape.tuple_shapes[1], before=conv,
                                           literal=np.zeros(conv.shape.tuple_shapes[1].dims, np.uint8))
        comp.replace_instruction(conv, comp.add_new_instruction("tuple", [out, scratch], conv.shape,
                                                                before=conv))
        changed = True
    return changed


def _integer_epilogue(comp: HloComputation, conv: HloInstruction, x: HloInstruction) -> HloInstruction:
    """scale * x + side_scale * side + bias, then the activation, in x's integer type (every
    value the fuser took in was lossless there, so this is the arithmetic it replaced)."""
    cfg, t = _config(conv), x.shape.element_type

    def add(op: str, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        return comp.add_new_instruction(op, [a, b], x.shape, before=conv)

    def splat(v: float) -> HloInstruction:
        c = comp.add_new_instruction("constant", [], Shape.array(t, ()), before=conv,
                                     literal=np.asarray(v).astype(t.np_dtype))
        return comp.add_new_instruction("broadcast", [c], x.shape, {"dimensions": ()}, before=conv)

    def as_t(v: HloInstruction) -> HloInstruction:
        if v.shape.element_type is t:
            return v
        return comp.add_new_instruction("convert", [v], v.shape.with_element_type(t), before=conv)

    if float(cfg.get("conv_result_scale", 1)) != 1:
        x = add("multiply", x, splat(float(cfg["conv_result_scale"])))
    if len(conv.operands) > 3 and float(cfg.get("side_input_scale", 0)) != 0:
        side = as_t(conv.operands[3])
        if float(cfg["side_input_scale"]) != 1:
            side = add("multiply", side, splat(float(cfg["side_input_scale"])))
        x = add("add", x, side)
    feature = conv.attrs["dim_labels"].output_feature
    bias = comp.add_new_instruction("broadcast", [as_t(conv.operands[2])], x.shape,
                                    {"dimensions": (feature,)}, before=conv)
    x = add("add", x, bias)
    if cfg.get("activation_mode", "kNone") == "kRelu":
        x = add("maximum", x, splat(0))
    return x


def _runtime_fusible(conv: HloInstruction) -> bool:
    """XLA's IsSuitableForCudnnRuntimeFusion: no side input, f16, even channel counts."""
    if len(conv.operands) > 3 or conv.operands[0].shape.element_type is not F16:
        return False
    d, kernel = conv.attrs["dim_labels"], conv.operands[1].shape.dims
    return kernel[d.kernel_input_feature] % 2 == 0 and kernel[d.kernel_output_feature] % 2 == 0


def _number(v: float) -> int | float:
    """A scale as XLA's JSON prints it: integral values without a fraction."""
    return int(v) if float(v).is_integer() else float(v)


@register_pass
@dataclass
class CudnnFusedConvRewriter(HloPass):
    """Bias, side input, scales and activations folded into `__cudnn$convBiasActivationForward`."""

    name = "cudnn-fused-convolution-rewriter"
    use_runtime_fusion: bool = False  # XLA's --xla_gpu_use_runtime_fusion (elu, relu6, leaky relu)

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            if not any(is_forward_conv(i) for i in comp.instructions):
                continue
            f = _Fuser(module, comp, self.use_runtime_fusion)
            epilogue = (f.bias_or_side_input, f.bias_or_side_input, f.side_input_alpha,
                        f.relu, f.elu_or_leaky_relu, f.relu6)
            for step in (f.remove_convert, f.conv_alpha, *epilogue, f.convert_to_f16, f.convert_to_s8,
                         *epilogue):
                changed |= f.each(step)
            changed |= unfuse_illegal_integer_convs(comp)
        return changed


__all__ = ["CudnnFusedConvRewriter", "FORWARD", "is_depthwise", "lossless_to"]
