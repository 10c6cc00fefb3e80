"""What the cuDNN convolution passes of hlo-opt share (XLA's `xla/service/gpu/cublas_cudnn.h` and
the helpers the conv passes keep beside it): the call targets, which role (input, filter, output)
each operand and the result of a call play, dim_labels built from positions, and the
GpuBackendConfig a freshly rewritten call carries.

Users: `conv-rewriter`, `cudnn-fused-convolution-rewriter`, `gpu-conv-padding-legalization`,
`cudnn_pad_for_convolutions`, the cuDNN constraints of `layout-assignment` and the custom-call
handler of `layout_normalization`. The targets and the backend-config parser are the
interpreter's (`hlo_common.interpreter.cudnn_conv`), so there is one definition of each.
"""

from __future__ import annotations

from hlo_common.hlo.attributes import ConvDimensionNumbers
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_common.interpreter.cudnn_conv import (
    BACKWARD_FILTER, BACKWARD_INPUT, BIAS_ACTIVATION, CUDNN_CONV_TARGETS, FORWARD, parse_cudnn_config,
)

__all__ = ["BACKWARD_FILTER", "BACKWARD_INPUT", "BIAS_ACTIVATION", "CUDNN_CONV_TARGETS", "FORWARD",
           "parse_cudnn_config", "is_cudnn_conv", "is_forward_conv", "make_dim_labels", "role_shapes",
           "cudnn_backend_config", "CALL_NAMES", "integer_conv_supported", "vectorized_feature_dims"]

# XLA's user-friendly names for the calls (CreateGpuConv in conv_rewriter.cc).
CALL_NAMES = {FORWARD: "cudnn-conv", BACKWARD_INPUT: "cudnn-conv-bw-input",
              BACKWARD_FILTER: "cudnn-conv-bw-filter", BIAS_ACTIVATION: "cudnn-conv-bias-activation"}


def is_cudnn_conv(instr: HloInstruction) -> bool:
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in CUDNN_CONV_TARGETS


def is_forward_conv(instr: HloInstruction) -> bool:
    """XLA's IsConvCustomCall: a forward call, plain or with bias and activation."""
    target = instr.attrs.get("custom_call_target")
    return instr.opcode == "custom-call" and target in (FORWARD, BIAS_ACTIVATION)


_Dims = tuple[int, int, tuple[int, ...]]


def make_dim_labels(input_dims: _Dims, kernel_dims: _Dims, output_dims: _Dims) -> ConvDimensionNumbers:
    """dim_labels from (batch, feature, spatial) positions of the input and output and
    (input feature, output feature, spatial) positions of the kernel."""
    def side(dims: tuple[int, int, tuple[int, ...]], letters: str) -> str:
        first, second, spatial = dims
        labels = {first: letters[0], second: letters[1]}
        labels.update({pos: str(k) for k, pos in enumerate(spatial)})
        return "".join(labels[k] for k in range(len(labels)))

    return ConvDimensionNumbers.parse(
        f"{side(input_dims, 'bf')}_{side(kernel_dims, 'io')}->{side(output_dims, 'bf')}")


def role_shapes(call: HloInstruction, lhs: Shape | None = None, rhs: Shape | None = None,
                result: Shape | None = None) -> tuple[Shape, Shape, Shape]:
    """(input, filter, output) shapes of the forward convolution a call describes: a backward-input
    call reads the output and writes the input, a backward-filter call reads the input and the
    output and writes the filter. Shapes default to the call's own."""
    lhs = lhs or call.operands[0].shape
    rhs = rhs or call.operands[1].shape
    result = result or (call.shape.tuple_shapes[0] if call.shape.is_tuple else call.shape)
    target = call.attrs.get("custom_call_target")
    if target == BACKWARD_INPUT:
        return result, rhs, lhs
    if target == BACKWARD_FILTER:
        return lhs, result, rhs
    return lhs, rhs, result


def vectorized_feature_dims(call: HloInstruction) -> tuple[int | None, int | None, int | None]:
    """XLA's FindVectorizedFeatureDims: the one dim dim_labels leaves unnamed (NCHW_VECT_C's
    vector dim) of the input, the filter and the result, or None where there is none."""
    d: ConvDimensionNumbers = call.attrs["dim_labels"]
    named = ((d.input_batch, d.input_feature, *d.input_spatial),
             (d.kernel_input_feature, d.kernel_output_feature, *d.kernel_spatial),
             (d.output_batch, d.output_feature, *d.output_spatial))
    shapes = (call.operands[0].shape, call.operands[1].shape, call.shape.tuple_shapes[0])
    out = []
    for shape, dims in zip(shapes, named):
        rest = [k for k in range(shape.rank) if k not in dims]
        out.append(rest[0] if rest else None)
    return out[0], out[1], out[2]


def integer_conv_supported(call: HloInstruction, vector_size: int, cc: tuple[int, int]) -> bool:
    """XLA's CudnnSupportsOptimizedIntegerConvolution (xla/service/gpu/cudnn_support_utils.cc)."""
    if vector_size not in (4, 32) or (vector_size == 32 and cc < (7, 5)) or cc < (6, 1):
        return False
    if call.attrs.get("custom_call_target") not in (FORWARD, BIAS_ACTIVATION):
        return False
    x, w, y = call.operands[0].shape, call.operands[1].shape, call.shape.tuple_shapes[0]
    if not (x.element_type.is_integer and w.element_type.is_integer):
        return False
    d: ConvDimensionNumbers = call.attrs["dim_labels"]
    if len(d.input_spatial) != 2 or len(d.kernel_spatial) != 2 or len(d.output_spatial) != 2:
        return False
    window = call.attrs["window"].dims
    if vector_size == 32:
        if not y.element_type.is_integer:
            return False
        for k in range(2):  # XLA compares with the base dilation here, as cudnn_support_utils does
            size, taps = x.dims[d.input_spatial[k]], w.dims[d.kernel_spatial[k]]
            if size <= (taps - 1) * window[k].base_dilation:
                return False
    return not any(wd.base_dilation != 1 or wd.window_dilation != 1 for wd in window)


def cudnn_backend_config(old: object = None, **fields) -> dict:
    """The GpuBackendConfig of a new call: a CudnnConvBackendConfig with conv_result_scale 1 (XLA's
    GetDefaultBackendConfig) and cuDNN's neutral values printed as XLA prints them."""
    cfg = {"activation_mode": "kNone", "conv_result_scale": 1, "side_input_scale": 0, "leakyrelu_alpha": 0}
    cfg.update(fields)
    prev = old if isinstance(old, dict) else {}
    return {"operation_queue_id": str(prev.get("operation_queue_id", "0")),
            "wait_on_operation_queues": list(prev.get("wait_on_operation_queues", [])),
            "cudnn_conv_backend_config": cfg,
            "force_earliest_schedule": bool(prev.get("force_earliest_schedule", False))}
