"""The rewrites of the AlgebraicSimplifier ("algsimp"), one module per family, registered by opcode
in `base.REWRITES` when imported. The pass itself is `hlo_opt.passes.algebraic_simplifier`.

    arithmetic   add, subtract, multiply, negate
    division     divide, power, remainder, abs, exp, log, rsqrt, not
    logical      maximum, minimum, clamp, and, or, xor, compare, select, complex, real, imag
    shape_ops    broadcast, reshape, transpose
    data_ops     bitcast, copy, reverse, iota, constant
    conversions  convert, bitcast-convert, reduce-precision
    slicing      slice, concatenate, pad
    dynamic_slicing  dynamic-slice, dynamic-update-slice
    reductions   reduce, reduce-window
    dots         dot, convolution
    misc         sort, gather, scatter, map, get-tuple-element, opt-barrier
"""

from hlo_opt.passes.algsimp import (  # noqa: F401 - importing registers the rewrites
    arithmetic, conversions, data_ops, division, dots, dynamic_slicing, logical, misc, reductions,
    shape_ops, slicing,
)
from hlo_opt.passes.algsimp.base import REWRITES, Rewriter, all_rewrites

__all__ = ["REWRITES", "Rewriter", "all_rewrites"]
