"""CudnnVectorizeConvolutions ("cudnn_vectorize_convolutions"): int8 cuDNN convolution calls in
cuDNN's vectorized layout NCHW_VECT_C, int8x32 (sm_75+) or int8x4
(`xla/service/gpu/transforms/cudnn_vectorize_convolutions.cc`).

Where it sits: registered, not in the `gpu` pipeline. XLA ran it in "conv_canonicalization"
right after `cudnn_pad_for_convolutions` (which pads int8 features to multiples of 32 or 4 for
it); the XLA:GPU that testdata/cudnn is compared with (jax 0.10.2, nvptx_compiler.cc's
OptimizeHloConvolutionCanonicalization) no longer runs it, and its int8 calls stay unvectorized,
so our pipeline leaves them so too (`hlo-opt --passes ...,cudnn_vectorize_convolutions` runs it).

A forward (or bias-activation) call with s8 (or u8) input and result whose input and output
features are multiples of k (32 first when the device is sm_75+, else 4) and which cuDNN can run
vectorized (`integer_conv_supported`) gets each feature dim split into [C/k, k], the k part a new
dim right after it that dim_labels leaves unnamed (`?`):

    c = (s8[4,16,16,64], u8[0]) custom-call(s8[4,16,16,32] x, s8[64,3,3,32] w), dim_labels=b01f_o01i->b01f
    becomes
    v = (s8[4,16,16,2,32], u8[0]) custom-call(reshape(x) s8[4,16,16,1,32], reshape(w) s8[64,3,3,1,32]),
        dim_labels=b01f?_o01i?->b01f?
    c = tuple(reshape(get-tuple-element(v, 0)) s8[4,16,16,64], get-tuple-element(v, 1))

The bias is unchanged, a side input split as the result. Feature f is [f / k, f % k] on both
sides, so the values do not change (the interpreter computes a vectorized call as its merged
form). Not done: re-vectorizing an already vectorized call (XLA's TryRevectorizeConv: nothing
here makes one), and XLA's reordering of int8x32 filters and biases for cuDNN
(`--xla_gpu_enable_cudnn_int8x32_convolution_reordering`, `reordered_int8_nchw_vect`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.hlo.attributes import ConvDimensionNumbers
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import DevicePass, register_pass
from hlo_opt.cudnn_conv_utils import BIAS_ACTIVATION, FORWARD, integer_conv_supported


def relevant(call: HloInstruction) -> bool:
    """XLA's GetRelevantConvs: forward calls of s8 or u8 input and result (int8xN -> int8xN)."""
    if call.opcode != "custom-call" or call.attrs.get("custom_call_target") not in (FORWARD, BIAS_ACTIVATION):
        return False
    if len(call.operands) < 2:
        return False
    t_in, t_out = call.operands[0].shape.element_type, call.shape.tuple_shapes[0].element_type
    return t_in is t_out and t_in.name in ("s8", "u8")


def _split(shape: Shape, dim: int, k: int) -> Shape:
    dims = list(shape.dims)
    dims[dim:dim + 1] = [dims[dim] // k, k]
    return Shape.array(shape.element_type, dims)


def vectorized_labels(d: ConvDimensionNumbers) -> ConvDimensionNumbers:
    """XLA's VectorizeDnums: an unnamed dim right after each feature dim ('f', 'i', 'f')."""
    inp, rest = d.text.split("_", 1)
    ker, out = rest.split("->")
    return ConvDimensionNumbers.parse(f"{inp.replace('f', 'f?')}_{ker.replace('i', 'i?')}->{out.replace('f', 'f?')}")


def try_vectorize(call: HloInstruction, k: int, cc: tuple[int, int]) -> bool:
    """XLA's TryVectorizeConv: the call with features split by `k` (see the module docstring)."""
    d: ConvDimensionNumbers = call.attrs["dim_labels"]
    x, y = call.operands[0].shape, call.shape.tuple_shapes[0]
    if x.dims[d.input_feature] % k or y.dims[d.output_feature] % k:
        return False
    if x.rank > 2 + len(d.input_spatial) or not integer_conv_supported(call, k, cc):
        return False  # already vectorized, or no int8xk kernel for it
    comp: HloComputation = call.parent

    def reshape(op: HloInstruction, dim: int) -> HloInstruction:
        return comp.add_new_instruction("reshape", [op], _split(op.shape, dim, k), before=call)

    operands = [reshape(call.operands[0], d.input_feature), reshape(call.operands[1], d.kernel_input_feature)]
    operands += list(call.operands[2:3])  # the bias, one value per output feature
    operands += [reshape(side, d.output_feature) for side in call.operands[3:4]]
    result = _split(y, d.output_feature, k)
    new = call.clone_with_new_operands(operands, shape=Shape.tuple_of([result] + list(call.shape.tuple_shapes[1:])))
    new.attrs["dim_labels"] = vectorized_labels(d)
    comp.add_instruction(new, before=call)
    value = comp.add_new_instruction("get-tuple-element", [new], result, {"index": 0}, before=call)
    parts = [comp.add_new_instruction("reshape", [value], Shape.array(y.element_type, y.dims), before=call)]
    for i, s in enumerate(call.shape.tuple_shapes[1:], start=1):
        parts.append(comp.add_new_instruction("get-tuple-element", [new], s, {"index": i}, before=call))
    comp.replace_instruction(call, comp.add_new_instruction("tuple", parts, call.shape, before=call))
    new.name = call.name
    return True


@register_pass
@dataclass
class CudnnVectorizeConvolutions(DevicePass):
    """int8 cuDNN convolution calls split into int8x32 / int8x4 vectors (NCHW_VECT_C)."""

    name = "cudnn_vectorize_convolutions"
    device: DeviceDescription | None = None  # the run's `--device`; None: the H100

    def run(self, module: HloModule) -> bool:
        cc = (self.device or H100).compute_capability
        changed = False
        for comp in non_fusion_computations(module):
            for call in [i for i in comp.instructions if relevant(i)]:
                done = cc >= (7, 5) and try_vectorize(call, 32, cc)
                changed |= done or try_vectorize(call, 4, cc)
        return changed
