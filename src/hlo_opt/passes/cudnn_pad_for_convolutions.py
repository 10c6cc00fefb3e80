"""CudnnPadForConvolutions ("cudnn_pad_for_convolutions"): cuDNN convolution calls get their
feature counts padded with zeros to what cuDNN's fast kernels want
(`xla/service/gpu/transforms/cudnn_pad_for_convolutions.cc`).

Where it sits: "conv_canonicalization", after `gpu-conv-padding-legalization` (XLA's
NVPTXCompiler::OptimizeHloConvolutionCanonicalization); call-inliner, tuple-simplifier and algsimp
clean up after it. Two rules, in XLA's order, per computation:

- integer convolutions (forward and forward-with-bias, s8 input and filter): input and output
  features padded to a multiple of 32 (sm_75+, int8x32) or else of 4 (int8x4), when cuDNN
  supports that vectorization (`integer_conv_supported`: 2D, no dilation, int8x32 only for an
  integer result and a spatial size larger than the dilated filter) and neither the input nor
  the result grows to 2x or more;
- f16 convolutions on tensor cores (sm_70+; not grouped, not with bias and activation): 3 input
  features with 32 or 64 output features become 4 input features; otherwise input and output
  features go to multiples of 8 unless the input, the filter or the result grows by more than
  1.35x. Only f16: XLA leaves bf16 convolutions as they are.

    c = (f16[4,16,16,14], u8[0]) custom-call(f16[4,16,16,7] x, f16[14,3,3,7] w), ...
    becomes
    p = (f16[4,16,16,16], u8[0]) custom-call(pad(x) f16[4,16,16,8], pad(w) f16[16,3,3,8]), ...
    c = tuple(slice(get-tuple-element(p, 0)) f16[4,16,16,14], constant u8[0])

The pads add zeros at the high end of the feature dims, so the extra input features meet zero
filter taps and the extra output features are sliced away: the values do not change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.hlo.attributes import ConvDimensionNumbers, PaddingConfig, SliceSpec
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import DevicePass, register_pass
from hlo_opt.cudnn_conv_utils import (
    BACKWARD_FILTER, BACKWARD_INPUT, BIAS_ACTIVATION, FORWARD, integer_conv_supported, is_cudnn_conv,
    vectorized_feature_dims,
)

# XLA's kMaxBytesTouchedBound of each rule
TENSOR_CORE_BOUND = 1.35  # a padded shape may be at most this much larger
INTEGER_BOUND = 2.0  # ... and here strictly less than this much


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _grow(shape: Shape, dim: int, multiple: int) -> Shape:
    dims = list(shape.dims)
    dims[dim] = _round_up(dims[dim], multiple)
    return shape.with_dims(dims)


def _with_dim(shape: Shape, dim: int, size: int) -> Shape:
    dims = list(shape.dims)
    dims[dim] = size
    return shape.with_dims(dims)


_Padded = tuple[list[Shape], Shape]  # the operand shapes and the result shape of a padded call


def _integer_shapes(call: HloInstruction, pad_to: int, cc: tuple[int, int]) -> _Padded | None:
    """XLA's TryResolvePaddedShapesForIntegerConvolution: the padded operand and result shapes."""
    x, y = call.operands[0].shape, call.shape.tuple_shapes[0]
    if not x.element_type.is_integer or call.attrs["custom_call_target"] not in (FORWARD, BIAS_ACTIVATION):
        return None
    d: ConvDimensionNumbers = call.attrs["dim_labels"]
    vect = vectorized_feature_dims(call)
    sizes = [s.dims[v] if v is not None else 1 for s, v in zip((x, call.operands[1].shape, y), vect)]
    if any(pad_to % s for s in sizes) or not integer_conv_supported(call, pad_to, cc):
        return None
    shapes = [op.shape for op in call.operands]
    shapes[0] = _grow(shapes[0], d.input_feature, pad_to // sizes[0])
    shapes[1] = _grow(shapes[1], d.kernel_input_feature, pad_to // sizes[1])
    shapes[1] = _grow(shapes[1], d.kernel_output_feature, pad_to)  # not vectorized in NCHW_VECT_C
    if len(shapes) > 2:
        shapes[2] = _grow(shapes[2], 0, pad_to)  # the bias, one value per output feature
    if len(shapes) > 3:
        shapes[3] = _grow(shapes[3], d.output_feature, pad_to // sizes[2])
    result = _grow(y, d.output_feature, pad_to // sizes[2])
    for new, old in ((shapes[0], x), (result, y)):  # the filter follows them, the bias is tiny
        if new.byte_size() >= old.byte_size() * INTEGER_BOUND:
            return None
    if all(s.dims == op.shape.dims for s, op in zip(shapes, call.operands)):
        return None
    return shapes, result


def _tensor_core_shapes(call: HloInstruction) -> _Padded | None:
    """XLA's TryResolvePaddedShapesForTensorCore: f16 features to multiples of 8 (3 -> 4 for 32
    or 64 output features)."""
    target = call.attrs["custom_call_target"]
    y = call.shape.tuple_shapes[0]
    if y.element_type.name != "f16" or target == BIAS_ACTIVATION:
        return None
    if any(int(call.attrs.get(k, 1) or 1) > 1 for k in ("feature_group_count", "batch_group_count")):
        return None
    d: ConvDimensionNumbers = call.attrs["dim_labels"]
    shapes = {"lhs": call.operands[0].shape, "rhs": call.operands[1].shape, "result": y}
    roles = {BACKWARD_INPUT: ("result", "rhs", "lhs"), BACKWARD_FILTER: ("lhs", "result", "rhs")}
    inp, fil, out = roles.get(target, ("lhs", "rhs", "result"))
    old = dict(shapes)
    if shapes[inp].dims[d.input_feature] == 3 and shapes[out].dims[d.output_feature] in (32, 64):
        shapes[inp] = _with_dim(shapes[inp], d.input_feature, 4)
        shapes[fil] = _with_dim(shapes[fil], d.kernel_input_feature, 4)
    else:
        shapes[inp] = _grow(shapes[inp], d.input_feature, 8)
        shapes[fil] = _grow(_grow(shapes[fil], d.kernel_input_feature, 8), d.kernel_output_feature, 8)
        shapes[out] = _grow(shapes[out], d.output_feature, 8)
        if any(shapes[k].byte_size() > old[k].byte_size() * TENSOR_CORE_BOUND for k in shapes):
            return None
    if shapes["lhs"].dims == old["lhs"].dims and shapes["rhs"].dims == old["rhs"].dims:
        return None
    return [shapes["lhs"], shapes["rhs"]], shapes["result"]


def _pad_to(comp: HloComputation, x: HloInstruction, shape: Shape,
            before: HloInstruction) -> HloInstruction:
    """XLA's PadInstruction: zeros added at the high end of every dim that grows."""
    if shape.dims == x.shape.dims:
        return x
    t = x.shape.element_type
    zero = comp.add_new_instruction("constant", [], Shape.array(t, ()), before=before,
                                    literal=np.zeros((), t.np_dtype))
    config = PaddingConfig(tuple((0, new - old, 0) for old, new in zip(x.shape.dims, shape.dims)))
    pad = comp.add_new_instruction("pad", [x, zero], x.shape.with_dims(shape.dims), {"padding": config},
                                   before=before)
    pad.metadata = list(x.metadata)
    return pad


def pad_conv(call: HloInstruction, operand_shapes: list[Shape], result: Shape) -> None:
    """XLA's PadConv: the call on padded operands, its result sliced back to the old shape."""
    comp = call.parent
    operands = [_pad_to(comp, op, s, call) for op, s in zip(call.operands, operand_shapes)]
    old = call.shape.tuple_shapes[0]
    new = call.clone_with_new_operands(operands, shape=Shape.tuple_of([result, Shape.array("u8", (0,))]))
    comp.add_instruction(new, before=call)
    if result.dims != old.dims:
        gte = comp.add_new_instruction("get-tuple-element", [new], result, {"index": 0}, before=call)
        spec = SliceSpec(tuple((0, n, 1) for n in old.dims))
        sliced = comp.add_new_instruction("slice", [gte], result.with_dims(old.dims), {"slice": spec},
                                          before=call)
        scratch = comp.add_new_instruction("constant", [], Shape.array("u8", (0,)), before=call,
                                           literal=np.zeros((0,), np.uint8))
        tup = comp.add_new_instruction("tuple", [sliced, scratch], call.shape, before=call)
        comp.replace_instruction(call, tup)
    else:
        comp.replace_instruction(call, new)
    new.name = call.name  # the padded call keeps the name (XLA's SetAndSanitizeName)


@register_pass
@dataclass
class CudnnPadForConvolutions(DevicePass):
    """cuDNN convolution features padded for int8x4/int8x32 and f16 tensor-core kernels."""

    name = "cudnn_pad_for_convolutions"
    device: DeviceDescription | None = None  # the run's `--device`; None: the H100

    def run(self, module: HloModule) -> bool:
        cc = (self.device or H100).compute_capability
        changed = False
        for comp in non_fusion_computations(module):
            for call in [i for i in comp.instructions if is_cudnn_conv(i)]:
                found = _integer_shapes(call, 32, cc) if cc >= (7, 5) else None
                found = found or _integer_shapes(call, 4, cc)
                if found is not None:
                    pad_conv(call, *found)
                    changed = True
            if cc >= (7, 0):
                for call in [i for i in comp.instructions if is_cudnn_conv(i)]:
                    found = _tensor_core_shapes(call)
                    if found is not None:
                        pad_conv(call, *found)
                        changed = True
        return changed
