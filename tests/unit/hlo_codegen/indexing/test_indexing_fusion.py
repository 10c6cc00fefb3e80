"""Composition through fused computations, against XLA's expected maps (indexing_analysis_test.cc)."""

from __future__ import annotations

import pytest

from hlo_codegen.indexing import (
    compute_grouped_output_to_input_indexing, compute_output_to_input_indexing,
)
from hlo_common.hlo.parser import parse_module


def squash(text: str) -> str:
    return "".join(text.split())


def fusion(body: str, params: str, args: str, out: str) -> str:
    """An entry that calls fused computation `f` with `body`."""
    return f"f {{ {body} }}\nENTRY e {{ {params}\n ROOT fusion = {out} fusion({args}), kind=kLoop, calls=f }}"


def indexing(hlo: str, output_id: int = 0):
    return compute_output_to_input_indexing(parse_module(hlo).entry.root, output_id)


MAX = "max { p0 = f32[] parameter(0)\n p1 = f32[] parameter(1)\n ROOT m = f32[] maximum(p0, p1) }\n"

ORDERED = {
    "single_binary_op": (fusion(
        "p0 = f32[100] parameter(0)\n p1 = f32[100] parameter(1)\n ROOT a0 = f32[100] add(p0, p1)",
        "p0 = f32[100] parameter(0)\n p1 = f32[100] parameter(1)", "p0, p1", "f32[100]"),
        """operand id = 0 (d0) -> (d0), domain: d0 in [0, 99]
           operand id = 1 (d0) -> (d0), domain: d0 in [0, 99]"""),
    "reduce_of_reduce": (MAX + fusion(
        """p0 = f32[150, 20, 10, 50] parameter(0)
        p0_init = f32[] parameter(1)
        reduce_1 = f32[20, 10] reduce(p0, p0_init), dimensions={0, 3}, to_apply=max
        ROOT reduce_2 = f32[10] reduce(reduce_1, p0_init), dimensions={0}, to_apply=max""",
        "p0 = f32[150, 20, 10, 50] parameter(0)\n p0_init = f32[] constant(-inf)", "p0, p0_init",
        "f32[10]"),
        """operand id = 0 (d0)[s0, s1, s2] -> (s0, s2, d0, s1),
             domain: d0 in [0, 9], s0 in [0, 149], s1 in [0, 49], s2 in [0, 19]
           operand id = 1 (d0) -> (), domain: d0 in [0, 9]"""),
    "reduce_of_broadcast": (MAX + fusion(
        """p0 = f32[15, 20] parameter(0)
        p0_init = f32[] parameter(1)
        p0_bcast = f32[15, 32, 20, 64] broadcast(p0), dimensions={0, 2}
        ROOT reduce_2 = f32[15, 64] reduce(p0_bcast, p0_init), dimensions={1, 2}, to_apply=max""",
        "p0 = f32[15, 20] parameter(0)\n p0_init = f32[] constant(-inf)", "p0, p0_init",
        "f32[15, 64]"),
        """operand id = 0 (d0, d1)[s0] -> (d0, s0), domain: d0 in [0, 14], d1 in [0, 63], s0 in [0, 19]
           operand id = 1 (d0, d1) -> (), domain: d0 in [0, 14], d1 in [0, 63]"""),
    "transpose_of_transpose": (fusion(
        """p0 = f32[20, 10, 50] parameter(0)
        lhs_transpose_1 = f32[10, 20, 50] transpose(p0), dimensions={1, 0, 2}
        lhs_e = f32[10, 20, 50] exponential(lhs_transpose_1)
        lhs_transpose_2 = f32[10, 50, 20] transpose(lhs_e), dimensions={0, 2, 1}
        rhs_transpose_1 = f32[50, 10, 20] transpose(p0), dimensions={2, 1, 0}
        rhs_log = f32[50, 10, 20] exponential(rhs_transpose_1)
        rhs_transpose_2 = f32[10, 50, 20] transpose(rhs_log), dimensions={1, 0, 2}
        ROOT add = f32[10, 50, 20] add(lhs_transpose_2, rhs_transpose_2)""",
        "p0 = f32[20, 10, 50] parameter(0)", "p0", "f32[10, 50, 20]"),
        """operand id = 0 (d0, d1, d2) -> (d2, d0, d1),
           domain: d0 in [0, 9], d1 in [0, 49], d2 in [0, 19]"""),
    "reduced_slice": (MAX + fusion(
        """p0 = f32[150, 64, 1024] parameter(0)
        p0_init = f32[] parameter(1)
        p0_slice = f32[16, 32, 128] slice(p0), slice={[5:21:1], [0:64:2], [50:434:3]}
        ROOT reduce = f32[32] reduce(p0_slice, p0_init), dimensions={0, 2}, to_apply=max""",
        "p0 = f32[150, 64, 1024] parameter(0)\n p0_init = f32[] constant(-inf)", "p0, p0_init",
        "f32[32]"),
        """operand id = 0 (d0)[s0, s1] -> (s0 + 5, d0 * 2, s1 * 3 + 50),
             domain: d0 in [0, 31], s0 in [0, 15], s1 in [0, 127]
           operand id = 1 (d0) -> (), domain: d0 in [0, 31]"""),
    "collapse_of_expand": (fusion(
        "p0 = f32[128] parameter(0)\n expand = f32[8, 16] reshape(p0)\n ROOT c = f32[128] reshape(expand)",
        "p0 = f32[128] parameter(0)", "p0", "f32[128]"),
        "operand id = 0 (d0) -> (d0), domain: d0 in [0, 127]"),
    "chained_generic_reshapes": (fusion(
        "p0 = f32[10, 10, 10] parameter(0)\n r1 = f32[50, 20] reshape(p0)\n"
        " ROOT r2 = f32[10, 10, 10] reshape(r1)",
        "p0 = f32[10, 10, 10] parameter(0)", "p0", "f32[10, 10, 10]"),
        "operand id = 0 (d0, d1, d2) -> (d0, d1, d2), domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]"),
    "reverse_reshape": (fusion(
        """p0 = f32[10, 11] parameter(0)
        reverse.0 = f32[10, 11] reverse(p0), dimensions={0, 1}
        reshape.0 = f32[110] reshape(reverse.0)
        reverse.1 = f32[110] reverse(reshape.0), dimensions={0}
        ROOT reshape.1 = f32[10, 11] reshape(reverse.1)""",
        "p0 = f32[10, 11] parameter(0)", "p0", "f32[10, 11]"),
        "operand id = 0 (d0, d1) -> (d0, d1), domain: d0 in [0, 9], d1 in [0, 10]"),
    "slice_of_slice": (fusion(
        """p0 = f32[150, 64, 1024] parameter(0)
        sl1 = f32[16, 32, 128] slice(p0), slice={[5:21:1], [0:64:2], [50:434:3]}
        ROOT sl2 = f32[7, 9, 24] slice(sl1), slice={[3:16:2], [4:30:3], [5:100:4]}""",
        "p0 = f32[150, 64, 1024] parameter(0)", "p0", "f32[7, 9, 24]"),
        """operand id = 0 (d0, d1, d2) -> (d0 * 2 + 8, d1 * 6 + 8, d2 * 12 + 65),
           domain: d0 in [0, 6], d1 in [0, 8], d2 in [0, 23]"""),
    "dyn_slice_of_dyn_slice": (fusion(
        """src = s32[150, 64] parameter(0)
        of11 = s32[] parameter(1)
        of12 = s32[] parameter(2)
        of21 = s32[] parameter(3)
        of22 = s32[] parameter(4)
        ds1 = s32[50, 32] dynamic-slice(src, of11, of12), dynamic_slice_sizes={50, 32}
        ROOT ds2 = s32[25, 16] dynamic-slice(ds1, of21, of22), dynamic_slice_sizes={25, 16}""",
        "p0 = s32[150, 64] parameter(0)\n p1 = s32[] parameter(1)\n p2 = s32[] parameter(2)\n"
        " p3 = s32[] parameter(3)\n p4 = s32[] parameter(4)", "p0, p1, p2, p3, p4", "s32[25, 16]"),
        """operand id = 0 (d0, d1){rt0, rt1, rt2, rt3} -> (d0 + rt0 + rt2, d1 + rt1 + rt3),
             domain: d0 in [0, 24], d1 in [0, 15], rt0 in [0, 100], rt1 in [0, 32], rt2 in [0, 25],
             rt3 in [0, 16]
           operand id = 1 (d0, d1) -> (), domain: d0 in [0, 24], d1 in [0, 15]
           operand id = 2 (d0, d1) -> (), domain: d0 in [0, 24], d1 in [0, 15]
           operand id = 3 (d0, d1) -> (), domain: d0 in [0, 24], d1 in [0, 15]
           operand id = 4 (d0, d1) -> (), domain: d0 in [0, 24], d1 in [0, 15]"""),
    "slice_of_all_concat_inputs": (fusion(
        """p0 = f32[2, 5, 7] parameter(0)
        p1 = f32[2, 11, 7] parameter(1)
        p2 = f32[2, 17, 7] parameter(2)
        concat = f32[2, 33, 7] concatenate(p0, p1, p2), dimensions={1}
        ROOT slice = f32[2, 11, 7] slice(concat), slice={[0:2:1], [0:33:3], [0:7:1]}""",
        "p0 = f32[2, 5, 7] parameter(0)\n p1 = f32[2, 11, 7] parameter(1)\n p2 = f32[2, 17, 7] parameter(2)",
        "p0, p1, p2", "f32[2, 11, 7]"),
        """operand id = 0 (d0, d1, d2) -> (d0, d1 * 3, d2), domain: d0 in [0, 1], d1 in [0, 1], d2 in [0, 6]
           operand id = 1 (d0, d1, d2) -> (d0, d1 * 3 - 5, d2),
             domain: d0 in [0, 1], d1 in [2, 5], d2 in [0, 6]
           operand id = 2 (d0, d1, d2) -> (d0, d1 * 3 - 16, d2),
             domain: d0 in [0, 1], d1 in [6, 10], d2 in [0, 6]"""),
    "slice_of_one_concat_input": (fusion(
        """p0 = f32[2, 5, 7] parameter(0)
        p1 = f32[2, 11, 7] parameter(1)
        p2 = f32[2, 17, 7] parameter(2)
        concat = f32[2, 33, 7] concatenate(p0, p1, p2), dimensions={1}
        ROOT slice = f32[2, 3, 7] slice(concat), slice={[0:2:1], [0:5:2], [0:7:1]}""",
        "p0 = f32[2, 5, 7] parameter(0)\n p1 = f32[2, 11, 7] parameter(1)\n p2 = f32[2, 17, 7] parameter(2)",
        "p0, p1, p2", "f32[2, 3, 7]"),
        """operand id = 0 (d0, d1, d2) -> (d0, d1 * 2, d2), domain: d0 in [0, 1], d1 in [0, 2], d2 in [0, 6]
           operand id = 1 KNOWN EMPTY operand id = 2 KNOWN EMPTY"""),
    "reshape_of_concat": (fusion(
        """p0 = f32[2] parameter(0)
        p1 = f32[30] parameter(1)
        concat = f32[32] concatenate(p0, p1), dimensions={0}
        ROOT reshape = f32[4, 8] reshape(concat)""",
        "p0 = f32[2] parameter(0)\n p1 = f32[30] parameter(1)", "p0, p1", "f32[4, 8]"),
        """operand id = 0 (d0, d1) -> (d0 * 8 + d1), domain: d0 in [0, 3], d1 in [0, 7],
             d0 * 8 + d1 in [0, 1]
           operand id = 1 (d0, d1) -> (d0 * 8 + d1 - 2), domain: d0 in [0, 3], d1 in [0, 7],
             d0 * 8 + d1 in [2, 31]"""),
    "dus_through_pad": (fusion(
        """bitcast = s32[1,4096]{1,0} parameter(0)
        constant = s32[] constant(0)
        pad = s32[1,8192]{1,0} pad(bitcast, constant), padding=0_0x4096_0
        slice = s32[1]{0} parameter(1)
        bitcast.4 = s32[] bitcast(slice)
        ROOT ds = s32[1,4096]{1,0} dynamic-slice(pad, constant, bitcast.4), dynamic_slice_sizes={1,4096}""",
        "param_0 = s32[1,4096]{1,0} parameter(0)\n param_1 = s32[1]{0} parameter(1)",
        "param_0, param_1", "s32[1,4096]{1,0}"),
        """operand id = 0 (d0, d1){rt0} -> (0, d1 + rt0 - 4096),
             domain: d0 in [0, 0], d1 in [0, 4095], rt0 in [0, 4096], d1 + rt0 in [4096, 8191]
           operand id = 1 (d0, d1) -> (0), domain: d0 in [0, 0], d1 in [0, 4095]"""),
    "rt_var_scalar_constant": (fusion(
        """p0 = s32[4096] parameter(0)
        offset = s64[] constant(42)
        ROOT ds = s32[10] dynamic-slice(p0, offset), dynamic_slice_sizes={10}""",
        "p0 = s32[4096] parameter(0)", "p0", "s32[10]"),
        "operand id = 0 (d0) -> (d0 + 42), domain: d0 in [0, 9]"),
    "rt_var_iota_as_constant": (fusion(
        """p0 = f32[33,76] parameter(0)
        iota = s64[42,1] iota(), iota_dimension=1
        ROOT gather = f32[42,1,1] gather(p0, iota), offset_dims={1,2}, collapsed_slice_dims={},
          start_index_map={0}, index_vector_dim=1, slice_sizes={1,1}""",
        "p0 = f32[33,76] parameter(0)", "p0", "f32[42,1,1]"),
        "operand id = 0 (d0, d1, d2) -> (0, 0), domain: d0 in [0, 41], d1 in [0, 0], d2 in [0, 0]"),
    "with_unsupported_op": (fusion(
        """p0 = f32[20, 20] parameter(0)
        p1 = f32[4,4] parameter(1)
        p2 = f32[4,3] parameter(2)
        lhs = f32[4,3] triangular-solve(p1, p2), left_side=true, lower=true,
          transpose_a=NO_TRANSPOSE, unit_diagonal=true
        rhs = f32[4, 3] slice(p0), slice={[0:20:6], [0:5:2]}
        ROOT add = f32[4, 3] add(lhs, rhs)""",
        "p0 = f32[20, 20] parameter(0)\n p1 = f32[4, 4] parameter(1)\n p2 = f32[4, 3] parameter(2)",
        "p0, p1, p2", "f32[4, 3]"),
        """operand id = 0 (d0, d1) -> (d0 * 6, d1 * 2), domain: d0 in [0, 3], d1 in [0, 2]
           operand id = 1 unknown indexing operand id = 2 unknown indexing"""),
}


