"""Interpreter handlers for XLA:GPU's cuDNN convolution custom calls (the targets of
xla/service/gpu/cublas_cudnn.h that `conv-rewriter` and `cudnn-fused-conv-rewriter` write):

    __cudnn$convForward                (input, filter)                  -> (output, u8[scratch])
    __cudnn$convBackwardInput          (output grad, filter)            -> (input grad, u8[scratch])
    __cudnn$convBackwardFilter         (input, output grad)             -> (filter grad, u8[scratch])
    __cudnn$convBiasActivationForward  (input, filter, bias[, side input]) -> (output, u8[scratch])

Every call carries the window and `dim_labels` of the *forward* convolution whatever its kind:
the labels' input is the forward input (the result of a backward-input call), the kernel the
filter (the result of a backward-filter call), the output the forward output (the operand the
backward calls read as the gradient). The backward calls are the adjoints of that forward
convolution, computed here one kernel offset at a time (each offset a matrix product and a strided
add), so they need no transposed-convolution arithmetic of their own.

As cuDNN (and XLA's gpu_conv_runner), the result is
`activation(conv_result_scale * conv + side_input_scale * side_input + bias)` with the scales and
activation from the call's `cudnn_conv_backend_config`, computed in the accumulation type (f32
for 16-bit floats) and rounded once. Integer (s8) convolutions sum exactly, apply the epilogue in
f32 and write an s8 result rounded to nearest and saturated, as cuDNN's int8 kernels do (an HLO
convert would truncate). The scratch buffer comes back as zeros. A vectorized int8 call
(NCHW_VECT_C: a `?` in dim_labels, `cudnn_vectorize_convolutions`) is computed as the plain call
of its merged features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.attributes import ConvDimensionNumbers, Window
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_common.interpreter.convolution import convolve
from hlo_common.interpreter.custom_call import register_custom_call
from hlo_common.interpreter.numeric import to_accumulation, to_element_type, unsupported

FORWARD = "__cudnn$convForward"
BACKWARD_INPUT = "__cudnn$convBackwardInput"
BACKWARD_FILTER = "__cudnn$convBackwardFilter"
BIAS_ACTIVATION = "__cudnn$convBiasActivationForward"
CUDNN_CONV_TARGETS = (FORWARD, BACKWARD_INPUT, BACKWARD_FILTER, BIAS_ACTIVATION)


@dataclass(frozen=True)
class CudnnConvConfig:
    """The fields of XLA's CudnnConvBackendConfig the result depends on."""

    activation_mode: str = "kNone"
    conv_result_scale: float = 1.0
    side_input_scale: float = 0.0
    leakyrelu_alpha: float = 0.0


_ACTIVATIONS = ("kNone", "kRelu", "kRelu6", "kElu", "kLeakyRelu", "kSigmoid", "kTanh")


def parse_cudnn_config(instr: HloInstruction) -> CudnnConvConfig:
    """The call's cudnn_conv_backend_config; missing fields take cuDNN's neutral values."""
    data = instr.backend_config_data
    if data is None:
        return CudnnConvConfig()
    if not isinstance(data, dict) or not isinstance(data.get("cudnn_conv_backend_config", {}), dict):
        raise unsupported(instr, "backend_config is not a CudnnConvBackendConfig")
    cfg = data.get("cudnn_conv_backend_config", {})
    try:
        config = CudnnConvConfig(str(cfg.get("activation_mode", "kNone")),
                                 float(cfg.get("conv_result_scale", 1)),
                                 float(cfg.get("side_input_scale", 0)),
                                 float(cfg.get("leakyrelu_alpha", 0)))
    except (TypeError, ValueError) as exc:
        raise unsupported(instr, f"bad cudnn_conv_backend_config: {exc}") from exc
    if config.activation_mode not in _ACTIVATIONS:
        raise unsupported(instr, f"activation_mode {config.activation_mode!r} is not one of "
                               f"{', '.join(_ACTIVATIONS)}")
    return config


def activate(x: np.ndarray, config: CudnnConvConfig) -> np.ndarray:
    mode = config.activation_mode
    if mode == "kRelu":
        return np.maximum(x, 0)
    if mode == "kRelu6":
        return np.clip(x, 0, 6)
    if mode == "kElu":
        return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))
    if mode == "kLeakyRelu":
        return np.where(x > 0, x, x * np.asarray(config.leakyrelu_alpha, x.dtype))
    if mode == "kSigmoid":
        return 1 / (1 + np.exp(-x))
    if mode == "kTanh":
        return np.tanh(x)
    return x


