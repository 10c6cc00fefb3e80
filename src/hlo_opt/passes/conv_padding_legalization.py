"""ConvPaddingLegalization ("gpu-conv-padding-legalization"): cuDNN calls get padding cuDNN
accepts - symmetric, non-negative, no lhs dilation - with explicit pads and slices for the rest
(`xla/backends/gpu/transforms/conv_padding_legalization.cc`).

Where it sits: "conv_canonicalization", after `cudnn-conv-rewriter` and
`cudnn-fused-convolution-rewriter`, before `cudnn_pad_for_convolutions`.

- forward (plain or fused): uneven padding or lhs dilation moves into a `pad` of the input (all
  positive padding and the interior dilation), negative padding into a `slice`; rhs dilation
  stays in the call when the padding was already symmetric, else it becomes interior padding of
  the kernel;
      call(x, w), window={size=3 pad=0_1}   ->   call(pad(x, 0), padding=0_0x0_1.., w), window={size=3}
- backward filter: the smaller of the two paddings stays, the excess pads the input;
- backward input: the call computes a larger input gradient (the padding made even by lowering
  the larger side) and a `slice` (inside a tuple with the scratch buffer) crops it.
Declines negative padding on backward calls (XLA's b/32744257).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from hlo_common.hlo.attributes import PaddingConfig, SliceSpec, Window
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.cudnn_conv_utils import BACKWARD_FILTER, BACKWARD_INPUT, is_cudnn_conv


def _symmetric(w: Window) -> bool:
    return all(d.padding_low == d.padding_high for d in w.dims)


def _negative(w: Window) -> bool:
    return any(d.padding_low < 0 or d.padding_high < 0 for d in w.dims)


def _base_dilated(w: Window) -> bool:
    return any(d.base_dilation != 1 for d in w.dims)


def _zero(comp: HloComputation, x: HloInstruction, before: HloInstruction) -> HloInstruction:
    t = x.shape.element_type
    return comp.add_new_instruction("constant", [], Shape.array(t, ()), before=before,
                                    literal=np.zeros((), t.np_dtype))


def _pad(comp: HloComputation, x: HloInstruction, config: list[list[int]], before: HloInstruction):
    dims = [size + lo + hi + max(0, size - 1) * it for size, (lo, hi, it) in zip(x.shape.dims, config)]
    padding = PaddingConfig(tuple(tuple(c) for c in config))
    shape = Shape.array(x.shape.element_type, dims)
    return comp.add_new_instruction("pad", [x, _zero(comp, x, before)], shape,
                                    {"padding": padding}, before=before)


def _slice(comp: HloComputation, x: HloInstruction, starts: list[int], limits: list[int],
           before: HloInstruction) -> HloInstruction:
    dims = [hi - lo for lo, hi in zip(starts, limits)]
    return comp.add_new_instruction("slice", [x], Shape.array(x.shape.element_type, dims),
                                    {"slice": SliceSpec(tuple((s, e, 1) for s, e in zip(starts, limits)))},
                                    before=before)


def _legal_input(conv: HloInstruction, window: Window) -> tuple[HloInstruction, Window]:
    """XLA's MaybePaddedAndSlicedInput: the input with the padding cuDNN cannot take applied."""
    comp, x = conv.parent, conv.operands[0]
    spatial = conv.attrs["dim_labels"].input_spatial
    dims = list(window.dims)
    if not _symmetric(window) or _base_dilated(window):
        config = [[0, 0, 0] for _ in x.shape.dims]
        for i, k in enumerate(spatial):
            d = dims[i]
            config[k] = [max(d.padding_low, 0), max(d.padding_high, 0), d.base_dilation - 1]
            dims[i] = replace(d, padding_low=min(d.padding_low, 0), padding_high=min(d.padding_high, 0),
                              base_dilation=1)
        x = _pad(comp, x, config, conv)
    if _negative(Window(tuple(dims))):
        starts, limits = [0] * x.shape.rank, list(x.shape.dims)
        for i, k in enumerate(spatial):
            d = dims[i]
            starts[k] -= min(d.padding_low, 0)
            limits[k] += min(d.padding_high, 0)
            dims[i] = replace(d, padding_low=max(d.padding_low, 0), padding_high=max(d.padding_high, 0))
        x = _slice(comp, x, starts, limits, conv)
    return x, Window(tuple(dims))


