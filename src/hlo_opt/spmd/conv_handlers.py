"""The partitioner's handler for convolution over its batch and feature dims (XLA's
convolution_handler.cc in xla/service/spmd/, which shares the dot handler's strategies).

A convolution is a dot over three kinds of axes: the input's batch (the output's batch, like a
dot's lhs non-contracting dim), the kernel's output feature (the output's feature, like rhs
non-contracting) and the input feature (contracted with the kernel's input feature). The
iteration-space tiling is chosen as for a dot (`hlo_opt.spmd.dot_dims`), cheapest in bytes among
the operands' and the result's layouts. A spatial axis may be split (not with input dilation):
the input then holds even tiles, each device's output tile needs the input window
[c * o * stride - pad_low, ...) of (o - 1) * stride + dilated window size elements, which the
halo exchange of `hlo_opt.spmd.window` fetches (zeros past the edges standing for the padding),
and the local convolution runs unpadded on it; the kernel stays whole along its spatial dims.
With feature groups only the batch and spatial axes are split. A split contraction ends in an
all-reduce of the partial sums.

A spatial dim whose one output element sums the whole input against the whole (dilated) kernel
(output size 1, no input dilation, no low padding, input size = kernel size * window dilation:
the weight gradients of XLA's ConvolutionLhsTiledRhsTiled cases) is a contraction: input tile c
meets kernel tile c alone, so both keep their tiles, each device slides its kernel tile over its
input tile and the partial sums are all-reduced, as XLA's convolution_handler.cc does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hlo_common.hlo.attributes import Window
from hlo_common.hlo.hlo_creation_utils import make_constant
from hlo_common.hlo.ir import HloInstruction
from hlo_opt.spmd import dot_dims
from hlo_opt.spmd.dot_dims import CONTRACTING, LHS, RHS, DotAxis
from hlo_opt.spmd.reshard import reshard_cost
from hlo_opt.spmd.tiling import Tiling
from hlo_opt.spmd.window import window as halo_window

SPATIAL = "spatial"


def conv_axes(conv: HloInstruction) -> list[DotAxis]:
    """The iteration space's axes, batch, output feature and input feature first, then one per
    spatial dim in order; out indices skip the output dims of whole-window contractions."""
    d = conv.attrs["dim_labels"]
    hidden = _hidden_out_dims(conv)

    def out(o):
        return o - sum(h < o for h in hidden)

    axes = [DotAxis(LHS, d.input_batch, None, out(d.output_batch)),
            DotAxis(RHS, None, d.kernel_output_feature, out(d.output_feature)),
            DotAxis(CONTRACTING, d.input_feature, d.kernel_input_feature, None)]
    for i, k, o in zip(d.input_spatial, d.kernel_spatial, d.output_spatial):
        axes.append(DotAxis(CONTRACTING, i, k, None) if o in hidden else DotAxis(SPATIAL, i, k, out(o)))
    return axes


def _window(conv: HloInstruction) -> list:
    window = conv.attrs.get("window")
    return list(window.dims) if window is not None else []


def _hidden_out_dims(conv: HloInstruction) -> list[int]:
    """The output dims (size 1) of the spatial dims that are whole-window contractions."""
    d = conv.attrs["dim_labels"]
    lhs, rhs = conv.operands
    hidden = []
    for j, wd in enumerate(_window(conv)):
        i, k, o = d.input_spatial[j], d.kernel_spatial[j], d.output_spatial[j]
        if conv.shape.dims[o] == 1 and wd.base_dilation == 1 and wd.padding_low == 0 \
                and not wd.window_reversal and lhs.shape.dims[i] == rhs.shape.dims[k] * wd.window_dilation:
            hidden.append(o)
    return hidden


def _out(conv: HloInstruction, space: Tiling, axes) -> Tiling:
    """The result's tiling: the space's out projection with the hidden dims put back untiled."""
    ids = dot_dims.project(space, axes, "out").ids
    for o in _hidden_out_dims(conv):
        ids = np.expand_dims(ids, o)
    return Tiling.of(ids)


def _lift_out(conv: HloInstruction, t: Tiling, axes) -> Tiling | None:
    hidden = _hidden_out_dims(conv)
    if any(t.tiles[o] != 1 for o in hidden):
        return None
    return dot_dims.lift(Tiling.of(np.squeeze(t.ids, axis=tuple(hidden))), axes, "out")


def _fixed_axes(conv: HloInstruction, axes) -> list[int]:
    """The axes that stay whole: spatial ones with input dilation (transposed convolutions), and
    all but the batch and the spatial ones with feature groups."""
    grouped = conv.attrs.get("feature_group_count", 1) != 1
    window = _window(conv)
    return [k for k, ax in enumerate(axes)
            if (ax.kind == SPATIAL and window[k - 3].base_dilation != 1)
            or (grouped and ax.kind not in (LHS, SPATIAL))]


def _spatial(space: Tiling, axes) -> list[int]:
    return [k for k, ax in enumerate(axes) if ax.kind == SPATIAL and space.tiles[k] > 1]


def _kernel(space: Tiling, axes) -> Tiling:
    """The kernel's tiling: whole along its spatial dims (each device slides all of it)."""
    return dot_dims.project(space.to_replication(_spatial(space, axes)), axes, "rhs")


