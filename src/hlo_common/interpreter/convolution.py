"""The interpreter's convolution handler (XLA's HloEvaluator::HandleConvolution, vectorized).

Operands are converted to the result element type and accumulated like dot (f32 for bf16/f16,
wrapping integers). The input is laid out channels-last, [batch, spatial..., feature], and the
kernel as [spatial..., in feature, out feature] whatever `dim_labels` says; the input is
base-dilated (`lhs_dilate`) and padded (negative padding crops), the kernel reversed where
`rhs_reversal` asks. Then the convolution is one matrix product per block of output positions
(im2col): each row of the patch matrix holds, for one output position, the input features under
every kernel offset, and is multiplied by the kernel flattened the same way:

    out[n, x, o] = sum over k, c of in[n, x*stride + k*rhs_dilate, c] * kernel[k, c, o]

feature_group_count splits the input features and output features into groups that only see each
other; batch_group_count splits the input batch the same way against the output features. Blocks
of whole images (of about BLOCK_ELEMENTS patch elements, fixed by the shapes) run on the
interpreter's threads (`parallel.py`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from hlo_common.hlo.attributes import ConvDimensionNumbers, Window
from hlo_common.interpreter import parallel
from hlo_common.interpreter.numeric import to_accumulation, to_element_type, unsupported
from hlo_common.interpreter.registry import register
from hlo_common.interpreter.window import dilate_and_pad
from hlo_common.hlo.ir import HloInstruction

BLOCK_ELEMENTS = 1 << 20  # patch matrix elements per block at most (4 MiB of f32)


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
    lhs = lhs.transpose((dnums.input_batch,) + dnums.input_spatial + (dnums.input_feature,))
    rhs = rhs.transpose(dnums.kernel_spatial + (dnums.kernel_input_feature, dnums.kernel_output_feature))
    out = convolve(instr, lhs, rhs, window, int(instr.attrs.get("feature_group_count", 1) or 1),
                   int(instr.attrs.get("batch_group_count", 1) or 1))
    # out is [batch, spatial..., feature]; put each at its dim_labels position.
    perm = [0] * out.ndim
    for canonical, pos in enumerate((dnums.output_batch,) + dnums.output_spatial + (dnums.output_feature,)):
        perm[pos] = canonical
    out = out.transpose(perm)
    if out.shape != instr.shape.dims:
        raise unsupported(instr, f"computed shape {list(out.shape)} differs from {instr.shape}")
    return to_element_type(out, result_type)


def convolve(instr: HloInstruction, lhs: np.ndarray, rhs: np.ndarray, window: Window,
             feature_groups: int, batch_groups: int) -> np.ndarray:
    """Convolution of channels-last [N, S..., C] input with [K..., I, O] kernel -> [N', S'..., O]."""
    n, c = lhs.shape[0], lhs.shape[-1]
    i, o = rhs.shape[-2:]
    if c % feature_groups or o % (feature_groups * batch_groups) or n % batch_groups:
        raise unsupported(instr, "group counts do not divide the batch / feature dimensions")
    if c // feature_groups != i:
        raise unsupported(instr, f"kernel input features {i} != input features {c} / {feature_groups}")
    nsp = lhs.ndim - 2
    for k, wd in enumerate(window.dims):
        if wd.window_reversal:
            rhs = np.flip(rhs, axis=k)
    padded, _ = dilate_and_pad(lhs, (None,) + tuple(window.dims) + (None,), np.zeros((), lhs.dtype))
    out_spatial = []
    for k, wd in enumerate(window.dims):
        span = (rhs.shape[k] - 1) * wd.window_dilation + 1
        size = padded.shape[1 + k] - span
        out_spatial.append(0 if size < 0 else size // wd.stride + 1)
    groups, nb, oq = feature_groups * batch_groups, n // batch_groups, o // (feature_groups * batch_groups)
    # input as [B, Nb, S..., G, I] (one of B, G is 1); kernel as [B*G, K*I, Oq].
    x = padded.reshape((batch_groups, nb) + padded.shape[1:-1] + (feature_groups, i))
    taps = rhs.shape[:nsp]
    w = rhs.reshape(taps + (i, batch_groups, feature_groups, oq))
    w = w.transpose((nsp + 1, nsp + 2) + tuple(range(nsp)) + (nsp, nsp + 3)).reshape(groups, -1, oq)
    result = np.zeros((batch_groups, feature_groups, nb) + tuple(out_spatial) + (oq,),
                      np.result_type(lhs, rhs))
    per_image = groups * math.prod(out_spatial) * w.shape[1]
    blocks = -(-nb // max(1, BLOCK_ELEMENTS // max(per_image, 1)))
    step = -(-nb // max(blocks, 1))  # blocks of equal size, so threads finish together
    offsets = list(itertools.product(*(range(t) for t in taps)))

    def block(start: int) -> None:
        images = x[:, start:start + step]
        patches = _patches(images, offsets, window, out_spatial, taps)
        product = np.matmul(patches, w)  # [B*G, images * positions, Oq]
        result[:, :, start:start + step] = product.reshape(result[:, :, start:start + step].shape)

    if result.size and w.shape[1]:
        parallel.for_each(block, range(0, nb, step))
    # [B, G, Nb, S'..., Oq] -> [Nb, S'..., B, G, Oq] = [Nb, S'..., O]
    out = result.transpose((2,) + tuple(range(3, 3 + nsp)) + (0, 1, 3 + nsp))
    return out.reshape((nb,) + tuple(out_spatial) + (o,))


def _patches(x: np.ndarray, offsets: list[tuple], window: Window, out_spatial: list[int],
             taps: tuple[int, ...]) -> np.ndarray:
    """The patch matrix [B*G, images * positions, K*I] of input block x [B, images, S..., G, I]:
    one copy per kernel tap, or, where there are more taps than output positions (a weight
    gradient: 56 x 56 taps, 3 x 3 positions), one per output position."""
    nsp = len(out_spatial)
    b, images, g, i = x.shape[0], x.shape[1], x.shape[-2], x.shape[-1]
    # [B, G, images, S'..., K, I]: one contiguous row of K*I values per output position
    patches = np.empty((b, g, images) + tuple(out_spatial) + (len(offsets), i), x.dtype)
    move = (0, 2 + nsp, 1) + tuple(range(2, 2 + nsp)) + (3 + nsp,)  # [B, images, S', G, I] to
    # [B, G, images, S', I]
    if len(offsets) > math.prod(out_spatial):
        for pos in itertools.product(*(range(m) for m in out_spatial)):
            sl = tuple(slice(q * wd.stride, q * wd.stride + (t - 1) * wd.window_dilation + 1,
                             wd.window_dilation) for q, wd, t in zip(pos, window.dims, taps))
            window_values = x[(slice(None), slice(None)) + sl].transpose(move)  # [B, G, images, K..., I]
            patches[(slice(None),) * 3 + pos] = window_values.reshape(b, g, images, len(offsets), i)
        return patches.reshape(b * g, images * math.prod(out_spatial), len(offsets) * i)
    for j, offset in enumerate(offsets):
        sl = tuple(slice(k * wd.window_dilation, k * wd.window_dilation + (m - 1) * wd.stride + 1, wd.stride)
                   for k, wd, m in zip(offset, window.dims, out_spatial))
        patches[..., j, :] = x[(slice(None), slice(None)) + sl].transpose(move)
    return patches.reshape(b * g, images * math.prod(out_spatial), len(offsets) * i)
