"""Elemental emission of index-only and data-movement ops, run on the host against the interpreter:
broadcast, reshape, bitcast (with layouts), transpose, slice, reverse, pad, concatenate, iota,
constants (inline and global), dynamic-slice and dynamic-update-slice (clamped runtime starts),
canonical gather, elemental reduce, and non-default layouts on both sides.
"""

from __future__ import annotations

import numpy as np
import pytest

from elemental_harness import check_fusion, fusion_of, random_args

SHAPE_OPS = {
    "broadcast": """f { p0 = f32[3,5] parameter(0)
        ROOT b = f32[3,4,5,2] broadcast(p0), dimensions={0,2} }""",
    "reshape_transpose": """f { p0 = f32[6,10] parameter(0)
        r = f32[3,2,5,2] reshape(p0)
        ROOT t = f32[2,5,3,2] transpose(r), dimensions={3,2,0,1} }""",
    "slice_reverse": """f { p0 = s32[9,11] parameter(0)
        s = s32[3,5] slice(p0), slice={[1:9:3], [2:11:2]}
        ROOT r = s32[3,5] reverse(s), dimensions={0,1} }""",
    "pad": """f { p0 = f32[4,5] parameter(0) p1 = f32[] parameter(1)
        ROOT p = f32[8,7] pad(p0, p1), padding=2_-1_1x-1_3_0 }""",
    "concatenate": """f { p0 = f32[2,3] parameter(0) p1 = f32[2,4] parameter(1) p2 = f32[2,1] parameter(2)
        e = f32[2,4] exponential(p1)
        ROOT c = f32[2,8] concatenate(p0, e, p2), dimensions={1} }""",
    "iota": """f { i = s32[4,6] iota(), iota_dimension=1
        j = bf16[4,6] iota(), iota_dimension=0
        k = f32[4,6] convert(i)
        l = f32[4,6] convert(j)
        ROOT a = f32[4,6] add(k, l) }""",
    "layouts": """f { p0 = f32[4,6]{0,1} parameter(0)
        c = f32[4,6]{1,0} copy(p0)
        n = f32[4,6]{1,0} negate(c)
        ROOT t = f32[6,4]{0,1} transpose(n), dimensions={1,0} }""",
    "bitcast_layouts": """f { p0 = f32[2,3,4]{0,2,1} parameter(0)
        ROOT b = f32[3,8]{1,0} bitcast(p0) }""",
    "constants": """f { p0 = s32[3,2] parameter(0)
        c = s32[3,2]{0,1} constant({{1, 2}, {3, 4}, {5, 6}})
        d = s32[] constant(-7)
        b = s32[3,2] broadcast(d), dimensions={}
        a = s32[3,2] add(p0, c)
        ROOT m = s32[3,2] multiply(a, b) }""",
    "bitcast_element_type": """f { p0 = f16[20] parameter(0)
        b = s16[4,5] bitcast(p0)
        ROOT a = s16[4,5] add(b, b) }""",
    "reduce": """add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
        f { p0 = f32[3,4,5] parameter(0) c = f32[] constant(0)
        ROOT r = f32[4] reduce(p0, c), dimensions={0,2}, to_apply=add }""",
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_ops(name: str) -> None:
    check_fusion(SHAPE_OPS[name])


@pytest.mark.parametrize("start", [-5, 0, 3, 7, 1000, -(2 ** 31)])
def test_dynamic_slice_clamps_starts(start: int) -> None:
    text = """f { p0 = f32[8,5] parameter(0) p1 = s32[] parameter(1) p2 = s64[] parameter(2)
        ROOT d = f32[3,4] dynamic-slice(p0, p1, p2), dynamic_slice_sizes={3,4} }"""
    fusion = fusion_of(text)
    args = random_args(fusion)
    args[1] = np.array(start, np.int32)
    args[2] = np.array(-start, np.int64)
    check_fusion(fusion, args)


@pytest.mark.parametrize("start", [-2, 0, 1, 9])
def test_dynamic_update_slice(start: int) -> None:
    text = """f { p0 = c64[4,5] parameter(0) p1 = c64[2,2] parameter(1) p2 = u32[] parameter(2)
        p3 = s8[] parameter(3)
        u = c64[4,5] dynamic-update-slice(p0, p1, p2, p3)
        ROOT n = c64[4,5] negate(u) }"""
    fusion = fusion_of(text)
    args = random_args(fusion)
    args[2] = np.array(max(start, 0), np.uint32)
    args[3] = np.array(start, np.int8)
    check_fusion(fusion, args)


def test_gather_in_canonical_form() -> None:
    text = """f { operand = f32[30,20] parameter(0) indices = s32[10,2] parameter(1)
        ROOT g = f32[10,4,8] gather(operand, indices), offset_dims={1,2}, collapsed_slice_dims={},
            start_index_map={1,0}, index_vector_dim=1, slice_sizes={4,8} }"""
    fusion = fusion_of(text)
    args = random_args(fusion)
    args[1] = np.array([[0, 0], [5, 3], [-4, 40], [19, 29], [12, 26], [1, 2], [100, -100], [3, 3], [0, 25],
                        [16, 22]], np.int32)
    check_fusion(fusion, args)


def test_subgraphs_read_at_different_indices() -> None:
    # log is read by the add and (transposed) by the transpose: it becomes its own function.
    text = """f { p0 = f32[5,5] parameter(0)
        l = f32[5,5] log(p0)
        t = f32[5,5] transpose(l), dimensions={1,0}
        ROOT a = f32[5,5] add(l, t) }"""
    fusion = fusion_of(text)
    kernel = check_fusion(fusion, [np.abs(random_args(fusion)[0]) + 0.5])
    assert [f.name for f in kernel.functions] == ["f_l"]