@dataclass
class _Forward:
    """The forward convolution a call describes, channels-last: input [N, S..., C], kernel
    [K..., I, O], output [N, S'..., O], with the permutations from and to the HLO dims."""

    dnums: ConvDimensionNumbers
    window: Window
    groups: int

    @property
    def input_order(self) -> tuple[int, ...]:
        d = self.dnums
        return (d.input_batch,) + tuple(d.input_spatial) + (d.input_feature,)

    @property
    def kernel_order(self) -> tuple[int, ...]:
        d = self.dnums
        return tuple(d.kernel_spatial) + (d.kernel_input_feature, d.kernel_output_feature)

    @property
    def output_order(self) -> tuple[int, ...]:
        d = self.dnums
        return (d.output_batch,) + tuple(d.output_spatial) + (d.output_feature,)


def _forward_of(instr: HloInstruction) -> _Forward:
    dnums = instr.attrs.get("dim_labels")
    if not isinstance(dnums, ConvDimensionNumbers):
        raise unsupported(instr, "a cuDNN convolution needs dim_labels")
    window = instr.attrs.get("window") or Window(())
    if len(window.dims) != len(dnums.input_spatial):
        raise unsupported(instr, f"window has {len(window.dims)} dims, dim_labels "
                               f"{len(dnums.input_spatial)} spatial dims")
    if any(wd.base_dilation != 1 for wd in window.dims):
        raise unsupported(instr, "cuDNN convolutions take no lhs_dilate")
    if int(instr.attrs.get("batch_group_count", 1) or 1) != 1:
        raise unsupported(instr, "batch_group_count on a cuDNN convolution")
    return _Forward(dnums, window, int(instr.attrs.get("feature_group_count", 1) or 1))


