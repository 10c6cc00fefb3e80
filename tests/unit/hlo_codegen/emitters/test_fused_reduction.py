"""Reduction fusions as XLA:GPU's priority and multi-output fusion form them (the structure of
its optimized HLO for softmax, layernorm, RMSNorm and their backward passes, written here as
small test text): an elementwise prologue, unary epilogues, side outputs of the reduce's input
shape, several reduce heroes in one kernel, variadic (argmax) reducers, layouts. Each runs on the
host backend against the interpreter (16-bit floats within 2e-2) and its PTX links for sm_90.

The emitter must take whatever the hero analysis routes to it, so some tests hand fusions to
`ReductionFusion` directly: epilogues the analysis (XLA's FindNonTrivialHero) walks through, such
as `floor`, bitcast-like transposes and a reduce with several users, and roots that are no
epilogue at all (computed as side outputs).
"""

from __future__ import annotations

import numpy as np
import pytest

from emitter_testlib import (
    assert_close, check, fusion_of, index_aware_args, link_ptx, nvjitlink_available, output_shapes,
    reference, run_on_host,
)
from hlo_codegen.emitters.reduction import ReductionFusion, reduce_hero
from hlo_codegen.kernel_ir import print_kernel

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
MAX = "mx { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] maximum(a, b) }\n"
ARGMAX = """am { v0 = f32[] parameter(0) i0 = s32[] parameter(1) v1 = f32[] parameter(2) i1 = s32[]
        parameter(3)
  gt = pred[] compare(v0, v1), direction=GT eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT tie = pred[] and(eq, lt) k = pred[] or(gt, tie)
  v = f32[] select(k, v0, v1) i = s32[] select(k, i0, i1) ROOT t = (f32[], s32[]) tuple(v, i) }
"""

