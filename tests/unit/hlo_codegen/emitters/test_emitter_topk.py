"""Elemental topk: stable (value, position) selection passes, total order for floats - on the host
against the interpreter and numpy, PTX linked for sm_90."""

from __future__ import annotations

import numpy as np
import pytest

from emitter_testlib import check, fusion_of, run_on_host


@pytest.mark.parametrize("text", [
    "f { x = f32[3,37] parameter(0) ROOT s = (f32[3,5], s32[3,5]) topk(x), k=5, largest=true }",
    "f { x = bf16[2,50] parameter(0) ROOT s = (bf16[2,7], s32[2,7]) topk(x), k=7, largest=false }",
    "f { x = s32[4,20] parameter(0) ROOT s = (s32[4,20], s32[4,20]) topk(x), k=20, largest=true }",
    "f { x = u8[2,3,20] parameter(0) ROOT s = (u8[2,3,3], s32[2,3,3]) topk(x), k=3, largest=false }",
])
def test_topk_with_ties(text: str) -> None:
    fusion = fusion_of(text)
    shape = fusion.operands[0].shape
    x = np.random.default_rng(1).integers(0, 5, shape.dims).astype(shape.element_type.np_dtype)
    check(fusion, "loop", args=[x])


def test_topk_orders_nans_and_zeros_totally() -> None:
    fusion = fusion_of("f { x = f32[1,8] parameter(0)"
                       " ROOT s = (f32[1,8], s32[1,8]) topk(x), k=8, largest=true }")
    x = np.array([[1.0, -np.nan, 0.0, np.inf, -0.0, np.nan, -np.inf, 1.0]], np.float32)
    values, indices = run_on_host(fusion, [x])
    # +NaN > inf > 1 = 1 > +0 > -0 > -inf > -NaN, ties by position.
    np.testing.assert_array_equal(indices, [[5, 3, 0, 7, 2, 4, 6, 1]])
    check(fusion, args=[x])


@pytest.mark.parametrize("layouts", ["{0,1}, s32[64,2]{1,0}", "{1,0}, s32[64,2]{0,1}"])
def test_topk_outputs_in_different_layouts(layouts: str) -> None:
    """Values and indices laid out differently (layout assignment may give the values a
    transposed layout, as in testdata/models/eqx_moe_topk_grad): each output is written at the
    element's position in its own layout (the loop emitter stored both at the first output's)."""
    fusion = fusion_of("f { x = f32[64,4]{1,0} parameter(0)"
                       f" ROOT s = (f32[64,2]{layouts}) topk(x), k=2, largest=true }}")
    x = np.random.default_rng(2).standard_normal((64, 4)).astype(np.float32)
    check(fusion, "loop", args=[x])