def _to_hlo(values: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """Canonical (channels-last) values back to the dims `order` names."""
    return values.transpose(np.argsort(order))


def _offset_slices(fwd: _Forward, offset: tuple[int, ...], out_spatial: tuple[int, ...]) -> tuple:
    """The padded-input positions kernel offset `offset` reads for every output position."""
    return tuple(slice(k * wd.window_dilation, k * wd.window_dilation + (m - 1) * wd.stride + 1, wd.stride)
                 for k, wd, m in zip(offset, fwd.window.dims, out_spatial))


def _padded_geometry(fwd: _Forward, spatial: tuple[int, ...]) -> list[tuple[int, int]]:
    """Per spatial dim: (padded size, low padding) of the forward input."""
    return [(size + wd.padding_low + wd.padding_high, wd.padding_low)
            for size, wd in zip(spatial, fwd.window.dims)]


def _overlap(geometry: list[tuple[int, int]], spatial: tuple[int, ...]) -> tuple[tuple, tuple] | None:
    """(input slices, padded slices) of the positions both hold, channels-last; None when none."""
    src, dst = [slice(None)], [slice(None)]
    for (total, lo), size in zip(geometry, spatial):
        first, last = max(0, -lo), min(size, total - lo)  # input positions inside the padded array
        if last <= first:
            return None
        src.append(slice(first, last))
        dst.append(slice(first + lo, last + lo))
    return tuple(src) + (slice(None),), tuple(dst) + (slice(None),)


def _pad(x: np.ndarray, geometry: list[tuple[int, int]]) -> np.ndarray:
    """The forward input padded (negative padding crops) as the window says, channels-last."""
    out = np.zeros((x.shape[0],) + tuple(t for t, _ in geometry) + (x.shape[-1],), x.dtype)
    both = _overlap(geometry, x.shape[1:-1])
    if both is not None:
        out[both[1]] = x[both[0]]
    return out


def _unpad(padded: np.ndarray, geometry: list[tuple[int, int]], spatial: tuple[int, ...]) -> np.ndarray:
    """The adjoint of `_pad`: the padded gradient read back at the input positions, zero where a
    position was cropped away."""
    out = np.zeros((padded.shape[0],) + spatial + (padded.shape[-1],), padded.dtype)
    both = _overlap(geometry, spatial)
    if both is not None:
        out[both[0]] = padded[both[1]]
    return out


def _kernel_taps(fwd: _Forward, kernel: np.ndarray) -> np.ndarray:
    for k, wd in enumerate(fwd.window.dims):
        if wd.window_reversal:
            kernel = np.flip(kernel, axis=k)
    return kernel


def backward_input(fwd: _Forward, dy: np.ndarray, kernel: np.ndarray, spatial: tuple[int, ...]) -> np.ndarray:
    """dx [N, S..., C] of the forward convolution for dy [N, S'..., O] and kernel [K..., I, O]."""
    g = fwd.groups
    n, out_spatial, o = dy.shape[0], dy.shape[1:-1], dy.shape[-1]
    i = kernel.shape[-2]
    geometry = _padded_geometry(fwd, spatial)
    dxp = np.zeros((n,) + tuple(t for t, _ in geometry) + (g * i,), dy.dtype)
    kernel = _kernel_taps(fwd, kernel)
    positions = n * math.prod(out_spatial)
    grads = dy.reshape(positions, g, o // g).transpose(1, 0, 2)  # [G, P, Oq]
    for offset in np.ndindex(*kernel.shape[:-2]):
        w = kernel[offset].reshape(i, g, o // g).transpose(1, 2, 0)  # [G, Oq, I]
        part = np.matmul(grads, w).transpose(1, 0, 2).reshape((n,) + out_spatial + (g * i,))
        dxp[(slice(None),) + _offset_slices(fwd, offset, out_spatial)] += part
    return _unpad(dxp, geometry, spatial)


def backward_filter(fwd: _Forward, x: np.ndarray, dy: np.ndarray, taps: tuple[int, ...]) -> np.ndarray:
    """dw [K..., I, O] of the forward convolution for input x [N, S..., C] and dy [N, S'..., O]."""
    g = fwd.groups
    n, out_spatial, o = dy.shape[0], dy.shape[1:-1], dy.shape[-1]
    i = x.shape[-1] // g
    xp = _pad(x, _padded_geometry(fwd, x.shape[1:-1]))
    positions = n * math.prod(out_spatial)
    grads = dy.reshape(positions, g, o // g).transpose(1, 0, 2)  # [G, P, Oq]
    dw = np.zeros(taps + (i, o), np.result_type(x, dy))
    for offset in np.ndindex(*taps):
        patch = xp[(slice(None),) + _offset_slices(fwd, offset, out_spatial)]
        cols = patch.reshape(positions, g, i).transpose(1, 2, 0)  # [G, I, P]
        dw[offset] = np.matmul(cols, grads).transpose(1, 0, 2).reshape(i, o)  # [I, G*Oq]
    for k, wd in enumerate(fwd.window.dims):
        if wd.window_reversal:
            dw = np.flip(dw, axis=k)
    return dw


def _result_shape(instr: HloInstruction):
    return instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape


def _conv_values(instr: HloInstruction, target: str, operands: list) -> np.ndarray:
    """The convolution (or its adjoint) in the accumulation type, in the result's HLO dims."""
    fwd = _forward_of(instr)
    result = _result_shape(instr)
    acc = [to_accumulation(v, result.element_type) for v in operands[:2]]
    if target == BACKWARD_INPUT:
        dy, kernel = acc[0].transpose(fwd.output_order), acc[1].transpose(fwd.kernel_order)
        spatial = tuple(result.dims[d] for d in fwd.dnums.input_spatial)
        return _to_hlo(backward_input(fwd, dy, kernel, spatial), fwd.input_order)
    if target == BACKWARD_FILTER:
        x, dy = acc[0].transpose(fwd.input_order), acc[1].transpose(fwd.output_order)
        taps = tuple(result.dims[d] for d in fwd.dnums.kernel_spatial)
        return _to_hlo(backward_filter(fwd, x, dy, taps), fwd.kernel_order)
    x, kernel = acc[0].transpose(fwd.input_order), acc[1].transpose(fwd.kernel_order)
    return _to_hlo(convolve(instr, x, kernel, fwd.window, fwd.groups, 1), fwd.output_order)


def vector_dims(instr: HloInstruction) -> tuple[int | None, int | None, int | None]:
    """The `?` dims of a vectorized (NCHW_VECT_C) call's input, filter and output labels: each
    splits the feature dim before it, feature = outer * vector size + inner (XLA's
    cudnn_vectorize_convolutions); None where a side has none."""
    text = str(instr.attrs.get("dim_labels") or "")
    sides = text.replace("->", "_").split("_")
    if "?" not in text or len(sides) != 3:
        return None, None, None
    found = [side.index("?") if "?" in side else None for side in sides]
    return found[0], found[1], found[2]


def merge_vector_dim(values: np.ndarray, feature: int, vect: int) -> np.ndarray:
    """[.., C/k (feature), .., k (vect), ..] -> the unvectorized array, features in the feature
    dim's place (the other dims keep their order)."""
    moved = np.moveaxis(values, vect, feature + 1 if vect > feature else feature)
    f = feature if vect > feature else feature - 1
    return moved.reshape(moved.shape[:f] + (moved.shape[f] * moved.shape[f + 1],) + moved.shape[f + 2:])


def split_vector_dim(values: np.ndarray, feature: int, vect: int, size: int) -> np.ndarray:
    """The inverse of `merge_vector_dim`: features split into [C/size, size], the inner part
    moved to `vect` (positions of the vectorized array)."""
    f = feature if vect > feature else feature - 1
    split = values.reshape(values.shape[:f] + (values.shape[f] // size, size) + values.shape[f + 1:])
    return np.moveaxis(split, f + 1, vect)


def _unvectorized(instr: HloInstruction, operands: list, ev):
    """A vectorized call computed as its plain form: operands merged, result split back."""
    vin, vker, vout = vector_dims(instr)
    d: ConvDimensionNumbers = instr.attrs["dim_labels"]
    plain = ConvDimensionNumbers.parse(d.text.replace("?", ""))
    merged = [np.asarray(v) for v in operands]
    merged[0] = merge_vector_dim(merged[0], d.input_feature, vin) if vin is not None else merged[0]
    if vker is not None:
        merged[1] = merge_vector_dim(merged[1], d.kernel_input_feature, vker)
    if len(merged) > 3 and vout is not None:
        merged[3] = merge_vector_dim(merged[3], d.output_feature, vout)
    result = _result_shape(instr)
    size = result.dims[vout] if vout is not None else 1
    dims = [n for k, n in enumerate(result.dims) if k != vout]
    dims[plain.output_feature] *= size
    shape = Shape.array(result.element_type, dims)
    if instr.shape.is_tuple:
        shape = Shape.tuple_of([shape] + list(instr.shape.tuple_shapes[1:]))
    flat = HloInstruction.create("custom-call", [], shape, {**instr.attrs, "dim_labels": plain}, instr.name)
    flat.backend_config_data = instr.backend_config_data
    out = _cudnn_convolution(flat, merged, ev)
    value = out[0] if isinstance(out, tuple) else out
    if vout is not None:
        value = split_vector_dim(value, d.output_feature, vout, size)
    return (value, *out[1:]) if isinstance(out, tuple) else value


@register_custom_call(*CUDNN_CONV_TARGETS)
def _cudnn_convolution(instr, operands, ev):
    if any(v is not None for v in vector_dims(instr)):
        return _unvectorized(instr, operands, ev)
    target = instr.attrs.get("custom_call_target")
    config = parse_cudnn_config(instr)
    result = _result_shape(instr)
    values = _conv_values(instr, target, operands)
    if values.dtype.kind in "iu":  # int8 convs: exact sums, then cuDNN's float epilogue
        values = values.astype(np.float32)
    if values.shape != result.dims:
        raise unsupported(instr, f"the convolution computes {list(values.shape)}, the call "
                               f"returns {result}")
    if config.conv_result_scale != 1:
        values = values * np.asarray(config.conv_result_scale, values.dtype)
    if target == BIAS_ACTIVATION:
        values = _bias_and_side_input(instr, values, operands, config)
    values = activate(values, config)
    out = _integer_result(values, result.element_type)
    if out is None:
        out = to_element_type(values, result.element_type)
    if not instr.shape.is_tuple:
        return out
    rest = [np.zeros(s.dims, s.element_type.np_dtype) for s in instr.shape.tuple_shapes[1:]]
    return (out, *rest)


def _integer_result(values: np.ndarray, t) -> np.ndarray | None:
    """An integer result as cuDNN writes it (s8 -> s8 convs): rounded to nearest even and
    saturated at the type's bounds (an HLO convert would truncate and wrap)."""
    if not t.is_integer:
        return None
    info = np.iinfo(t.np_dtype)
    return np.clip(np.rint(values), info.min, info.max).astype(t.np_dtype)


def _bias_and_side_input(instr, values: np.ndarray, operands: list, config: CudnnConvConfig) -> np.ndarray:
    feature = _forward_of(instr).dnums.output_feature
    if len(operands) > 2:
        bias = np.asarray(operands[2], values.dtype).reshape(-1)
        if bias.size != values.shape[feature]:
            raise unsupported(instr, f"bias of {bias.size} elements for "
                                   f"{values.shape[feature]} output features")
        shape = [1] * values.ndim
        shape[feature] = bias.size
        values = values + bias.reshape(shape)
    if len(operands) > 3 and config.side_input_scale != 0:
        side = np.asarray(operands[3], values.dtype)
        values = values + np.asarray(config.side_input_scale, values.dtype) * side
    return values
