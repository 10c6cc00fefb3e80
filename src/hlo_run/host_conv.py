"""ConvolutionThunk on the host: HLO's convolution as a library call (XLA:GPU calls cuDNN).

Where it sits: hlo-run's host platform (`backends/host.py`) calls `run_convolution` for every
ConvolutionThunk (hlo-codegen emits one per lone convolution for the host target). The
semantics are the interpreter's (`hlo_common.interpreter.convolution`): operands converted to
the result type, accumulated in f32 for 16-bit floats, the input base-dilated and padded (negative
padding crops), the kernel reversed where `rhs_reversal` asks, one rounding at the end. The
arithmetic is the host's own direct convolution (`host_blas.conv_channels_last`: the input
channels-last and padded once, the kernel packed, no im2col matrix) where the product
accumulates in f32 and each feature group has at least MIN_GROUP_FEATURES output features (a
weight gradient as jax writes it, batch and feature swapped and the window the whole image, is
that convolution too: per kernel offset a product over batch x space, the microkernel's rows
along the input features; issue 20's conv_wgrad bench module); depthwise convolutions (one
input feature per group, any channel multiplier) are a sum over the window's taps of the strided
input times one weight per channel, numpy over blocks of output rows on the host threads.
Anything else (f64, complex, integers, narrow groups, batch groups) runs the interpreter's
im2col + numpy BLAS, so every convolution the interpreter takes runs here too.

    run_convolution(config, lhs, rhs, out_bytes)   # logical operand arrays; the output buffer's bytes
"""

from __future__ import annotations

import functools
import types

import numpy as np

from hlo_common.hlo.attributes import ConvDimensionNumbers, Window
from hlo_common.hlo.shape import Shape
from hlo_common.interpreter.convolution import convolve
from hlo_common.interpreter.numeric import to_accumulation, to_element_type
from hlo_common.interpreter.window import dilate_and_pad
from hlo_common.manifest.layout_bytes import write_array_into
from hlo_common.manifest.thunks import ConvolutionConfig

MIN_GROUP_FEATURES = 8  # narrower groups waste most of the microkernel's 32 output columns


@functools.lru_cache(maxsize=256)
def _parsed(window: str, dim_labels: str) -> tuple[Window, ConvDimensionNumbers]:
    return Window.parse(window), ConvDimensionNumbers.parse(dim_labels)


def run_convolution(cfg: ConvolutionConfig, out_shape: Shape, lhs: np.ndarray, rhs: np.ndarray,
                    out_bytes: np.ndarray, name: str = "convolution") -> None:
    """Compute the convolution of logical `lhs` and `rhs` into the output buffer `out_bytes`."""
    window, dn = _parsed(cfg.window, cfg.dim_labels)
    result_type = out_shape.element_type
    x = to_accumulation(lhs, result_type)
    x = x.transpose((dn.input_batch,) + dn.input_spatial + (dn.input_feature,))
    w = to_accumulation(rhs, result_type)
    w = w.transpose(dn.kernel_spatial + (dn.kernel_input_feature, dn.kernel_output_feature))
    fg, bg = cfg.feature_group_count, cfg.batch_group_count
    # the output's dims in canonical order [batch, spatial..., feature]
    canonical = (dn.output_batch,) + dn.output_spatial + (dn.output_feature,)
    spatial = len(window.dims) == x.ndim - 2
    fast = bg == 1 and w.shape[-1] // fg >= MIN_GROUP_FEATURES and spatial
    depthwise = bg == 1 and fg > 1 and w.shape[-2] == 1 and spatial and x.ndim > 2
    if x.dtype == np.float32 and (fast or depthwise):
        physical = tuple(reversed(out_shape.minor_to_major))
        direct = physical == canonical and result_type.np_dtype == np.float32
        dims = tuple(out_shape.dims[d] for d in canonical)
        # where the layout's major-to-minor order is the canonical one the buffer's bytes are the
        # canonical array (NCHW dims in an NHWC buffer too: `array_over` would copy those)
        nbytes = int(np.prod(dims)) * 4
        result = out_bytes[:nbytes].view(np.float32).reshape(dims) if direct else np.empty(dims, np.float32)
        if not direct or np.may_share_memory(result, lhs) or np.may_share_memory(result, rhs):
            result, direct = np.empty(dims, np.float32), False
        (_depthwise_convolution if depthwise else _direct_convolution)(x, w, window, fg, result)
        if direct:
            return
    else:
        stand_in = types.SimpleNamespace(name=name, opcode="convolution", parent=None)  # names errors
        result = convolve(stand_in, x, w, window, fg, bg)
    inverse = np.argsort(canonical)
    write_array_into(out_bytes, to_element_type(result.transpose(inverse), result_type), out_shape)


