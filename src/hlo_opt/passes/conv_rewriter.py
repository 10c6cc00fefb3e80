"""ConvRewriter ("cudnn-conv-rewriter"): every convolution cuDNN can run becomes a
`__cudnn$convForward`, `__cudnn$convBackwardInput` or `__cudnn$convBackwardFilter` custom call
(`xla/backends/gpu/transforms/conv_rewriter.cc`).

Where it sits: first pass of the "conv_canonicalization" pipeline, after the optimization
pipeline and before layout assignment; `cudnn-fused-convolution-rewriter` and
`gpu-conv-padding-legalization` work on its calls next.

    c = f32[4,16,16,16] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
    becomes
    call = (f32[4,16,16,16], u8[0]) custom-call(x, w), window=..., dim_labels=...,
           custom_call_target="__cudnn$convForward", backend_config={..."cudnn_conv_backend_config":...}
    c = f32[4,16,16,16] get-tuple-element(call), index=0

Every call carries the window and dim_labels of the *forward* convolution it belongs to (the
backward calls read the forward output as their gradient operand). Recognition, in XLA's order:

- backward input: `conv(dy, reverse(w))` with all kernel spatial dims reversed (or reshape(reverse)
  for a 1D convolution written as 2D, or a 1x1 / constant kernel with lhs dilation); stride 1, no
  rhs dilation; the forward stride is the lhs dilation; no feature groups;
- backward filter: `conv(x, dy)` that does not look like a forward convolution (batch or output
  features differ, or a kernel spatial dim larger than the output's) with stride 1, no lhs
  dilation, non-negative low padding; the forward stride is the rhs dilation; batch groups become
  the call's feature groups;
- forward: at most 3 spatial dims, no zero-element operand, all or no dims reversed (2D) or none
  (1D/3D); batch groups are first turned into feature groups.

Declines (leaves the convolution) for element types cuDNN lacks (pred, complex, f8 other than
e4m3fn/e5m2) and for the patterns none of the three accept. cuDNN calls already in the input must
carry a well-formed CudnnConvBackendConfig (else a one-line error naming the call).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hlo_common.hlo.attributes import ConvDimensionNumbers, Window, WindowDim
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.cudnn_conv_utils import (
    BACKWARD_FILTER, BACKWARD_INPUT, CALL_NAMES, FORWARD, cudnn_backend_config, is_cudnn_conv,
    make_dim_labels, parse_cudnn_config,
)

_F8_OK = ("f8e4m3fn", "f8e5m2")
_Match = tuple[Window, ConvDimensionNumbers, HloInstruction]


def _types_ok(conv: HloInstruction) -> bool:
    """XLA's CheckTypes: floating-point or integral operands and result (f8: e4m3fn, e5m2)."""
    for shape in (conv.shape, conv.operands[0].shape, conv.operands[1].shape):
        t = shape.element_type
        if not (t.is_float or t.is_integer) or t.is_pred:
            return False
        if t.is_float and t.name.startswith("f8") and t.name not in _F8_OK:
            return False
    return True


def _groups(conv: HloInstruction, key: str) -> int:
    return int(conv.attrs.get(key, 1) or 1)


def _inserted_degenerate_dim(reshape: HloInstruction) -> int | None:
    """The one size-1 dim a reshape inserts (and nothing else), if that is all it does."""
    src, dst = reshape.operands[0].shape.dims, reshape.shape.dims
    if len(dst) != len(src) + 1:
        return None
    for pos, size in enumerate(dst):
        if size == 1 and dst[:pos] + dst[pos + 1:] == src:
            return pos
    return None


def _conv1d_as_2d(conv: HloInstruction) -> bool:
    """XLA's MaybeConv1dToConv2d: a 2D convolution whose kernel is a reshape adding one size-1
    spatial dim."""
    window, kernel = conv.attrs["window"], conv.operands[1]
    if len(window.dims) != 2 or kernel.opcode != "reshape":
        return False
    pos = _inserted_degenerate_dim(kernel)
    return pos is not None and pos in conv.attrs["dim_labels"].kernel_spatial


def _looks_like_forward(conv: HloInstruction) -> bool:
    d: ConvDimensionNumbers = conv.attrs["dim_labels"]
    lhs, rhs, out = conv.operands[0].shape.dims, conv.operands[1].shape.dims, conv.shape.dims
    if lhs[d.input_batch] != out[d.output_batch] or rhs[d.kernel_output_feature] != out[d.output_feature]:
        return False
    return all(rhs[k] <= out[o] for k, o in zip(d.kernel_spatial, d.output_spatial))