def handle_convolution(p, instr: HloInstruction) -> bool:
    if instr.attrs.get("batch_group_count", 1) != 1 or instr.shape.is_tuple:
        return False
    axes = conv_axes(instr)
    lhs, rhs = instr.operands
    want = p.wanted(instr)
    space = _space(p, instr, axes, p.values[lhs][1], p.values[rhs][1], want)
    if space is None:
        return False
    need_l = dot_dims.project(space, axes, "lhs")
    out = _out(instr, space, axes)
    x = p.get(lhs, need_l)
    window = _window(instr)
    zero = make_constant(p.b.comp, 0, lhs.shape.element_type)
    for k in _spatial(space, axes):  # each output tile's input window, halos from the neighbours
        ax, wd, tiles = axes[k], window[k - 3], space.tiles[k]
        o = instr.shape.dims[instr.attrs["dim_labels"].output_spatial[k - 3]] // tiles
        span = (o - 1) * wd.stride + (wd.size - 1) * wd.window_dilation + 1
        starts = [c * o * wd.stride - wd.padding_low for c in range(tiles)]
        x = halo_window(p.b, x, need_l, ax.lhs, lhs.shape.dims[ax.lhs], starts, span, zero)
        window[k - 3] = replace(wd, padding_low=0, padding_high=0)
    for k in range(3, len(axes)):  # whole-window contractions: each device's kernel tile
        if axes[k].kind == CONTRACTING:
            window[k - 3] = replace(window[k - 3], size=window[k - 3].size // space.tiles[k])
    attrs = dict(instr.attrs)
    if window:  # a convolution with no spatial dims (a dot written as one) has no window
        attrs["window"] = Window(tuple(window))
    kernel = p.get(rhs, _kernel(space, axes))
    new = p.b.add("convolution", [x, kernel], p.local(instr.shape, out, instr), attrs)
    p.values[instr] = (new, out)
    contracting = [k for k, ax in enumerate(axes) if ax.kind == CONTRACTING and space.tiles[k] > 1]
    if contracting:
        add = p.b.reducer("add", instr.shape.element_type)
        p.values[instr] = (p.b.all_reduce(new, space.groups(contracting), add), out)
    return True


def _space(p, instr, axes, have_l: Tiling, have_r: Tiling, want: Tiling) -> Tiling | None:
    lhs, rhs = instr.operands
    fixed = _fixed_axes(instr, axes)
    candidates = [dot_dims.joint(have_l, have_r, axes), dot_dims.lift(have_l, axes, "lhs"),
                  dot_dims.lift(have_r, axes, "rhs"), _lift_out(instr, want, axes)]
    best, best_cost = None, None
    for space in candidates:
        if space is None:
            continue
        space = space.to_replication(fixed)
        need_l = dot_dims.project(space, axes, "lhs")
        need_r = _kernel(space, axes)
        out = _out(instr, space, axes)
        if any(t.local_dims(s.dims) is None for t, s in
               ((need_l, lhs.shape), (need_r, rhs.shape), (out, instr.shape))):
            continue
        cost = reshard_cost(lhs.shape.dims, have_l, need_l) + reshard_cost(rhs.shape.dims, have_r, need_r)
        reduced = 1
        for k, ax in enumerate(axes):
            if ax.kind == CONTRACTING:
                reduced *= space.tiles[k]
        local_out = 1
        for dim in instr.shape.dims:
            local_out *= dim
        local_out /= out.num_tiles
        cost += 2 * local_out * (reduced - 1) / reduced + reshard_cost(instr.shape.dims, out, want)
        # equal bytes: the more tiled space, each device computing less
        key = (cost, -space.num_tiles)
        if best_cost is None or key < best_cost:
            best, best_cost = space, key
    return best


def forward(conv: HloInstruction, index: int, t: Tiling) -> Tiling | None:
    """Propagation: the result's tiling from the input's (index 0) or the kernel's (1)."""
    if index > 1 or conv.attrs.get("batch_group_count", 1) != 1:
        return None
    axes = conv_axes(conv)
    space = dot_dims.lift(t, axes, "lhs" if index == 0 else "rhs")
    fixed = _fixed_axes(conv, axes)
    if index == 1:  # the kernel slides whole: its spatial tiles say nothing about the result
        fixed += [k for k, ax in enumerate(axes) if ax.kind == SPATIAL]
    return _out(conv, space.to_replication(fixed), axes)


def backward(conv: HloInstruction, index: int, t: Tiling) -> Tiling | None:
    """Propagation: what the input (index 0) or the kernel (1) should hold for the result's tiling."""
    if index > 1 or conv.attrs.get("batch_group_count", 1) != 1:
        return None
    axes = conv_axes(conv)
    space = _lift_out(conv, t, axes)
    if space is None:
        return None
    space = space.to_replication(_fixed_axes(conv, axes))
    return dot_dims.project(space, axes, "lhs") if index == 0 else _kernel(space, axes)