def _direct_convolution(x: np.ndarray, w: np.ndarray, window: Window, groups: int, out: np.ndarray) -> None:
    """out [N, S'..., O] = the convolution of x [N, S..., C] with w [K..., I, O] in `groups` groups."""
    from hlo_run.host_blas import conv_channels_last

    for k, wd in enumerate(window.dims):
        if wd.window_reversal:
            w = np.flip(w, axis=k)
    padded, _ = dilate_and_pad(x, (None,) + tuple(window.dims) + (None,), np.zeros((), x.dtype))
    strides = tuple(wd.stride for wd in window.dims)
    dilations = tuple(wd.window_dilation for wd in window.dims)
    i, oq = w.shape[-2], w.shape[-1] // groups
    for g in range(groups):
        xg = padded if groups == 1 else np.ascontiguousarray(padded[..., g * i:(g + 1) * i])
        wg = w[..., g * oq:(g + 1) * oq]
        target = out if groups == 1 else np.empty(out.shape[:-1] + (oq,), np.float32)
        conv_channels_last(xg, np.ascontiguousarray(wg), strides, dilations, target)
        if groups > 1:
            out[..., g * oq:(g + 1) * oq] = target


DEPTHWISE_BLOCK_FLOATS = 1 << 16  # output floats per numpy step: the block and its product stay in L2


def _depthwise_convolution(x: np.ndarray, w: np.ndarray, window: Window, groups: int,
                           out: np.ndarray) -> None:
    """out [N, S'..., O] = the depthwise convolution of x [N, S..., C] with w [K..., 1, O]: C ==
    groups, output feature f reads channel f // (O / C). One multiply and one add of whole blocks
    per window tap (the taps in a fixed order, so the sums never depend on the thread count)."""
    from hlo_run.host_kernel import run_ranges, threads_for

    for k, wd in enumerate(window.dims):
        if wd.window_reversal:
            w = np.flip(w, axis=k)
    padded, _ = dilate_and_pad(x, (None,) + tuple(window.dims) + (None,), np.zeros((), x.dtype))
    multiplier = w.shape[-1] // groups
    if multiplier > 1:
        padded = np.repeat(padded, multiplier, axis=-1)
    weights = np.ascontiguousarray(w.reshape(-1, w.shape[-1]))
    views = []  # per tap: the input positions it reads for every output position
    for t, tap in enumerate(np.ndindex(*w.shape[:-2])):
        starts = [k * wd.window_dilation for k, wd in zip(tap, window.dims)]
        index = tuple(slice(s, s + (n - 1) * wd.stride + 1, wd.stride)
                      for s, wd, n in zip(starts, window.dims, out.shape[1:-1]))
        views.append((padded[(slice(None),) + index], weights[t]))
    if not views:  # an empty window sums nothing
        out[...] = 0
        return
    rows = out.shape[1]
    per_row = int(np.prod(out.shape[2:]))
    block = max(1, min(rows, DEPTHWISE_BLOCK_FLOATS // max(per_row, 1)))
    per_image = -(-rows // block)

    def run(lo: int, hi: int) -> None:
        scratch = np.empty((block,) + out.shape[2:], np.float32)
        for u in range(lo, hi):
            n, r0 = u // per_image, (u % per_image) * block
            r1 = min(rows, r0 + block)
            target, tmp = out[n, r0:r1], scratch[:r1 - r0]
            for t, (view, wt) in enumerate(views):
                np.multiply(view[n, r0:r1], wt, out=target if t == 0 else tmp)
                if t:
                    target += tmp

    run_ranges("the host depthwise convolution", run, out.shape[0] * per_image,
               threads_for(padded.nbytes + out.nbytes))