def _can_be_forward(conv: HloInstruction) -> bool:
    d: ConvDimensionNumbers = conv.attrs["dim_labels"]
    if len(d.input_spatial) > 3:
        return False
    if conv.operands[0].shape.num_elements == 0 or conv.operands[1].shape.num_elements == 0:
        return False
    reversed_ = [wd.window_reversal for wd in conv.attrs["window"].dims]
    if len(d.input_spatial) == 2:
        return all(reversed_) or not any(reversed_)
    return not any(reversed_)


def _high_padding(low: int, lo_bound: int, stride: int) -> int:
    """The high padding nearest `low` among the equivalent ones [lo_bound, lo_bound + stride - 1]
    (cuDNN wants even padding; conv-padding legalization fixes what stays uneven)."""
    if lo_bound <= low <= lo_bound + stride - 1:
        return low
    return lo_bound if low < lo_bound else lo_bound + stride - 1


def match_backward_filter(conv: HloInstruction) -> _Match | None:
    if _groups(conv, "feature_group_count") > 1 or _looks_like_forward(conv):
        return None
    d: ConvDimensionNumbers = conv.attrs["dim_labels"]
    window: Window = conv.attrs["window"]
    for wd in window.dims:
        if wd.stride != 1 or wd.base_dilation != 1 or wd.padding_low < 0 or wd.window_reversal:
            return None
    rhs, out = conv.operands[1].shape.dims, conv.shape.dims
    small = sum(1 for k, o in zip(d.kernel_spatial, d.output_spatial) if rhs[k] <= out[o])
    dilated = any(wd.window_dilation != 1 for wd in window.dims)
    if (not d.kernel_spatial or small > 1 or (small == 1 and not _conv1d_as_2d(conv))) and not dilated:
        return None
    dims = []
    for i, wd in enumerate(window.dims):
        size = out[d.output_spatial[i]]  # the forward kernel
        in_size = conv.operands[0].shape.dims[d.input_spatial[i]]
        stride = wd.window_dilation
        min_high = size + (wd.size - 1) * stride - in_size - wd.padding_low
        high = _high_padding(wd.padding_low, min_high, stride)
        if high < 0:
            return None
        dims.append(WindowDim(size, stride, wd.padding_low, high))
    dnums = make_dim_labels((d.input_feature, d.input_batch, d.input_spatial),
                            (d.output_batch, d.output_feature, d.output_spatial),
                            (d.kernel_input_feature, d.kernel_output_feature, d.kernel_spatial))
    return Window(tuple(dims)), dnums, conv.operands[0]


def _backward_input_kernel(conv: HloInstruction) -> HloInstruction | None:
    """The un-reversed kernel of a backward-input pattern, or None when the pattern is not one."""
    d: ConvDimensionNumbers = conv.attrs["dim_labels"]
    window: Window = conv.attrs["window"]
    kernel = conv.operands[1]
    reversed_kernel = kernel.opcode == "reverse" and sorted(kernel.attrs.get("dimensions", ())) == sorted(
        d.kernel_spatial)
    reversed_1d = _conv1d_as_2d(conv) and kernel.operands[0].opcode == "reverse"
    one_by_one = all(wd.size == 1 for wd in window.dims)
    base_dilated = any(wd.base_dilation != 1 for wd in window.dims)
    if not (reversed_kernel or reversed_1d or (base_dilated and (kernel.opcode == "constant" or one_by_one))):
        return None
    if any(wd.stride != 1 or wd.window_dilation != 1 or wd.window_reversal for wd in window.dims):
        return None
    comp = conv.parent
    if reversed_kernel:
        return kernel.operands[0]
    if reversed_1d:
        return comp.add_new_instruction("reshape", [kernel.operands[0].operands[0]], kernel.shape,
                                        before=conv)
    if kernel.opcode == "constant":  # reverse(reverse(c)): the call subsumes one, algsimp folds the other
        twice = comp.add_new_instruction("reverse", [kernel], kernel.shape,
                                         {"dimensions": tuple(d.kernel_spatial)}, before=conv)
        return twice
    return kernel


def match_backward_input(conv: HloInstruction) -> _Match | None:
    if _groups(conv, "feature_group_count") > 1:
        return None  # XLA keeps grouped transposed convolutions forward (no cuDNN gain)
    d: ConvDimensionNumbers = conv.attrs["dim_labels"]
    window: Window = conv.attrs["window"]
    dims = []
    for i, wd in enumerate(window.dims):
        low = wd.size - 1 - wd.padding_low
        if low < 0:
            return None
        in_size = conv.shape.dims[d.output_spatial[i]]
        out_size = conv.operands[0].shape.dims[d.input_spatial[i]]
        total = wd.size + wd.base_dilation * (out_size - 1) - in_size
        high = _high_padding(low, total - low, wd.base_dilation)
        if high < 0:
            return None
        dims.append(replace(wd, stride=wd.base_dilation, base_dilation=1, padding_low=low, padding_high=high))
    if any(wd.stride != 1 or wd.window_dilation != 1 or wd.window_reversal for wd in window.dims):
        return None
    kernel = _backward_input_kernel(conv)
    if kernel is None:
        return None
    dnums = make_dim_labels((d.output_batch, d.output_feature, d.output_spatial),
                            (d.kernel_output_feature, d.kernel_input_feature, d.kernel_spatial),
                            (d.input_batch, d.input_feature, d.input_spatial))
    return Window(tuple(dims)), dnums, kernel


