"""Output-to-input maps of single ops and fusions, printed, against XLA's own expectations.

Each expected string is the one XLA's `indexing_analysis_test.cc` / `docs/indexing.md` states for
the same HLO (compared ignoring whitespace, as XLA's `ApproximateMatch` does). Where this
project's canonical term order differs from an older XLA string, the case says so.
"""

from __future__ import annotations

import pytest

from hlo_codegen.indexing import compute_output_to_input_indexing
from hlo_common.hlo.parser import parse_module


def squash(text: str) -> str:
    return "".join(text.split())


def root_indexing(hlo: str, output_id: int = 0):
    return compute_output_to_input_indexing(parse_module(hlo).entry.root, output_id)


def map_set(hlo: str, operand_id: int = 0) -> set[str]:
    return {squash(str(m)) for m in root_indexing(hlo).maps(operand_id)}


MAX = "max { p0 = f32[] parameter(0)\n p1 = f32[] parameter(1)\n ROOT m = f32[] maximum(p0, p1) }\n"

CASES = {
    "elementwise": ("""ENTRY e { p0 = f32[10, 20] parameter(0)
        p1 = f32[10, 20] parameter(1)
        ROOT add0 = f32[10, 20] add(p0, p1) }""",
        """operand id = 0 (d0, d1) -> (d0, d1), domain: d0 in [0, 9], d1 in [0, 19]
           operand id = 1 (d0, d1) -> (d0, d1), domain: d0 in [0, 9], d1 in [0, 19]"""),
    "select_scalar_pred": ("""ENTRY e { p0 = pred[] parameter(0)
        p1 = f32[1000, 1000] parameter(1)
        p2 = f32[1000, 1000] parameter(2)
        ROOT select = f32[1000, 1000] select(p0, p1, p2) }""",
        """operand id = 0 (d0, d1) -> (), domain: d0 in [0, 999], d1 in [0, 999]
           operand id = 1 (d0, d1) -> (d0, d1), domain: d0 in [0, 999], d1 in [0, 999]
           operand id = 2 (d0, d1) -> (d0, d1), domain: d0 in [0, 999], d1 in [0, 999]"""),
    "bitcast_is_reshape": ("""ENTRY e { p0 = f32[4, 32] parameter(0)
        ROOT bitcast = f32[4, 8, 4] bitcast(p0) }""",
        """operand id = 0 (d0, d1, d2) -> (d0, d1 * 4 + d2),
           domain: d0 in [0, 3], d1 in [0, 7], d2 in [0, 3]"""),
    "bitcast_is_transpose": ("""ENTRY e { p0 = f32[3, 12288, 6, 128] parameter(0)
        ROOT bitcast = f32[3, 6, 128, 12288]{2,1,3,0} bitcast(p0) }""",
        """operand id = 0 (d0, d1, d2, d3) -> (d0, d3, d1, d2),
           domain: d0 in [0, 2], d1 in [0, 5], d2 in [0, 127], d3 in [0, 12287]"""),
    "bitcast_is_transpose_reshape_transpose": ("""ENTRY e { p0 = f32[16, 17, 3] parameter(0)
        ROOT bitcast = f32[51, 16]{0,1} bitcast(p0) }""",
        """operand id = 0 (d0, d1) -> (d1, d0 floordiv 3, d0 mod 3),
           domain: d0 in [0, 50], d1 in [0, 15]"""),
    "broadcast": ("""ENTRY e { p0 = f32[20] parameter(0)
        ROOT bc0 = f32[10, 20, 30] broadcast(p0), dimensions={1} }""",
        """operand id = 0 (d0, d1, d2) -> (d1),
           domain: d0 in [0, 9], d1 in [0, 19], d2 in [0, 29]"""),
    "constant": ("ENTRY e { ROOT c1 = bf16[17, 22] constant(1) }", ""),
    "iota": ("ENTRY e { ROOT iota = s32[5,5,111,42] iota(), iota_dimension=0 }", ""),
    "concatenate": ("""ENTRY e { p0 = f32[2, 5, 7] parameter(0)
        p1 = f32[2, 11, 7] parameter(1)
        p2 = f32[2, 17, 7] parameter(2)
        ROOT concat = f32[2, 33, 7] concatenate(p0, p1, p2), dimensions={1} }""",
        """operand id = 0 (d0, d1, d2) -> (d0, d1, d2), domain: d0 in [0, 1], d1 in [0, 4], d2 in [0, 6]
           operand id = 1 (d0, d1, d2) -> (d0, d1 - 5, d2),
             domain: d0 in [0, 1], d1 in [5, 15], d2 in [0, 6]
           operand id = 2 (d0, d1, d2) -> (d0, d1 - 16, d2),
             domain: d0 in [0, 1], d1 in [16, 32], d2 in [0, 6]"""),
    "dynamic_slice": ("""ENTRY e { src = s32[2,2,258] parameter(0)
        of1 = s32[] parameter(1)
        of2 = s32[] parameter(2)
        of3 = s32[] parameter(3)
        ROOT ds = s32[1,2,32] dynamic-slice(src, of1, of2, of3), dynamic_slice_sizes={1, 2, 32} }""",
        """operand id = 0 (d0, d1, d2){rt0, rt1, rt2} -> (d0 + rt0, d1 + rt1, d2 + rt2),
             domain: d0 in [0, 0], d1 in [0, 1], d2 in [0, 31], rt0 in [0, 1], rt1 in [0, 0],
             rt2 in [0, 226]
           operand id = 1 (d0, d1, d2) -> (), domain: d0 in [0, 0], d1 in [0, 1], d2 in [0, 31]
           operand id = 2 (d0, d1, d2) -> (), domain: d0 in [0, 0], d1 in [0, 1], d2 in [0, 31]
           operand id = 3 (d0, d1, d2) -> (), domain: d0 in [0, 0], d1 in [0, 1], d2 in [0, 31]"""),
    # XLA leaves the update's domain the whole output; here it is restricted to the window read.
    "dynamic_update_slice": ("""ENTRY e { src = s32[20,30] parameter(0)
        upd = s32[5,10] parameter(1)
        of1 = s32[] parameter(2)
        of2 = s32[] parameter(3)
        ROOT dus = s32[20,30] dynamic-update-slice(src, upd, of1, of2) }""",
        """operand id = 0 (d0, d1) -> (d0, d1), domain: d0 in [0, 19], d1 in [0, 29]
           operand id = 1 (d0, d1){rt0, rt1} -> (d0 - rt0, d1 - rt1),
             domain: d0 in [0, 19], d1 in [0, 29], rt0 in [0, 15], rt1 in [0, 20],
             d0 - rt0 in [0, 4], d1 - rt1 in [0, 9]
           operand id = 2 (d0, d1) -> (), domain: d0 in [0, 19], d1 in [0, 29]
           operand id = 3 (d0, d1) -> (), domain: d0 in [0, 19], d1 in [0, 29]"""),
    "gather": ("""ENTRY main { operand = f32[33,76,70] parameter(0)
        indices = s32[1806,2] parameter(1)
        ROOT r = f32[1806,7,8,4] gather(operand, indices), offset_dims={1,2,3},
          collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={7,8,4} }""",
        """operand id = 0 (d0, d1, d2, d3){rt0, rt1} -> (d1 + rt0, d2 + rt1, d3),
             domain: d0 in [0, 1805], d1 in [0, 6], d2 in [0, 7], d3 in [0, 3], rt0 in [0, 26],
             rt1 in [0, 68]
           operand id = 1 (d0, d1, d2, d3)[s0] -> (d0, s0),
             domain: d0 in [0, 1805], d1 in [0, 6], d2 in [0, 7], d3 in [0, 3], s0 in [0, 1]"""),
    "reshape_collapse": ("ENTRY e { p0 = f32[4,8] parameter(0)\n ROOT r = f32[32] reshape(p0) }",
        "operand id = 0 (d0) -> (d0 floordiv 8, d0 mod 8), domain: d0 in [0, 31]"),
    "reshape_expand": ("ENTRY e { p0 = f32[32] parameter(0)\n ROOT r = f32[4, 8] reshape(p0) }",
        "operand id = 0 (d0, d1) -> (d0 * 8 + d1), domain: d0 in [0, 3], d1 in [0, 7]"),
    "reshape_expand_and_collapse": (
        "ENTRY e { p0 = f32[4, 8, 12] parameter(0)\n ROOT r = f32[32, 3, 4] reshape(p0) }",
        """operand id = 0 (d0, d1, d2) -> (d0 floordiv 8, d0 mod 8, d1 * 4 + d2),
           domain: d0 in [0, 31], d1 in [0, 2], d2 in [0, 3]"""),
    "reshape_expand_subshape": (
        "ENTRY e { p0 = f32[16, 8] parameter(0)\n ROOT r = f32[4, 4, 8] reshape(p0) }",
        """operand id = 0 (d0, d1, d2) -> (d0 * 4 + d1, d2),
           domain: d0 in [0, 3], d1 in [0, 3], d2 in [0, 7]"""),
    "reshape_generic_2d_to_3d": (
        "ENTRY e { p0 = f32[4,8] parameter(0)\n ROOT r = f32[2, 4, 4] reshape(p0) }",
        """operand id = 0 (d0, d1, d2) -> (d0 * 2 + d1 floordiv 2, (d1 mod 2) * 4 + d2),
           domain: d0 in [0, 1], d1 in [0, 3], d2 in [0, 3]"""),
    "reshape_generic_3d_to_2d": (
        "ENTRY e { p0 = f32[2, 4, 4] parameter(0)\n ROOT r = f32[4, 8] reshape(p0) }",
        """operand id = 0 (d0, d1) -> (d0 floordiv 2, (d0 mod 2) * 2 + d1 floordiv 4, d1 mod 4),
           domain: d0 in [0, 3], d1 in [0, 7]"""),
    "pad": ("""ENTRY e { p0 = f32[4, 4] parameter(0)
        p1 = f32[] parameter(1)
        ROOT pad = f32[12, 16] pad(p0, p1), padding=1_4_1x4_8_0 }""",
        """operand id = 0 (d0, d1) -> ((d0 - 1) floordiv 2, d1 - 4),
             domain: d0 in [1, 7], d1 in [4, 7], (d0 - 1) mod 2 in [0, 0]
           operand id = 1 (d0, d1) -> (), domain: d0 in [0, 11], d1 in [0, 15]"""),
    "pad_no_interior": ("""ENTRY e { p0 = f32[2,8] parameter(0)
        p1 = f32[] parameter(1)
        ROOT pad = f32[10,8] pad(p0, p1), padding=1_7x0_0 }""",
        """operand id = 0 (d0, d1) -> (d0 - 1, d1), domain: d0 in [1, 2], d1 in [0, 7]
           operand id = 1 (d0, d1) -> (), domain: d0 in [0, 9], d1 in [0, 7]"""),
    "pad_negative": ("""ENTRY e { p0 = f32[7] parameter(0)
        p1 = f32[] parameter(1)
        ROOT pad = f32[5] pad(p0, p1), padding=-3_-5_1 }""",
        """operand id = 0 (d0) -> ((d0 + 3) floordiv 2), domain: d0 in [0, 4], (d0 + 3) mod 2 in [0, 0]
           operand id = 1 (d0) -> (), domain: d0 in [0, 4]"""),
    "reduce": (MAX + """ENTRY e { p0 = f32[150, 20, 10, 50] parameter(0)
        p0_init = f32[] constant(-inf)
        ROOT reduce = f32[150, 10] reduce(p0, p0_init), dimensions={3, 1}, to_apply=max }""",
        """operand id = 0 (d0, d1)[s0, s1] -> (d0, s0, d1, s1),
             domain: d0 in [0, 149], d1 in [0, 9], s0 in [0, 19], s1 in [0, 49]
           operand id = 1 (d0, d1) -> (), domain: d0 in [0, 149], d1 in [0, 9]"""),
    "reduce_window_no_padding": (MAX + """ENTRY e { c_inf = f32[] constant(-inf)
        p0 = f32[1024, 514] parameter(0)
        ROOT rw = f32[1024, 3] reduce-window(p0, c_inf), window={size=1x512 pad=0_0x0_0}, to_apply=max }""",
        """operand id = 0 (d0, d1)[s0] -> (d0, d1 + s0),
             domain: d0 in [0, 1023], d1 in [0, 2], s0 in [0, 511]
           operand id = 1 (d0, d1) -> (), domain: d0 in [0, 1023], d1 in [0, 2]"""),
    "reduce_window_padding_and_stride": (MAX + """ENTRY e { c_inf = f32[] constant(-inf)
        p0 = f32[13, 17] parameter(0)
        ROOT rw = f32[7, 17] reduce-window(p0, c_inf), window={size=3x2 stride=2x1 pad=1_1x0_1},
          to_apply=max }""",
        """operand id = 0 (d0, d1)[s0, s1] -> (d0 * 2 + s0 - 1, d1 + s1),
             domain: d0 in [0, 6], d1 in [0, 16], s0 in [0, 2], s1 in [0, 1],
             d0 * 2 + s0 in [1, 13], d1 + s1 in [0, 16]
           operand id = 1 (d0, d1) -> (), domain: d0 in [0, 6], d1 in [0, 16]"""),
    "reduce_window_base_dilation": (MAX + """ENTRY e { c_inf = f32[] constant(-inf)
        p0 = f32[2, 3] parameter(0)
        ROOT rw = f32[3, 5] reduce-window(p0, c_inf), window={size=1x1 pad=0_0x0_0 lhs_dilate=2x2},
          to_apply=max }""",
        """operand id = 0 (d0, d1) -> (d0 floordiv 2, d1 floordiv 2),
             domain: d0 in [0, 2], d1 in [0, 4], d0 mod 2 in [0, 0], d1 mod 2 in [0, 0]
           operand id = 1 (d0, d1) -> (), domain: d0 in [0, 2], d1 in [0, 4]"""),
    # XLA's older string is `d0 + s0 * 3`: its MLIR-era printer put dims first; XLA's
    # SymbolicExpr comparator (used here) orders products before variables.
    "reduce_window_window_dilation": (MAX + """ENTRY e { c_inf = f32[] constant(-inf)
        p0 = f32[7, 3] parameter(0)
        ROOT rw = f32[4, 3] reduce-window(p0, c_inf), window={size=2x1 pad=0_0x0_0 rhs_dilate=3x1},
          to_apply=max }""",
        """operand id = 0 (d0, d1)[s0] -> (s0 * 3 + d0, d1), domain: d0 in [0, 3], d1 in [0, 2],
             s0 in [0, 1]
           operand id = 1 (d0, d1) -> (), domain: d0 in [0, 3], d1 in [0, 2]"""),
    "reverse": ("""ENTRY e { p0 = f32[1, 17, 9, 9] parameter(0)
        ROOT reverse = f32[1, 17, 9, 9] reverse(p0), dimensions={1, 2} }""",
        """operand id = 0 (d0, d1, d2, d3) -> (d0, -d1 + 16, -d2 + 8, d3),
           domain: d0 in [0, 0], d1 in [0, 16], d2 in [0, 8], d3 in [0, 8]"""),
    "slice": ("""ENTRY e { p0 = f32[10, 20, 50] parameter(0)
        ROOT slice = f32[5, 3, 25] slice(p0), slice={[5:10:1], [3:20:7], [0:50:2]} }""",
        """operand id = 0 (d0, d1, d2) -> (d0 + 5, d1 * 7 + 3, d2 * 2),
           domain: d0 in [0, 4], d1 in [0, 2], d2 in [0, 24]"""),
    "transpose": ("""ENTRY e { p0 = f32[3, 12288, 6, 128] parameter(0)
        ROOT t = f32[3, 6, 128, 12288] transpose(p0), dimensions={0, 2, 3, 1} }""",
        """operand id = 0 (d0, d1, d2, d3) -> (d0, d3, d1, d2),
           domain: d0 in [0, 2], d1 in [0, 5], d2 in [0, 127], d3 in [0, 12287]"""),
    "dot": ("""ENTRY e { p0 = f32[4, 38, 17, 11, 18, 10] parameter(0)
        p1 = f32[17, 10, 16, 18, 22, 38] parameter(1)
        ROOT dot = f32[10, 38, 4, 11, 16, 22] dot(p0, p1), lhs_batch_dims={5,1},
          rhs_batch_dims={1,5}, lhs_contracting_dims={4,2}, rhs_contracting_dims={3,0} }""",
        """operand id = 0 (d0, d1, d2, d3, d4, d5)[s0, s1] -> (d2, d1, s1, d3, s0, d0),
             domain: d0 in [0, 9], d1 in [0, 37], d2 in [0, 3], d3 in [0, 10], d4 in [0, 15],
             d5 in [0, 21], s0 in [0, 17], s1 in [0, 16]
           operand id = 1 (d0, d1, d2, d3, d4, d5)[s0, s1] -> (s1, d0, d4, s0, d5, d1),
             domain: d0 in [0, 9], d1 in [0, 37], d2 in [0, 3], d3 in [0, 10], d4 in [0, 15],
             d5 in [0, 21], s0 in [0, 17], s1 in [0, 16]"""),
    "unsupported_op": ("""ENTRY e { p1 = f32[4,4] parameter(0)
        p2 = f32[4,3] parameter(1)
        ROOT out = f32[4,3] triangular-solve(p1, p2), left_side=true, lower=true,
          transpose_a=NO_TRANSPOSE, unit_diagonal=true }""",
        "operand id = 0 unknown indexing operand id = 1 unknown indexing"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_indexing_matches_xla(name):
    hlo, expected = CASES[name]
    assert squash(root_indexing(hlo).to_string()) == squash(expected)


def test_variadic_reduce_both_outputs():
    hlo = """min { a0 = f32[] parameter(0)
      a1 = s32[] parameter(1)
      b0 = f32[] parameter(2)
      b1 = s32[] parameter(3)
      ROOT t = (f32[], s32[]) tuple(a0, b1) }
    ENTRY e { p0 = f32[256,10] parameter(0)
      p0_init = f32[] constant(-inf)
      p1 = s32[256,10] parameter(1)
      p1_init = s32[] constant(0)
      ROOT reduce = (f32[10], s32[10]) reduce(p0, p1, p0_init, p1_init), dimensions={0}, to_apply=min }"""
    expected = """operand id = 0 (d0)[s0] -> (s0, d0), domain: d0 in [0, 9], s0 in [0, 255]
      operand id = 1 (d0)[s0] -> (s0, d0), domain: d0 in [0, 9], s0 in [0, 255]
      operand id = 2 (d0) -> (), domain: d0 in [0, 9]
      operand id = 3 (d0) -> (), domain: d0 in [0, 9]"""
    for output_id in (0, 1):
        assert squash(root_indexing(hlo, output_id).to_string()) == squash(expected)


def test_reduce_window_variadic():
    hlo = """combiner { a0 = f32[] parameter(0)
      a1 = s32[] parameter(1)
      b0 = f32[] parameter(2)
      b1 = s32[] parameter(3)
      ROOT sum2 = (f32[], s32[]) tuple(a0, a1) }
    ENTRY e { c_f32 = f32[] constant(-inf)
      c_s32 = s32[] constant(10)
      p0 = f32[2, 3] parameter(0)
      p1 = s32[2, 3] parameter(1)
      ROOT rw = (f32[1, 2], s32[1, 2]) reduce-window(p0, p1, c_f32, c_s32),
        window={size=2x2 pad=0_0x0_0}, to_apply=combiner }"""
    data = "(d0, d1)[s0, s1] -> (s0, d1 + s1), domain: d0 in [0, 0], d1 in [0, 1], s0 in [0, 1], s1 in [0, 1]"
    init = "(d0, d1) -> (), domain: d0 in [0, 0], d1 in [0, 1]"
    expected = (f"operand id = 0 {data} operand id = 1 {data} operand id = 2 {init} "
                f"operand id = 3 {init}")
    assert squash(root_indexing(hlo, 1).to_string()) == squash(expected)