@pytest.mark.parametrize("name", sorted(ORDERED))
def test_fusion_indexing_matches_xla(name):
    hlo, expected = ORDERED[name]
    assert squash(indexing(hlo).to_string()) == squash(expected)


def test_tensor_plus_transposed_tensor_reads_p0_twice():
    hlo = fusion("p0 = f32[1000, 1000] parameter(0)\n"
                 " transpose_p0 = f32[1000, 1000]{0,1} transpose(p0), dimensions={1, 0}\n"
                 " ROOT a0 = f32[1000, 1000] add(p0, transpose_p0)",
                 "p0 = f32[1000,1000] parameter(0)", "p0", "f32[1000,1000]")
    got = {squash(str(m)) for m in indexing(hlo).maps(0)}
    dom = "domain: d0 in [0, 999], d1 in [0, 999]"
    assert got == {squash(f"(d0, d1) -> (d0, d1), {dom}"), squash(f"(d0, d1) -> (d1, d0), {dom}")}


def test_exponential_duplication_merges_equal_maps():
    hlo = fusion("""p0 = f32[4] parameter(0)
        p1 = f32[4] parameter(1)
        add0 = f32[4] add(p0, p1)
        slice1.0 = f32[3] slice(add0), slice={[0:3]}
        slice1.1 = f32[3] slice(add0), slice={[1:4]}
        add1 = f32[3]{0} add(slice1.0, slice1.1)
        slice2.0 = f32[2] slice(add1), slice={[0:2]}
        slice2.1 = f32[2] slice(add1), slice={[1:3]}
        ROOT add2 = f32[2] add(slice2.0, slice2.1)""",
        "p0 = f32[4] parameter(0)\n p1 = f32[4] parameter(1)", "p0, p1", "f32[2]")
    result = indexing(hlo)
    want = {squash(f"(d0) -> ({e}), domain: d0 in [0, 1]") for e in ("d0", "d0 + 1", "d0 + 2")}
    for operand_id in (0, 1):
        assert {squash(str(m)) for m in result.maps(operand_id)} == want
        assert len(result.maps(operand_id)) == 3