def _batch_groups_as_feature_groups(conv: HloInstruction) -> HloInstruction:
    """XLA's ConvertBatchGroupedToFeatureGroupedConvolution: lhs batch [G*N] -> features [.., G*C]."""
    d: ConvDimensionNumbers = conv.attrs["dim_labels"]
    g = _groups(conv, "batch_group_count")
    lhs, comp = conv.operands[0], conv.parent
    t, dims = lhs.shape.element_type, list(lhs.shape.dims)
    b, f = d.input_batch, d.input_feature
    split = dims[:b] + [g, dims[b] // g] + dims[b + 1:]
    x = comp.add_new_instruction("reshape", [lhs], Shape.array(t, split), before=conv)
    perm = list(range(len(split)))
    perm.remove(b)
    perm.insert(f, b)
    x = comp.add_new_instruction("transpose", [x], Shape.array(t, [split[p] for p in perm]),
                                 {"dimensions": tuple(perm)}, before=conv)
    merged = list(x.shape.dims)
    merged[f] = merged[f] * merged.pop(f + 1)
    x = comp.add_new_instruction("reshape", [x], Shape.array(t, merged), before=conv)
    new = conv.clone_with_new_operands([x, conv.operands[1]])
    new.attrs["feature_group_count"] = g
    new.attrs.pop("batch_group_count", None)
    return comp.add_instruction(new, before=conv)


def _call(conv: HloInstruction, target: str, operands: list[HloInstruction], window: Window,
          dnums: ConvDimensionNumbers, groups: int) -> HloInstruction:
    shape = Shape.tuple_of([conv.shape, Shape.array("u8", (0,))])
    attrs = {"window": window, "dim_labels": dnums, "custom_call_target": target}
    if groups != 1:
        attrs["feature_group_count"] = groups
    if "operand_precision" in conv.attrs:
        attrs["operand_precision"] = conv.attrs["operand_precision"]
    call = conv.parent.add_new_instruction("custom-call", operands, shape, attrs, name=CALL_NAMES[target],
                                           before=conv)
    call.backend_config_data = cudnn_backend_config(conv.backend_config_data)
    call.metadata = list(conv.metadata)
    return call


def rewrite(conv: HloInstruction) -> bool:
    """Replace one convolution by a cuDNN call (and a get-tuple-element); False if none fits."""
    if not _types_ok(conv) or "window" not in conv.attrs or "dim_labels" not in conv.attrs:
        return False
    comp: HloComputation = conv.parent
    m = match_backward_input(conv)
    if m is not None:
        groups = _groups(conv, "feature_group_count")
        call = _call(conv, BACKWARD_INPUT, [conv.operands[0], m[2]], m[0], m[1], groups)
    elif (m := match_backward_filter(conv)) is not None:
        groups = _groups(conv, "batch_group_count")
        call = _call(conv, BACKWARD_FILTER, [m[2], conv.operands[1]], m[0], m[1], groups)
    elif _can_be_forward(conv):
        src = _batch_groups_as_feature_groups(conv) if _groups(conv, "batch_group_count") > 1 else conv
        call = _call(conv, FORWARD, list(src.operands), src.attrs["window"], src.attrs["dim_labels"],
                     _groups(src, "feature_group_count"))
        if src is not conv:
            comp.remove_instruction(src)
    else:
        return False
    gte = comp.add_new_instruction("get-tuple-element", [call], conv.shape, {"index": 0}, before=conv)
    comp.replace_instruction(conv, gte)
    return True


@register_pass
@dataclass
class ConvRewriter(HloPass):
    """Convolutions -> `__cudnn$conv*` custom calls (forward, backward input, backward filter)."""

    name = "cudnn-conv-rewriter"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for call in [i for i in comp.instructions if is_cudnn_conv(i)]:
                parse_cudnn_config(call)  # a call of the input with a malformed config: one-line error
            for conv in [i for i in comp.instructions if i.opcode == "convolution"]:
                changed |= rewrite(conv)
        return changed
