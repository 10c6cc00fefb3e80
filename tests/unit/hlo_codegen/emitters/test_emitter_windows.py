"""Elemental reduce-window, select-and-scatter (pull form) and general gather, emitted by the loop
emitter - on the host against the interpreter and hand computations, PTX linked for sm_90."""

from __future__ import annotations

import numpy as np
import pytest

from emitter_testlib import check, fusion_of, index_aware_args, run_on_host

ADD = "add { a = {t}[] parameter(0) b = {t}[] parameter(1) ROOT s = {t}[] add(a, b) }\n"
MAX = "mx { a = {t}[] parameter(0) b = {t}[] parameter(1) ROOT s = {t}[] maximum(a, b) }\n"


@pytest.mark.parametrize("window, out", [
    ("size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0", "f32[2,4,4,3]"),
    ("size=2x2x2x1 lhs_dilate=1x2x1x1 rhs_dilate=1x1x3x1 pad=0_0x0_1x2_0x0_0", "f32[1,13,6,3]"),
    ("size=1x3x2x1 pad=0_0x-1_-1x0_0x0_0 stride=1x1x3x1", "f32[2,3,2,3]"),
])
def test_reduce_window_padding_dilation_strides(window: str, out: str) -> None:
    check(ADD.replace("{t}", "f32") + f"""f {{ a = f32[2,7,7,3] parameter(0) z = f32[] constant(0)
        ROOT c = {out} reduce-window(a, z), window={{{window}}}, to_apply=add }}""", "loop")


def test_reduce_window_max_pool_by_hand() -> None:
    fusion = fusion_of(MAX.replace("{t}", "s32") + """f { a = s32[4,5] parameter(0) z = s32[] constant(-100)
        ROOT c = s32[2,3] reduce-window(a, z), window={size=2x3 stride=2x1 pad=0_0x1_0}, to_apply=mx }""")
    x = np.arange(20, dtype=np.int32).reshape(4, 5) * np.array([1, -1, 1, -1, 1], np.int32)
    (got,) = run_on_host(fusion, [x])
    padded = np.pad(x, ((0, 0), (1, 0)), constant_values=-100)
    want = np.array([[padded[2 * i:2 * i + 2, j:j + 3].max() for j in range(3)] for i in range(2)])
    np.testing.assert_array_equal(got, want)


def test_variadic_and_narrow_float_reduce_window() -> None:
    check("""mm { a = f32[] parameter(0) b = s32[] parameter(1) c = f32[] parameter(2) d = s32[] parameter(3)
            x = f32[] maximum(a, c) y = s32[] minimum(b, d) ROOT t = (f32[], s32[]) tuple(x, y) }
        f { a = f32[9,10] parameter(0) b = s32[9,10] parameter(1)
            z = f32[] constant(-inf) w = s32[] constant(99)
            ROOT r = (f32[5,4], s32[5,4]) reduce-window(a, b, z, w), window={size=3x4 stride=2x2 pad=1_1x0_0},
              to_apply=mm }""")
    # Sums of many f16 elements accumulate in f32, rounded once (per-step rounding drifts).
    check(ADD.replace("{t}", "f16") + """f { a = f16[3,2000] parameter(0) z = f16[] constant(0)
        ROOT c = f16[3,1] reduce-window(a, z), window={size=1x2000}, to_apply=add }""")


SELECT_AND_SCATTER = """ge {{ a = {t}[] parameter(0) b = {t}[] parameter(1)
  ROOT s = pred[] compare(a, b), direction={d} }}
add {{ a = {t}[] parameter(0) b = {t}[] parameter(1) ROOT s = {t}[] add(a, b) }}
f {{ a = {t}[{shape}] parameter(0) s = {t}[{src}] parameter(1) z = {t}[] constant(0)
  ROOT c = {t}[{shape}] select-and-scatter(a, s, z), window={{{window}}}, select=ge, scatter=add }}"""


@pytest.mark.parametrize("t, d, shape, src, window", [
    ("f32", "GE", "6,7", "3,4", "size=3x3 stride=2x2 pad=1_1x1_1"),  # overlapping windows, padding
    ("s32", "GT", "8,8", "4,4", "size=2x2 stride=2x2"),  # the classic max-pool gradient, ties
    ("s32", "LE", "5,9", "2,3", "size=4x5 stride=1x2 pad=0_0x0_0"),
])
def test_select_and_scatter(t: str, d: str, shape: str, src: str, window: str) -> None:
    fusion = fusion_of(SELECT_AND_SCATTER.format(t=t, d=d, shape=shape, src=src, window=window))
    args = index_aware_args(fusion)
    if t == "s32":
        args[0] = np.random.default_rng(0).integers(0, 3, args[0].shape).astype(np.int32)  # many ties
    check(fusion, "loop", args=args)


def test_select_and_scatter_by_hand() -> None:
    fusion = fusion_of(SELECT_AND_SCATTER.format(t="s32", d="GE", shape="2,4", src="1,2",
                                                 window="size=2x2 stride=2x2"))
    a = np.array([[1, 5, 7, 7], [5, 2, 0, 7]], np.int32)
    s = np.array([[10, 20]], np.int32)
    (got,) = run_on_host(fusion, [a, s])
    # First maximum in row-major window order wins: (0,1) over (1,0); (0,2) over (0,3) and (1,3).
    np.testing.assert_array_equal(got, [[0, 10, 20, 0], [0, 0, 0, 0]])


@pytest.mark.parametrize("gather", [
    # collapsed dims, index vector in the middle
    "f32[4,3,2,3] gather(a, i), offset_dims={2,3}, collapsed_slice_dims={1}, start_index_map={0,1}, "
    "index_vector_dim=2, slice_sizes={2,1,3}",
    # implicit trailing index vector dim, one start index
    "f32[4,3,5,1,7] gather(a, j), offset_dims={2,3,4}, collapsed_slice_dims={}, start_index_map={1}, "
    "index_vector_dim=2, slice_sizes={5,1,7}",
    # batching dims
    "f32[5,4,7] gather(a, k), offset_dims={2}, collapsed_slice_dims={1}, operand_batching_dims={0}, "
    "start_indices_batching_dims={0}, start_index_map={1}, index_vector_dim=2, slice_sizes={1,1,7}",
])
def test_general_gather(gather: str) -> None:
    check(f"""f {{ a = f32[5,6,7] parameter(0) i = s32[4,3,2] parameter(1) j = s64[4,3] parameter(2)
        k = u8[5,4] parameter(3) ROOT g = {gather} }}""", "loop")