def test_softmax_reads_parameter_row_and_element():
    hlo = """add_computation { p0 = f32[] parameter(0)
      p1 = f32[] parameter(1)
      ROOT add = f32[] add(p0, p1) }
    """ + MAX + fusion("""p0 = f32[2,65,125]{2,1,0} parameter(0)
      bitcast0 = f32[65,2,125]{2,1,0} bitcast(p0)
      neg_inf = f32[] constant(-inf)
      reduce0 = f32[2,65]{1,0} reduce(p0, neg_inf), dimensions={2}, to_apply=max
      bitcast1 = f32[130]{0} bitcast(reduce0)
      bcast1 = f32[130,125]{1,0} broadcast(bitcast1), dimensions={0}
      bitcast2 = f32[65,2,125]{2,1,0} bitcast(bcast1)
      subtract0 = f32[65,2,125]{2,1,0} subtract(bitcast0, bitcast2)
      exponential0 = f32[65,2,125]{2,1,0} exponential(subtract0)
      zero = f32[] constant(0)
      reduce2 = f32[65,2]{1,0} reduce(exponential0, zero), dimensions={2}, to_apply=add_computation
      bitcast6 = f32[130]{0} bitcast(reduce2)
      bcast3 = f32[130,125]{1,0} broadcast(bitcast6), dimensions={0}
      bitcast7 = f32[65,2,125]{2,1,0} bitcast(bcast3)
      divide = f32[65,2,125]{2,1,0} divide(exponential0, bitcast7)
      ROOT bitcast8 = f32[2,65,125]{2,1,0} bitcast(divide)""",
        "p0 = f32[2,65,125]{2,1,0} parameter(0)", "p0", "f32[2,65,125]{2,1,0}")
    got = {squash(str(m)) for m in indexing(hlo).maps(0)}
    dom = "d0 in [0, 1], d1 in [0, 64], d2 in [0, 124]"
    assert got == {squash(f"(d0, d1, d2)[s0] -> (d0, d1, s0), domain: {dom}, s0 in [0, 124]"),
                   squash(f"(d0, d1, d2) -> (d0, d1, d2), domain: {dom}")}


