"""A `__cudnn$conv*` custom call as a cuDNN graph description (the cuda platform's cuDNN calls).

Where it sits: GPU facts shared by hlo-codegen and hlo-run. `describe_call(instr)` translates one
of XLA:GPU's cuDNN convolution calls (the targets of xla/service/gpu/cublas_cudnn.h, with their
`CudnnConvBackendConfig`) into a `ConvGraph`: plain data in the terms of cuDNN's graph API as the
`nvidia-cudnn-frontend` Python package takes it (`cudnn.pygraph`), with no cuDNN import, so it is
tested without a GPU. hlo-codegen's cuda target keeps the calls it describes (`cudnn-conv-fallback`
lowers the others to kernels of ours) and writes each graph into the manifest's
`CudnnConvolutionThunk` (`ConvGraph.to_json` / `from_json`); hlo-run's cuda platform builds and
runs the real graph from it (`hlo_run.cudnn_runner`, GPU only).

The translation follows XLA's xla/service/gpu/gpu_conv_runner.cc (GetGpuConvParams) and the
fused-graph construction of xla/stream_executor/cuda/cuda_dnn.cc:

- every call carries the *forward* convolution's window and dim_labels; the call's kind picks
  the cuDNN operation and which operand plays which role: forward `conv_fprop(image=x,
  weight=w) -> Y`, backward input `conv_dgrad(loss=dy, filter=w) -> DX`, backward filter
  `conv_wgrad(image=x, loss=dy) -> DW`;
- tensors are described in cuDNN's logical dim order, [N, C, spatial...] for activations and
  [K, C/groups, spatial...] for filters, with the element strides of the HLO buffer's physical
  layout (so an NHWC buffer is dims [N, C, H, W] with strides [HWC, 1, WC, C]); the groups are
  implied by C / filter C (cuDNN infers them), and kept here for the plan key and the checks;
- the window gives pre/post padding, stride and dilation; cuDNN takes neither negative padding
  nor base (lhs) dilation, and reverses the window only all at once (convolution mode);
- `__cudnn$convBiasActivationForward` then applies, in the accumulation type, the result scale
  (when not 1), `side_input_scale * side input` (when a side input is given), the bias
  (broadcast along the output features: dims [1, K, 1...]) and the activation, as cuDNN's
  fused graph and `hlo_common.interpreter.cudnn_conv` compute it;
- the call's second result, `u8[n]`, is the workspace cuDNN may use (a plan needing more is refused);
- `key` identifies the graph for the runner's plan cache (equal keys, equal plans).

A call cuDNN cannot take raises `CudnnUnsupported` with the reason (the caller keeps a kernel of
its own for it): besides the window's limits, the type combinations cuDNN has no kernel for
(`_check_types`: floats in and out of one type; int8 convolutions s8 x s8 -> s8 or f32 with an f32
bias and a side input of the result's type, XLA's CheckNoIllegalIntegerConvs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hlo_common.errors import HloError
from hlo_common.hlo.attributes import ConvDimensionNumbers, Window
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_common.interpreter.cudnn_conv import (
    BACKWARD_FILTER,
    BACKWARD_INPUT,
    BIAS_ACTIVATION,
    CUDNN_CONV_TARGETS,
    FORWARD,
    parse_cudnn_config,
)

# HLO element type -> cudnn.data_type member name
DATA_TYPES = {"f16": "HALF", "bf16": "BFLOAT16", "f32": "FLOAT", "f64": "DOUBLE", "s8": "INT8",
              "s32": "INT32", "u8": "UINT8"}
# the accumulation (compute and intermediate) type per input type, as XLA's runner picks it
COMPUTE_TYPES = {"HALF": "FLOAT", "BFLOAT16": "FLOAT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE", "INT8": "INT32"}
# the call kind -> (cuDNN operation, its two input ports and their dim_labels roles, the output's)
OPERATIONS = {
    FORWARD: ("conv_fprop", (("image", "input"), ("weight", "kernel")), "output"),
    BIAS_ACTIVATION: ("conv_fprop", (("image", "input"), ("weight", "kernel")), "output"),
    BACKWARD_INPUT: ("conv_dgrad", (("loss", "output"), ("filter", "kernel")), "input"),
    BACKWARD_FILTER: ("conv_wgrad", (("image", "input"), ("loss", "output")), "kernel"),
}


class CudnnUnsupported(HloError):
    """A convolution call cuDNN's graph API cannot take as it stands."""


@dataclass(frozen=True)
class TensorDesc:
    """One tensor of the graph: `operand` is the call operand it reads (-1: the call's result)."""

    name: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    data_type: str
    operand: int


@dataclass(frozen=True)
class Pointwise:
    """One fused step after the convolution: `scale` (by value), `add` (of tensor times value),
    `bias` (tensor), or an activation `relu` / `relu6` (relu clipped at value) / `elu` /
    `leaky_relu` (slope value) / `sigmoid` / `tanh`."""

    op: str
    tensor: TensorDesc | None = None
    value: float | None = None


