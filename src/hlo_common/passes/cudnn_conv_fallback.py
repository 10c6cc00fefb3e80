"""CudnnConvFallback ("cudnn-conv-fallback"): XLA:GPU's cuDNN convolution calls become plain HLO
convolutions (and an epilogue fusion) that the emitters and the host's convolution thunk run.

Where it sits: hlo-codegen's prepare pipeline (`hlo_codegen.compiler.prepare_pipeline`), beside
`gemm-fallback`, before the fusion wrapper. For the cuda target (`keep_cudnn_calls`) the calls
cuDNN takes stay, as CudnnConvolutionThunks (`hlo_common.gpu.cudnn_graph.describe_call` decides;
the others are said once in the notes, `--verbose`); for the host target every `__cudnn$conv*`
call (what XLA:GPU's `conv-rewriter` and `cudnn-fused-conv-rewriter` write; the semantics are
`hlo_common.interpreter.cudnn_conv`'s) is rewritten here:

    forward             c = convolution(x, w) with the call's window, dim_labels and groups
    backward input      dx = convolution(dy, w'): dy base-dilated by the forward strides, the kernel
                        reversed, its in/out features swapped (regrouped for feature groups), padded
                        so that every input position sees each output it fed (XLA's
                        ConvRewriter matches the same form in reverse)
    backward filter     dw = convolution(x, dy): batch and feature of x swapped, dy as the kernel
                        dilated by the forward strides, windows strided by the forward kernel
                        dilation, feature groups as batch groups; reversed back where the forward
                        kernel was

For 16-bit floats with an epilogue the convolution writes f32 and one kLoop fusion applies
`conv_result_scale`, the bias (along the output feature dim), `side_input_scale * side input` and
the activation, then rounds once, as cuDNN does; an integer (s8) result is computed the same way
in f32 and written rounded to nearest and saturated. The call's scratch buffer becomes zeros only
where something reads it. A vectorized int8 call (NCHW_VECT_C, a `?` in its dim_labels, what
`cudnn_vectorize_convolutions` writes) first becomes its plain form: each split feature dim merged
(transpose + reshape), the plain call, its result split back (`_Devectorize`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.attributes import ConvDimensionNumbers, Window, WindowDim
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.interpreter.cudnn_conv import (
    BACKWARD_FILTER, BACKWARD_INPUT, BIAS_ACTIVATION, CUDNN_CONV_TARGETS, CudnnConvConfig,
    parse_cudnn_config, vector_dims,
)
from hlo_common.passes._support import global_computations
from hlo_common.passes.call_lowering import CallLowering, ComputationBuilder, once


_NOTES = logging.getLogger("hlo_notes")  # hlo_common.cli_util.pass_notes prints them for --verbose


def is_cudnn_conv_call(instr: HloInstruction) -> bool:
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in CUDNN_CONV_TARGETS


@register_pass
@dataclass
class CudnnConvFallback(HloPass):
    """cuDNN convolution calls become convolution (+ epilogue fusion) HLO (on the cuda target,
    only those cuDNN cannot take)."""

    name = "cudnn-conv-fallback"
    keep_cudnn_calls: bool = False  # the cuda target: calls cuDNN takes stay (CudnnConvolutionThunks)

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in global_computations(module):
            for instr in list(comp.instructions):
                if is_cudnn_conv_call(instr) and not self._kept(instr):
                    if any(v is not None for v in vector_dims(instr)):
                        instr = _Devectorize(module, comp, instr).run()
                    _Lowering(module, comp, instr).run()
                    changed = True
        return changed

    def _kept(self, call: HloInstruction) -> bool:
        """Whether cuDNN runs `call`; a call it cannot take is said once in the notes (--verbose)."""
        if not self.keep_cudnn_calls:
            return False
        from hlo_common.gpu.cudnn_graph import CudnnUnsupported, describe_call

        parse_cudnn_config(call)  # a malformed config is the user's error, not a fallback
        try:
            describe_call(call)
        except CudnnUnsupported as exc:
            reason = str(exc).removeprefix(f"{call.name}: ")
            _NOTES.info("%%%s: %s; it runs as a convolution kernel of ours", call.name, reason)
            return False
        return True


def dim_labels(input_order: dict[int, str], kernel_order: dict[int, str],
               output_order: dict[int, str]) -> ConvDimensionNumbers:
    """dim_labels from {position: label} of each side (labels 'b', 'f', 'i', 'o' and spatial digits)."""
    def side(order: dict[int, str]) -> str:
        return "".join(order[k] for k in range(len(order)))

    return ConvDimensionNumbers.parse(f"{side(input_order)}_{side(kernel_order)}->{side(output_order)}")


def _labels(batch: int, feature: int, spatial: tuple[int, ...], letters: str = "bf") -> dict[int, str]:
    out = {batch: letters[0], feature: letters[1]}
    out.update({pos: str(k) for k, pos in enumerate(spatial)})
    return out


def _dilated(size: int, factor: int) -> int:
    return 0 if size == 0 else (size - 1) * factor + 1


class _Lowering(CallLowering):
    """One cuDNN call -> convolution, epilogue, and the call's tuple for its users."""

    def __init__(self, module: HloModule, comp: HloComputation, call: HloInstruction):
        super().__init__(module, comp, call)
        self.target = call.attrs["custom_call_target"]
        self.config: CudnnConvConfig = parse_cudnn_config(call)
        self.dnums: ConvDimensionNumbers = call.attrs["dim_labels"]
        self.window: Window = call.attrs.get("window") or Window(())
        self.groups = int(call.attrs.get("feature_group_count", 1) or 1)
        self.result = call.shape.tuple_shapes[0] if call.shape.is_tuple else call.shape

    def run(self) -> None:
        t = self.result.element_type
        needs_epilogue = (self.config.conv_result_scale != 1 or self.config.activation_mode != "kNone"
                          or self.target == BIAS_ACTIVATION or t.is_integer)
        wide = t.is_low_precision_float or t.is_integer  # int8 convs: f32 sums, rounded and saturated
        conv_type = PRIMITIVE_TYPES["f32"] if needs_epilogue and wide else t
        conv_shape = self.result.with_element_type(conv_type)
        if self.target == BACKWARD_INPUT:
            value = self._backward_input(conv_shape)
        elif self.target == BACKWARD_FILTER:
            value = self._backward_filter(conv_shape)
        else:
            value = self._top("convolution", list(self.call.operands[:2]), conv_shape,
                              {"window": self.window, "dim_labels": self.dnums,
                               "feature_group_count": self.groups})
        if needs_epilogue:
            value = self._epilogue(value)
        self._replace_call(value)

    # -- the convolutions ---------------------------------------------------------------------------
    def _backward_input(self, shape: Shape) -> HloInstruction:
        d = self.dnums
        dy, kernel = self.call.operands[0], self.call.operands[1]
        kernel, k_in, k_out, k_spatial = self._swapped_kernel(kernel)
        dims = []
        for k, wd in enumerate(self.window.dims):
            span = _dilated(wd.size, wd.window_dilation)
            size_in, size_out = shape.dims[d.input_spatial[k]], dy.shape.dims[d.output_spatial[k]]
            lo = span - wd.padding_low - 1
            hi = size_in + span - 1 - _dilated(size_out, wd.stride) - lo
            dims.append(WindowDim(wd.size, 1, lo, hi, wd.window_dilation, wd.stride, not wd.window_reversal))
        labels = dim_labels(_labels(d.output_batch, d.output_feature, d.output_spatial),
                            _labels(k_in, k_out, k_spatial, "io"),
                            _labels(d.input_batch, d.input_feature, d.input_spatial))
        attrs = {"window": Window(tuple(dims)), "dim_labels": labels, "feature_group_count": self.groups}
        return self._top("convolution", [dy, kernel], shape, attrs)

    def _swapped_kernel(self, kernel: HloInstruction) -> tuple[HloInstruction, int, int, tuple[int, ...]]:
        """The kernel with input features Oq = O/G and output features G*I (kernel [.., I, .., O, ..]
        seen by the transposed convolution), those two positions and the spatial ones."""
        d = self.dnums
        if self.groups == 1:
            return kernel, d.kernel_output_feature, d.kernel_input_feature, d.kernel_spatial
        spatial = list(d.kernel_spatial)
        canonical = self._top("transpose", [kernel], _permuted(kernel.shape, spatial + [
            d.kernel_input_feature, d.kernel_output_feature]),
            {"dimensions": tuple(spatial + [d.kernel_input_feature, d.kernel_output_feature])})
        taps = list(canonical.shape.dims[:-2])
        i, o = canonical.shape.dims[-2:]
        g, t = self.groups, kernel.shape.element_type
        split = self._top("reshape", [canonical], Shape.array(t, tuple(taps + [i, g, o // g])))
        n = len(taps)
        moved = self._top("transpose", [split], Shape.array(t, tuple(taps + [o // g, g, i])),
                          {"dimensions": tuple(range(n)) + (n + 2, n + 1, n)})
        merged = self._top("reshape", [moved], Shape.array(t, tuple(taps + [o // g, g * i])))
        return merged, n, n + 1, tuple(range(n))

    def _backward_filter(self, shape: Shape) -> HloInstruction:
        d = self.dnums
        x, dy = self.call.operands[0], self.call.operands[1]
        dims = []
        for k, wd in enumerate(self.window.dims):
            size_in, size_out = x.shape.dims[d.input_spatial[k]], dy.shape.dims[d.output_spatial[k]]
            total = _dilated(size_out, wd.stride) + _dilated(wd.size, wd.window_dilation) - size_in - 1
            dims.append(WindowDim(size_out, wd.window_dilation, wd.padding_low, total - wd.padding_low,
                                  wd.stride, 1, False))
        labels = dim_labels(_labels(d.input_feature, d.input_batch, d.input_spatial),
                            _labels(d.output_batch, d.output_feature, d.output_spatial, "io"),
                            _labels(d.kernel_input_feature, d.kernel_output_feature, d.kernel_spatial))
        attrs = {"window": Window(tuple(dims)), "dim_labels": labels, "batch_group_count": self.groups}
        value = self._top("convolution", [x, dy], shape, attrs)
        flips = tuple(d.kernel_spatial[k] for k, wd in enumerate(self.window.dims) if wd.window_reversal)
        if flips:
            value = self._top("reverse", [value], shape, {"dimensions": flips})
        return value

    # -- the epilogue and the users -----------------------------------------------------------------
    def _epilogue(self, conv: HloInstruction) -> HloInstruction:
        """One kLoop fusion: scale, bias, side input, activation, rounding."""
        body = HloComputation(self.module.unique_computation_name(f"{self.call.name}_epilogue"))
        b = ComputationBuilder(body)
        operands = [conv] + list(self.call.operands[2:4] if self.target == BIAS_ACTIVATION else [])
        params = [b.add("parameter", [], op.shape, parameter_number=k) for k, op in enumerate(operands)]
        x, acc = params[0], conv.shape.element_type
        cfg = self.config
        if cfg.conv_result_scale != 1:
            x = b.binary("multiply", x, b.scalar_like(cfg.conv_result_scale, x))
        if len(params) > 1:
            bias = b.convert(params[1], acc)
            along_features = {"dimensions": (self.dnums.output_feature,)}
            x = b.binary("add", x, b.add("broadcast", [bias], x.shape, along_features))
        if len(params) > 2 and cfg.side_input_scale != 0:
            side = b.convert(params[2], acc)
            if cfg.side_input_scale != 1:
                side = b.binary("multiply", side, b.scalar_like(cfg.side_input_scale, side))
            x = b.binary("add", x, side)
        x = _activation(b, x, cfg)
        t = self.result.element_type
        if t.is_integer:  # cuDNN's int8 result: nearest even, saturated (a convert alone truncates)
            info = np.iinfo(t.np_dtype)
            x = b.add("round-nearest-even", [x], x.shape)
            x = b.add("clamp", [b.scalar_like(int(info.min), x), x, b.scalar_like(int(info.max), x)], x.shape)
        x = b.convert(x, t)
        body.root = x
        self._add_computation(body)
        return self._top("fusion", operands, x.shape, {"kind": "kLoop", "calls": body}, name="conv_epilogue")

    def _replace_call(self, value: HloInstruction) -> None:
        """The call's users read `value` (its result) and, for the scratch buffer, zeros."""
        if not self.call.shape.is_tuple:
            self._replace(self.call, value)
            return
        scratch = [once(lambda shape=shape: self._zeros(shape)) for shape in self.call.shape.tuple_shapes[1:]]
        self._replace_tuple_call([lambda: value] + scratch)


class _Devectorize(CallLowering):
    """A vectorized call -> the same call on merged features, whose result is split back: feature f
    of a vectorized side is [f / k, f % k] over (feature dim, `?` dim), as the interpreter reads it
    (`hlo_common.interpreter.cudnn_conv.merge_vector_dim`)."""

    def run(self) -> HloInstruction:
        call = self.call
        vin, vker, vout = vector_dims(call)
        d: ConvDimensionNumbers = call.attrs["dim_labels"]
        operands = list(call.operands)
        for k, (feature, vect) in ((0, (d.input_feature, vin)), (1, (d.kernel_input_feature, vker)),
                                    (3, (d.output_feature, vout))):
            if k < len(operands) and vect is not None:
                operands[k] = self._merge(operands[k], feature, vect)
        result = call.shape.tuple_shapes[0] if call.shape.is_tuple else call.shape
        size = result.dims[vout] if vout is not None else 1
        plain = self._merged_shape(result, d.output_feature, vout) if vout is not None else result
        shape = Shape.tuple_of([plain] + list(call.shape.tuple_shapes[1:])) if call.shape.is_tuple else plain
        attrs = {**call.attrs, "dim_labels": ConvDimensionNumbers.parse(d.text.replace("?", ""))}
        flat = self._top("custom-call", operands, shape, attrs, name=call.name)
        flat.backend_config_data = call.backend_config_data
        flat.metadata = list(call.metadata)

        def value() -> HloInstruction:
            out = self._top("get-tuple-element", [flat], plain, {"index": 0}) if call.shape.is_tuple else flat
            return self._split(out, result, d.output_feature, vout, size) if vout is not None else out
        if not call.shape.is_tuple:
            self._replace(call, value())
            return flat
        rest = [once(lambda k=k, s=s: self._top("get-tuple-element", [flat], s, {"index": k}))
                for k, s in enumerate(call.shape.tuple_shapes[1:], start=1)]
        self._replace_tuple_call([once(value)] + rest)
        return flat

    @staticmethod
    def _merged_shape(shape: Shape, feature: int, vect: int) -> Shape:
        dims = list(shape.dims)
        size = dims.pop(vect)
        dims[feature if vect > feature else feature - 1] *= size
        return Shape.array(shape.element_type, tuple(dims))

    def _merge(self, x: HloInstruction, feature: int, vect: int) -> HloInstruction:
        """[.., C/k, .., k, ..] -> [.., C, ..]: k moved next to the feature dim, the two merged."""
        f = feature if vect > feature else feature - 1
        order = [k for k in range(len(x.shape.dims)) if k != vect]
        order.insert(f + 1, vect)
        if order != sorted(order):
            x = self._top("transpose", [x], _permuted(x.shape, order), {"dimensions": tuple(order)})
        dims = list(x.shape.dims)
        dims[f:f + 2] = [dims[f] * dims[f + 1]]
        return self._top("reshape", [x], Shape.array(x.shape.element_type, tuple(dims)))

    def _split(self, x: HloInstruction, result: Shape, feature: int, vect: int, size: int) -> HloInstruction:
        """The inverse of `_merge`, into the vectorized `result` shape."""
        f = feature if vect > feature else feature - 1
        dims = list(x.shape.dims)
        dims[f:f + 1] = [dims[f] // size, size]
        t = result.element_type
        x = self._top("reshape", [x], Shape.array(t, tuple(dims)))
        order = [k for k in range(len(dims)) if k != f + 1]
        order.insert(vect, f + 1)
        if order != sorted(order):
            x = self._top("transpose", [x], _permuted(x.shape, order), {"dimensions": tuple(order)})
        return x


def _permuted(shape: Shape, order: list[int]) -> Shape:
    return Shape.array(shape.element_type, tuple(shape.dims[k] for k in order))


def _activation(b: ComputationBuilder, x: HloInstruction, cfg: CudnnConvConfig) -> HloInstruction:
    mode = cfg.activation_mode
    if mode == "kRelu":
        return b.binary("maximum", x, b.scalar_like(0, x))
    if mode == "kRelu6":
        return b.add("clamp", [b.scalar_like(0, x), x, b.scalar_like(6, x)], x.shape)
    if mode in ("kElu", "kLeakyRelu"):
        zero = b.scalar_like(0, x)
        positive = b.add("compare", [x, zero], x.shape.with_element_type(PRIMITIVE_TYPES["pred"]),
                         {"direction": "GT"})
        negative = (b.add("exponential-minus-one", [x], x.shape) if mode == "kElu"
                    else b.binary("multiply", x, b.scalar_like(cfg.leakyrelu_alpha, x)))
        return b.add("select", [positive, x, negative], x.shape)
    if mode == "kSigmoid":
        return b.add("logistic", [x], x.shape)
    if mode == "kTanh":
        return b.add("tanh", [x], x.shape)
    return x