def test_fusion_with_dot_and_layout_bitcasts():
    hlo = fusion("""p0 = s8[3,12288,6,128]{3,2,1,0} parameter(0)
      bitcast1 = s8[3,6,128,12288]{2,1,3,0} bitcast(p0)
      copy1 = s8[3,6,128,12288]{3,2,1,0} copy(bitcast1)
      bitcast2 = s8[2304,12288]{1,0} bitcast(copy1)
      convert1 = bf16[2304,12288]{1,0} convert(bitcast2)
      bitcast3 = bf16[2304,16,768]{2,1,0} bitcast(convert1)
      p3 = bf16[16,12288]{1,0} parameter(3)
      p4 = bf16[16,12288]{1,0} parameter(4)
      add1 = bf16[16,12288]{1,0} add(p3, p4)
      p2 = bf16[16]{0} parameter(2)
      bcast1 = bf16[16,12288]{1,0} broadcast(p2), dimensions={0}
      multiply1 = bf16[16,12288]{1,0} multiply(add1, bcast1)
      p1 = bf16[12288]{0} parameter(1)
      bcast3 = bf16[16,12288]{1,0} broadcast(p1), dimensions={1}
      multiply2 = bf16[16,12288]{1,0} multiply(multiply1, bcast3)
      bcast4 = bf16[16,16,768]{2,1,0} bitcast(multiply2)
      dot = bf16[16,2304,16]{2,1,0} dot(bitcast3, bcast4), lhs_batch_dims={1},
        lhs_contracting_dims={2}, rhs_batch_dims={1}, rhs_contracting_dims={2}
      bcast5 = bf16[16,3,6,128,16]{4,3,2,1,0} bitcast(dot)
      copy2 = bf16[16,3,6,128,16]{3,2,4,1,0} copy(bcast5)
      p5 = bf16[3,6,128]{2,1,0} parameter(5)
      bcast6 = bf16[3,6,128,16]{2,1,3,0} broadcast(p5), dimensions={0,1,2}
      bcast7 = bf16[16,3,6,128,16]{3,2,4,1,0} broadcast(bcast6), dimensions={1,2,3,4}
      multiply3 = bf16[16,3,6,128,16]{3,2,4,1,0} multiply(copy2, bcast7)
      ROOT bcast8 = bf16[16,16,3,1,6,128]{5,4,1,3,2,0} bitcast(multiply3)""",
        "p0 = s8[3,12288,6,128]{3,2,1,0} parameter(0)\n p1 = bf16[12288]{0} parameter(1)\n"
        " p2 = bf16[16]{0} parameter(2)\n p3 = bf16[16,12288]{1,0} parameter(3)\n"
        " p4 = bf16[16,12288]{1,0} parameter(4)\n p5 = bf16[3,6,128]{2,1,0} parameter(5)",
        "p0, p1, p2, p3, p4, p5", "bf16[16,16,3,1,6,128]{5,4,1,3,2,0}")
    dom = ("d0 in [0, 15], d1 in [0, 15], d2 in [0, 2], d3 in [0, 0], d4 in [0, 5], "
           "d5 in [0, 127]")
    dims = "(d0, d1, d2, d3, d4, d5)"
    expected = [
        f"{dims}[s0] -> (d2, d0 * 768 + s0, d4, d5), domain: {dom}, s0 in [0, 767]",
        f"{dims}[s0] -> (d0 * 768 + s0), domain: {dom}, s0 in [0, 767]",
        f"{dims} -> (d1), domain: {dom}",
        f"{dims}[s0] -> (d1, d0 * 768 + s0), domain: {dom}, s0 in [0, 767]",
        f"{dims}[s0] -> (d1, d0 * 768 + s0), domain: {dom}, s0 in [0, 767]",
        f"{dims} -> (d2, d4, d5), domain: {dom}",
    ]
    result = indexing(hlo)
    for operand_id, want in enumerate(expected):
        assert [squash(str(m)) for m in result.maps(operand_id)] == [squash(want)], operand_id