@dataclass(frozen=True)
class ConvGraph:
    target: str
    operation: str  # conv_fprop | conv_dgrad | conv_wgrad
    inputs: tuple[tuple[str, TensorDesc], ...]  # (cuDNN port, tensor) in the operation's order
    output: TensorDesc
    pre_padding: tuple[int, ...]
    post_padding: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    convolution_mode: str  # CROSS_CORRELATION, or CONVOLUTION where the window is reversed
    groups: int
    io_data_type: str
    compute_data_type: str
    pointwise: tuple[Pointwise, ...]
    workspace_bytes: int

    def to_json(self) -> dict:
        """The graph as the manifest's CudnnConvolutionThunk carries it (JSON values only)."""
        return _jsonable(asdict(self))

    @staticmethod
    def from_json(data: dict) -> ConvGraph:
        """The inverse of `to_json`; a malformed description raises CudnnUnsupported."""
        try:
            d = dict(data)
            steps = tuple(Pointwise(p["op"], _tensor_from(p.get("tensor")), p.get("value"))
                          for p in d.pop("pointwise"))
            inputs = tuple((port, _tensor_from(t)) for port, t in d.pop("inputs"))
            output = _tensor_from(d.pop("output"))
            ints = {k: tuple(int(v) for v in d.pop(k)) for k in ("pre_padding", "post_padding", "stride",
                                                               "dilation")}
            return ConvGraph(inputs=inputs, output=output, pointwise=steps, **ints, **d)
        except (KeyError, TypeError, ValueError) as exc:
            raise CudnnUnsupported(f"malformed cuDNN graph description: {exc!r}") from None

    @property
    def key(self) -> tuple:
        """The plan cache's key: everything a cuDNN plan depends on (not the tensor names)."""
        def t(d: TensorDesc) -> tuple:
            return d.dims, d.strides, d.data_type

        steps = tuple((p.op, p.value, None if p.tensor is None else t(p.tensor)) for p in self.pointwise)
        return (self.operation, tuple((port, t(d)) for port, d in self.inputs), t(self.output),
                self.pre_padding, self.post_padding, self.stride, self.dilation, self.convolution_mode,
                self.groups, self.compute_data_type, steps)


def _jsonable(value):
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _tensor_from(data: dict | None) -> TensorDesc | None:
    if data is None:
        return None
    return TensorDesc(str(data["name"]), tuple(int(v) for v in data["dims"]),
                      tuple(int(v) for v in data["strides"]), str(data["data_type"]), int(data["operand"]))


def element_strides(shape: Shape) -> tuple[int, ...]:
    """Each logical dim's element stride in the buffer (the layout's minor_to_major order)."""
    strides = [0] * len(shape.dims)
    step = 1
    for d in shape.minor_to_major:
        strides[d] = step
        step *= shape.dims[d]
    return tuple(strides)


def _roles(dn: ConvDimensionNumbers) -> dict[str, tuple[int, ...]]:
    """The HLO dims of each role in cuDNN's order: [N, C, spatial...] / [K, C, spatial...]."""
    return {"input": (dn.input_batch, dn.input_feature) + tuple(dn.input_spatial),
            "output": (dn.output_batch, dn.output_feature) + tuple(dn.output_spatial),
            "kernel": (dn.kernel_output_feature, dn.kernel_input_feature) + tuple(dn.kernel_spatial)}


def _tensor(instr: HloInstruction, name: str, shape: Shape, order: tuple[int, ...],
            operand: int) -> TensorDesc:
    type_name = shape.element_type.name
    if type_name not in DATA_TYPES:
        raise CudnnUnsupported(f"{instr.name}: cuDNN takes no {type_name} tensor ({name})")
    strides = element_strides(shape)
    return TensorDesc(name, tuple(shape.dims[d] for d in order), tuple(strides[d] for d in order),
                      DATA_TYPES[type_name], operand)


def _window(instr: HloInstruction, spatial: int) -> tuple[tuple[int, ...], ...]:
    """(pre padding, post padding, stride, dilation, convolution mode) of the call's window."""
    window = instr.attrs.get("window") or Window(())
    dims = window.dims
    if len(dims) != spatial:
        raise CudnnUnsupported(f"{instr.name}: window has {len(dims)} dims, dim_labels {spatial} "
                               "spatial dims")
    if any(wd.base_dilation != 1 for wd in dims):
        raise CudnnUnsupported(f"{instr.name}: cuDNN takes no lhs_dilate")
    if any(wd.padding_low < 0 or wd.padding_high < 0 for wd in dims):
        raise CudnnUnsupported(f"{instr.name}: cuDNN takes no negative padding (XLA legalizes it first)")
    reversed_dims = {wd.window_reversal for wd in dims}
    if len(reversed_dims) > 1:
        raise CudnnUnsupported(f"{instr.name}: cuDNN reverses the whole window or none of it")
    mode = "CONVOLUTION" if reversed_dims == {True} else "CROSS_CORRELATION"
    return (tuple(wd.padding_low for wd in dims), tuple(wd.padding_high for wd in dims),
            tuple(wd.stride for wd in dims), tuple(wd.window_dilation for wd in dims), (mode,))


