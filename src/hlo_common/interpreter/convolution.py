"""The interpreter's convolution handler (XLA's HloEvaluator::HandleConvolution, vectorized).

Operands are converted to the result element type and accumulated like dot (f32 for bf16/f16,
wrapping integers). The input is laid out as [batch, feature, spatial...] and the kernel as
[out feature, in feature, spatial...] whatever `dim_labels` says; the input is base-dilated
(`lhs_dilate`) and padded (negative padding crops), the kernel reversed where `rhs_reversal` asks,
then each kernel offset adds one batched matmul over the input features:

    out[n, o, x] += in[n, c, x*stride + k*rhs_dilate] * kernel[o, c, k]     for every offset k

feature_group_count splits the input features and output features into groups that only see each
other; batch_group_count splits the input batch the same way against the output features.
"""

from __future__ import annotations

import itertools

import numpy as np

from hlo_common.hlo.attributes import ConvDimensionNumbers, Window
from hlo_common.interpreter.numeric import to_accumulation, to_element_type, unsupported
from hlo_common.interpreter.registry import register
from hlo_common.interpreter.window import dilate_and_pad
from hlo_common.hlo.ir import HloInstruction


@register("convolution")
def _convolution(instr: HloInstruction, operands, ev) -> np.ndarray:
    dnums = instr.attrs.get("dim_labels")
    if not isinstance(dnums, ConvDimensionNumbers):
        raise unsupported(instr, "convolution without dim_labels")
    window = instr.attrs.get("window") or Window(())
    result_type = instr.shape.element_type
    lhs = to_accumulation(operands[0], result_type)
    rhs = to_accumulation(operands[1], result_type)
    nsp = len(dnums.input_spatial)
    if len(window.dims) != nsp:
        raise unsupported(instr, f"window has {len(window.dims)} dims, dim_labels has {nsp} spatial dims")
    lhs = lhs.transpose((dnums.input_batch, dnums.input_feature) + dnums.input_spatial)
    rhs = rhs.transpose((dnums.kernel_output_feature, dnums.kernel_input_feature) + dnums.kernel_spatial)
    out = convolve(instr, lhs, rhs, window, int(instr.attrs.get("feature_group_count", 1) or 1),
                   int(instr.attrs.get("batch_group_count", 1) or 1))
    # out is [batch, feature, spatial...]; put each at its dim_labels position.
    perm = [0] * out.ndim
    for canonical, pos in enumerate((dnums.output_batch, dnums.output_feature) + dnums.output_spatial):
        perm[pos] = canonical
    out = out.transpose(perm)
    if out.shape != instr.shape.dims:
        raise unsupported(instr, f"computed shape {list(out.shape)} differs from {instr.shape}")
    return to_element_type(out, result_type)


def convolve(instr: HloInstruction, lhs: np.ndarray, rhs: np.ndarray, window: Window,
             feature_groups: int, batch_groups: int) -> np.ndarray:
    """Convolution of canonical [N, C, S...] input with [O, I, K...] kernel -> [N', O, S'...]."""
    n, c = lhs.shape[:2]
    o, i = rhs.shape[:2]
    if c % feature_groups or o % (feature_groups * batch_groups) or n % batch_groups:
        raise unsupported(instr, "group counts do not divide the batch / feature dimensions")
    if c // feature_groups != i:
        raise unsupported(instr, f"kernel input features {i} != input features {c} / {feature_groups}")
    groups = feature_groups * batch_groups
    nb, oq = n // batch_groups, o // groups
    for k, wd in enumerate(window.dims):
        if wd.window_reversal:
            rhs = np.flip(rhs, axis=2 + k)
    padded, _ = dilate_and_pad(lhs, (None, None) + tuple(window.dims), np.zeros((), lhs.dtype))
    out_spatial = []
    for k, wd in enumerate(window.dims):
        span = (rhs.shape[2 + k] - 1) * wd.window_dilation + 1
        size = padded.shape[2 + k] - span
        out_spatial.append(0 if size < 0 else size // wd.stride + 1)
    p = int(np.prod(out_spatial, dtype=np.int64))
    # input as [B, Nb, G, Cg, S...] (one of B, G is 1); kernel as [B*G, Cg, Oq] per offset.
    x = padded.reshape((batch_groups, nb, feature_groups, i) + padded.shape[2:])
    w = rhs.reshape((batch_groups, feature_groups, oq, i) + rhs.shape[2:])
    acc = np.zeros((groups, nb * p, oq), dtype=lhs.dtype)
    for offset in itertools.product(*(range(s) for s in rhs.shape[2:])):
        starts = [k * wd.window_dilation for k, wd in zip(offset, window.dims)]
        sl = tuple(slice(s, s + (m - 1) * wd.stride + 1, wd.stride)
                   for s, wd, m in zip(starts, window.dims, out_spatial))
        patch = x[(Ellipsis,) + sl] if sl else x  # [B, Nb, G, Cg, S'...]
        nsp = patch.ndim - 4
        a = patch.transpose((0, 2, 1) + tuple(range(4, 4 + nsp)) + (3,)).reshape(groups, nb * p, i)
        kern = w[(Ellipsis,) + offset].reshape(groups, oq, i).transpose(0, 2, 1)
        acc += np.matmul(a, kern)
    out = acc.reshape((batch_groups, feature_groups, nb) + tuple(out_spatial) + (oq,))
    # -> [Nb, B, G, Oq, S'...] -> [Nb, O, S'...]
    nsp = len(out_spatial)
    out = out.transpose((2, 0, 1, 3 + nsp) + tuple(range(3, 3 + nsp)))
    return out.reshape((nb, o) + tuple(out_spatial))