def test_grouped_indexing_covers_every_instruction():
    m = parse_module(fusion(
        "p0 = f32[1000, 1000] parameter(0)\n t = f32[1000, 1000]{0,1} transpose(p0), dimensions={1, 0}\n"
        " ROOT a0 = f32[1000, 1000] add(p0, t)",
        "p0 = f32[1000,1000] parameter(0)", "p0", "f32[1000,1000]"))
    comp = m.computation("f")
    grouped = compute_grouped_output_to_input_indexing(comp, comp.root)
    by_name = {instr.name: [squash(str(oi.map)) for oi in maps] for instr, maps in grouped.items()}
    dom = squash("domain: d0 in [0, 999], d1 in [0, 999]")
    assert by_name["a0"] == [squash("(d0, d1) -> (d0, d1),") + dom]
    assert by_name["t"] == [squash("(d0, d1) -> (d0, d1),") + dom]
    assert sorted(by_name["p0"]) == sorted([squash("(d0, d1) -> (d0, d1),") + dom,
                                            squash("(d0, d1) -> (d1, d0),") + dom])


def test_runtime_variable_sources_follow_composition():
    hlo = fusion("""src = s32[150, 64] parameter(0)
        of11 = s32[] parameter(1)
        of12 = s32[] parameter(2)
        of21 = s32[] parameter(3)
        of22 = s32[] parameter(4)
        ds1 = s32[50, 32] dynamic-slice(src, of11, of12), dynamic_slice_sizes={50, 32}
        ROOT ds2 = s32[25, 16] dynamic-slice(ds1, of21, of22), dynamic_slice_sizes={25, 16}""",
        "p0 = s32[150, 64] parameter(0)\n p1 = s32[] parameter(1)\n p2 = s32[] parameter(2)\n"
        " p3 = s32[] parameter(3)\n p4 = s32[] parameter(4)", "p0, p1, p2, p3, p4", "s32[25, 16]")
    (src,) = indexing(hlo).indexing_maps[0]
    # rt order of the map: the producer's (ds1) offsets first, then the consumer's (ds2).
    assert [rt.hlo.name for rt in src.rt_vars] == ["of11", "of12", "of21", "of22"]
    assert all(squash(str(rt.map)) == squash("(d0, d1) -> (), domain: d0 in [0, 24], d1 in [0, 15]")
               for rt in src.rt_vars)