def _epilogue(instr: HloInstruction, roles: dict, out: TensorDesc) -> tuple[Pointwise, ...]:
    """The fused steps of a bias-activation call, in cuDNN's order (scale, side input, bias,
    activation); a plain forward call may carry an activation of none only."""
    config = parse_cudnn_config(instr)
    steps = []
    if instr.attrs.get("custom_call_target") != BIAS_ACTIVATION:
        if config.activation_mode != "kNone":
            raise CudnnUnsupported(f"{instr.name}: an activation on a non-fused convolution call")
        return ()
    if config.conv_result_scale != 1:
        steps.append(Pointwise("scale", value=config.conv_result_scale))
    if len(instr.operands) > 3:
        side = instr.operands[3].shape
        steps.append(Pointwise("add", _tensor(instr, "side_input", side, roles["output"], 3),
                               config.side_input_scale))
    if len(instr.operands) > 2:
        bias = instr.operands[2].shape
        if bias.dims != (out.dims[1],):
            raise CudnnUnsupported(f"{instr.name}: bias {bias} is not one value per output feature")
        rank = len(out.dims)
        steps.append(Pointwise("bias", TensorDesc("bias", (1, out.dims[1]) + (1,) * (rank - 2),
                                                  (out.dims[1], 1) + (out.dims[1],) * (rank - 2),
                                                  _tensor(instr, "bias", bias, (0,), 2).data_type, 2)))
    activation = {"kNone": None, "kRelu": "relu", "kRelu6": "relu6", "kElu": "elu",
                  "kLeakyRelu": "leaky_relu", "kSigmoid": "sigmoid", "kTanh": "tanh"}[config.activation_mode]
    value = {"relu6": 6.0, "leaky_relu": config.leakyrelu_alpha}.get(activation)
    if activation:
        steps.append(Pointwise(activation, value=value))
    return tuple(steps)


def _check_types(instr: HloInstruction, io_type: str, out_type: str) -> None:
    """The operand and result types cuDNN has kernels for (see the module docstring)."""
    names = [op.shape.element_type.name for op in instr.operands[2:4]]  # bias, side input
    extra = [DATA_TYPES.get(n, n) for n in names]
    if io_type == "INT8":
        ok = out_type in ("INT8", "FLOAT") and extra[:1] in ([], ["FLOAT"]) and extra[1:] in ([], [out_type])
    else:
        ok = out_type == io_type and all(t == io_type for t in extra)
    if not ok:
        types = ", ".join([io_type.lower()] + [t.lower() for t in extra]) + f" -> {out_type.lower()}"
        raise CudnnUnsupported(f"{instr.name}: cuDNN has no convolution {types}")


def describe_call(instr: HloInstruction) -> ConvGraph:
    """The cuDNN graph of one `__cudnn$conv*` custom call (raises CudnnUnsupported)."""
    target = instr.attrs.get("custom_call_target")
    if instr.opcode != "custom-call" or target not in CUDNN_CONV_TARGETS:
        raise CudnnUnsupported(f"{instr.name}: not a cuDNN convolution call")
    dn = instr.attrs.get("dim_labels")
    if not isinstance(dn, ConvDimensionNumbers):
        raise CudnnUnsupported(f"{instr.name}: a cuDNN convolution needs dim_labels")
    if "?" in dn.text:  # the graph runner describes plain tensors only; the fallback merges the vectors
        raise CudnnUnsupported(f"{instr.name}: a vectorized int8 (NCHW_VECT_C) call is not yet described "
                               f"as a cuDNN graph")
    if int(instr.attrs.get("batch_group_count", 1) or 1) != 1:
        raise CudnnUnsupported(f"{instr.name}: cuDNN takes no batch_group_count")
    result = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
    operation, ports, out_role = OPERATIONS[target]
    roles = _roles(dn)
    inputs = tuple((port, _tensor(instr, port, instr.operands[i].shape, roles[role], i))
                   for i, (port, role) in enumerate(ports))
    out = _tensor(instr, "output", result[0], roles[out_role], -1)
    pre, post, stride, dilation, (mode,) = _window(instr, len(dn.input_spatial))
    io_type = inputs[0][1].data_type
    if io_type not in COMPUTE_TYPES or any(d.data_type != io_type for _, d in inputs):
        types = "/".join(d.data_type for _, d in inputs)
        raise CudnnUnsupported(f"{instr.name}: cuDNN convolutions take no {types} operands")
    _check_types(instr, io_type, out.data_type)
    scratch = result[1] if len(result) > 1 else None
    workspace = scratch.num_elements if scratch is not None and scratch.element_type.name == "u8" else 0
    return ConvGraph(target, operation, inputs, out, pre, post, stride, dilation, mode,
                     int(instr.attrs.get("feature_group_count", 1) or 1), io_type, COMPUTE_TYPES[io_type],
                     _epilogue(instr, roles, out), workspace)