FUSIONS = {
    # softmax's second kernel: exp(x - max) summed per row, the exponentials kept as a side output
    "softmax_sum_with_side_output": ADD + """f { p = f32[64,512] parameter(0) m = f32[64] parameter(1)
        z = f32[] constant(0) bm = f32[64,512] broadcast(m), dimensions={0} s = f32[64,512] subtract(p, bm)
        e = f32[64,512] exponential(s) r = f32[64] reduce(e, z), dimensions={1}, to_apply=add
        ROOT t = (f32[64], f32[64,512], f32[64,512]) tuple(r, e, s) }""",
    # layernorm statistics: mean and mean of squares of the same input in one kernel
    "two_row_heroes_one_input": ADD + """f { p = f32[128,300] parameter(0) z = f32[] constant(0)
        r1 = f32[128] reduce(p, z), dimensions={1}, to_apply=add m = f32[128,300] multiply(p, p)
        r2 = f32[128] reduce(m, z), dimensions={1}, to_apply=add
        ROOT t = (f32[128], f32[128]) tuple(r1, r2) }""",
    # layernorm backward: a row and a column reduction of one product (different output shapes)
    "row_and_column_heroes": ADD + """f { p = f32[128,300] parameter(0) q = f32[128,300] parameter(1)
        z = f32[] constant(0) m = f32[128,300] multiply(p, q)
        r1 = f32[128] reduce(m, z), dimensions={1}, to_apply=add
        r2 = f32[300] reduce(m, z), dimensions={0}, to_apply=add
        ROOT t = (f32[128], f32[300], f32[128,300]) tuple(r1, r2, m) }""",
    "heroes_of_different_inputs": ADD + MAX + """f { p = f32[128,300] parameter(0) q = f32[64,50] parameter(1)
        z = f32[] constant(0) mi = f32[] constant(-inf)
        r1 = f32[128] reduce(p, z), dimensions={1}, to_apply=add
        r2 = f32[50] reduce(q, mi), dimensions={0}, to_apply=mx
        ROOT t = (f32[128], f32[50]) tuple(r1, r2) }""",
    # a reduce read by several roots: itself, a convert and a bitcast of it
    "epilogues_sharing_a_reduce": ADD + """f { p = f32[64,512] parameter(0) z = f32[] constant(0)
        r = f32[64] reduce(p, z), dimensions={1}, to_apply=add c = bf16[64] convert(r) b = f32[8,8] bitcast(r)
        ROOT t = (f32[64], bf16[64], f32[8,8]) tuple(r, c, b) }""",
    # RMSNorm's statistics in bf16: f32 prologue and epilogue around an f32 sum
    "bf16_rms_statistics": ADD + """f { p = bf16[64,1024] parameter(0) z = f32[] constant(0)
        c = f32[64,1024] convert(p) m = f32[64,1024] multiply(c, c)
        r = f32[64] reduce(m, z), dimensions={1}, to_apply=add s = f32[64] sqrt(r)
        ROOT o = bf16[64] convert(s) }""",
    "column_with_side_output": ADD + """f { p = f32[1000,64] parameter(0) z = f32[] constant(0)
        e = f32[1000,64] exponential(p) r = f32[64] reduce(e, z), dimensions={0}, to_apply=add
        ROOT t = (f32[64], f32[1000,64]) tuple(r, e) }""",
    "side_output_of_another_shape": ADD + """f { p = f32[64,512] parameter(0) z = f32[] constant(0)
        e = f32[64,512] exponential(p) r = f32[64] reduce(e, z), dimensions={1}, to_apply=add
        b = f32[64,8,64] bitcast(e) ROOT t = (f32[64], f32[64,8,64]) tuple(r, b) }""",
    "middle_dimension_with_side_output": ADD + """f { p = f32[16,300,64] parameter(0) z = f32[] constant(0)
        n = f32[16,300,64] negate(p) r = f32[16,64] reduce(n, z), dimensions={1}, to_apply=add
        ROOT t = (f32[16,64], f32[16,300,64]) tuple(r, n) }""",
    "column_major_layout": ADD + """f { p = f32[300,128]{0,1} parameter(0) z = f32[] constant(0)
        ROOT r = f32[128] reduce(p, z), dimensions={0}, to_apply=add }""",
    "argmax_of_a_prologue": ARGMAX + """f { p = f32[32,1000] parameter(0) q = f32[32,1000] parameter(1)
        a = f32[32,1000] add(p, q) io = s32[32,1000] iota(), iota_dimension=1 mi = f32[] constant(-inf)
        z = s32[] constant(0)
        ROOT r = (f32[32], s32[32]) reduce(a, io, mi, z), dimensions={1}, to_apply=am }""",
    "full_reduction_with_bitcast_epilogue": ADD + """f { p = f32[300,700] parameter(0) z = f32[] constant(0)
        r = f32[] reduce(p, z), dimensions={0,1}, to_apply=add ROOT b = f32[1,1] bitcast(r) }""",
    "small_reduce_inside_the_prologue": ADD + """f { p = f32[64,8,4] parameter(0) z = f32[] constant(0)
        r0 = f32[64,8] reduce(p, z), dimensions={2}, to_apply=add
        ROOT r = f32[64] reduce(r0, z), dimensions={1}, to_apply=add }""",
    "integer_max_with_side_output": """mxi { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s =
        s32[] maximum(a, b) }
        f { p = s32[100,200] parameter(0) z = s32[] constant(-2147483648) m = s32[100,200] multiply(p, p)
        r = s32[100] reduce(m, z), dimensions={1}, to_apply=mxi ROOT t = (s32[100], s32[100,200])
        tuple(r, m) }""",
    "bitcast_and_transpose_prologue": ADD + """f { p = f32[8,64,512] parameter(0) q = f32[512,64] parameter(1)
        z = f32[] constant(0) b = f32[512,512] bitcast(p) r1 = f32[512] reduce(b, z), dimensions={1},
        to_apply=add
        t = f32[64,512] transpose(q), dimensions={1,0} r2 = f32[64] reduce(t, z), dimensions={1}, to_apply=add
        ROOT o = (f32[512], f32[64]) tuple(r1, r2) }""",
    "f16_column_sum": """addh { a = f16[] parameter(0) b = f16[] parameter(1) ROOT s = f16[] add(a, b) }
        f { p = f16[2048,256] parameter(0) z = f16[] constant(0)
        ROOT r = f16[256] reduce(p, z), dimensions={0}, to_apply=addh }""",
}


# Fusions XLA's HloFusionAnalysis does not give the reduction emitter (hlo_common.gpu.hlo_fusion_analysis
# follows it): reduction heroes of different shapes or inputs are not compatible, and a reduce
# that is not the root must be race-free (a 210,000-element full reduction is not; XLA's
# tree-reduction-rewriter splits it first). They run as loop fusions, reductions computed
# elementally; the reduction emitter itself is still checked on them below.
LOOP_KIND = {"bitcast_and_transpose_prologue", "full_reduction_with_bitcast_epilogue",
             "heroes_of_different_inputs", "row_and_column_heroes"}