def _forward(conv: HloInstruction) -> bool:
    window: Window = conv.attrs["window"]
    if _symmetric(window) and not _negative(window) and not _base_dilated(window):
        return False
    x, window = _legal_input(conv, window)
    kernel, comp = conv.operands[1], conv.parent
    # rhs dilation stays in the call only where the padding was legal to begin with, which it is not
    # here; so a dilated kernel becomes a kernel with zeros between its taps.
    if any(d.window_dilation != 1 for d in window.dims):
        config = [[0, 0, 0] for _ in kernel.shape.dims]
        for i, k in enumerate(conv.attrs["dim_labels"].kernel_spatial):
            config[k][2] = window.dims[i].window_dilation - 1
        kernel = _pad(comp, kernel, config, conv)
    ks = conv.attrs["dim_labels"].kernel_spatial
    window = Window(tuple(replace(d, size=kernel.shape.dims[ks[i]], window_dilation=1)
                          for i, d in enumerate(window.dims)))
    _replace_call(conv, [x, kernel] + list(conv.operands[2:]), window)
    return True


def _replace_call(conv: HloInstruction, operands: list[HloInstruction], window: Window,
                  shape: Shape | None = None) -> HloInstruction:
    comp = conv.parent
    new = conv.clone_with_new_operands(operands, shape=shape)
    new.attrs["window"] = window
    new.name = comp.unique_name(conv.name)
    comp.add_instruction(new, before=conv)
    if shape is None:
        comp.replace_instruction(conv, new)
    return new


def _backward_filter(conv: HloInstruction) -> bool:
    window: Window = conv.attrs["window"]
    if _symmetric(window) or _negative(window):
        return False
    x = conv.operands[0]
    config = [[0, 0, 0] for _ in x.shape.dims]
    dims = []
    for d, k in zip(window.dims, conv.attrs["dim_labels"].input_spatial):
        keep = min(d.padding_low, d.padding_high)
        config[k] = [d.padding_low - keep, d.padding_high - keep, 0]
        dims.append(replace(d, padding_low=keep, padding_high=keep))
    padded = _pad(conv.parent, x, config, conv)
    _replace_call(conv, [padded, conv.operands[1]], Window(tuple(dims)))
    return True


def _backward_input(conv: HloInstruction) -> bool:
    window: Window = conv.attrs["window"]
    if _symmetric(window) or _negative(window):
        return False
    comp, result = conv.parent, conv.shape.tuple_shapes[0]
    spatial = conv.attrs["dim_labels"].input_spatial
    dims, grown = [], list(result.dims)
    starts, limits = [0] * result.rank, list(result.dims)
    for d, k in zip(window.dims, spatial):
        lo, hi = d.padding_low, d.padding_high
        dims.append(replace(d, padding_low=min(lo, hi), padding_high=min(lo, hi)))
        grown[k] += abs(lo - hi)
        if lo > hi:
            starts[k] = lo - hi
        limits[k] = starts[k] + result.dims[k]
    big = result.with_dims(grown)
    new = _replace_call(conv, list(conv.operands), Window(tuple(dims)),
                        Shape.tuple_of([big] + list(conv.shape.tuple_shapes[1:])))
    value = comp.add_new_instruction("get-tuple-element", [new], big, {"index": 0}, before=conv)
    scratch = comp.add_new_instruction("get-tuple-element", [new], new.shape.tuple_shapes[1], {"index": 1},
                                       before=conv)
    cropped = _slice(comp, value, starts, limits, conv)
    comp.replace_instruction(conv, comp.add_new_instruction("tuple", [cropped, scratch], conv.shape,
                                                            before=conv))
    return True


def legalize(conv: HloInstruction) -> bool:
    target = conv.attrs["custom_call_target"]
    if target == BACKWARD_INPUT:
        return _backward_input(conv)
    if target == BACKWARD_FILTER:
        return _backward_filter(conv)
    return _forward(conv)


@register_pass
@dataclass
class ConvPaddingLegalization(HloPass):
    """Padding of cuDNN convolution calls made symmetric and non-negative with pads and slices."""

    name = "gpu-conv-padding-legalization"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for conv in [i for i in comp.instructions if is_cudnn_conv(i)]:
                changed |= legalize(conv)
        return changed