@pytest.mark.parametrize("name", sorted(FUSIONS))
def test_reduction_fusion_runs_and_matches(name: str) -> None:
    check(FUSIONS[name], "loop" if name in LOOP_KIND else "reduction")


def _run_reduction_emitter(text: str) -> str:
    """ReductionFusion on `text` whatever the kind selection says; compared with the interpreter."""
    fusion = fusion_of(text)
    kernel = ReductionFusion(fusion).emit()
    args = index_aware_args(fusion, 0)
    want = reference(fusion, args)
    got = run_on_host(fusion, [a.copy() for a in args], kernel)
    for k, (g, w, s) in enumerate(zip(got, want, output_shapes(fusion))):
        assert_close(g, w, s, None, f"output {k}")
    if nvjitlink_available():
        link_ptx(kernel)
    return print_kernel(kernel)


@pytest.mark.parametrize("name", sorted(LOOP_KIND))
def test_reduction_emitter_also_runs_fusions_xla_sends_to_the_loop_emitter(name: str) -> None:
    _run_reduction_emitter(FUSIONS[name])


def test_any_unary_epilogue_is_applied_to_the_reduced_value() -> None:
    # floor and a bitcast-like transpose of [64,1] -> [1,64]: XLA's FindNonTrivialHero walks both
    text = _run_reduction_emitter(ADD + """f { p = f32[64,1,512] parameter(0) z = f32[] constant(0)
        r = f32[64,1] reduce(p, z), dimensions={2}, to_apply=add f = f32[64,1] floor(r)
        ROOT t = f32[1,64] transpose(f), dimensions={1,0} }""")
    assert "shuffle_reduce" in text  # the warp-per-row path, not an elemental loop


SHARED_REDUCE = ADD + """f { p = f32[64,512] parameter(0) z = f32[] constant(0)
    r = f32[64] reduce(p, z), dimensions={1}, to_apply=add c = f32[64] cosine(r) n = f32[64] negate(r)
    ROOT t = (f32[64], f32[64]) tuple(c, n) }"""


def test_epilogue_of_a_reduce_with_other_users_is_written_when_it_finishes() -> None:
    roots = fusion_of(SHARED_REDUCE).fused_computation().root.operands
    assert [reduce_hero(r).name for r in roots] == ["r", "r"]
    _run_reduction_emitter(SHARED_REDUCE)


def test_get_tuple_element_epilogue_of_a_variadic_reduce() -> None:
    _run_reduction_emitter(ARGMAX + """f { p = f32[32,1000] parameter(0) io = s32[32,1000] iota(),
        iota_dimension=1
        mi = f32[] constant(-inf) z = s32[] constant(0)
        r = (f32[32], s32[32]) reduce(p, io, mi, z), dimensions={1}, to_apply=am
        i = s32[32] get-tuple-element(r), index=1 ROOT c = f32[32] convert(i) }""")


NOT_AN_EPILOGUE = ADD + """f { p = f32[64,512] parameter(0) q = f32[64] parameter(1) z = f32[] constant(0)
    r = f32[64] reduce(p, z), dimensions={1}, to_apply=add a = f32[64] add(r, q)
    ROOT t = (f32[64], f32[64]) tuple(r, a) }"""


def test_root_that_is_no_epilogue_is_a_side_output() -> None:
    # add(reduce, param) is no unary epilogue: computed over its own shape (the reduce recomputed)
    roots = fusion_of(NOT_AN_EPILOGUE).fused_computation().root.operands
    assert reduce_hero(roots[0]) is roots[0] and reduce_hero(roots[1]) is None
    _run_reduction_emitter(NOT_AN_EPILOGUE)


def test_side_outputs_and_heroes_cover_every_output_element() -> None:
    # outputs start as zeros: every element of all three must be written
    fusion = fusion_of(FUSIONS["row_and_column_heroes"])
    args = [np.ones((128, 300), np.float32), np.full((128, 300), 2.0, np.float32)]
    r1, r2, m = run_on_host(fusion, args)
    np.testing.assert_array_equal(r1, np.full(128, 600.0, np.float32))
    np.testing.assert_array_equal(r2, np.full(300, 256.0, np.float32))
    np.testing.assert_array_equal(m, np.full((128, 300), 2.0, np.float32))
