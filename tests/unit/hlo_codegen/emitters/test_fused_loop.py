"""Loop, concatenate, in-place dynamic-update-slice and scatter fusions as XLA:GPU forms them
(the structure of its optimized HLO for GELU, transposes, concatenates, pads and slices, gathers,
dynamic slices, DUS loops and scatter-adds, written here as small test text): transposes and
index-moving ops inside loop fusions, multi-output loop fusions with roots of different shapes,
concatenates with elementwise operands and epilogues, DUS updates computed in the fusion (in
place when the output shares the updated parameter's buffer), scatters with fused updates. Each
runs on the host backend against the interpreter and its PTX links for sm_90.
"""

from __future__ import annotations

import numpy as np
import pytest

from emitter_testlib import check, fusion_of, run_on_host
from hlo_codegen.emitters import emitter_kind
from hlo_codegen.emitters.concatenate import ConcatenateFusion
from hlo_codegen.emitters.loop import LoopFusion
from hlo_codegen.emitters.reduction import ReductionFusion
from hlo_codegen.kernel_ir import print_kernel

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"

LOOP = {
    "transpose_then_elementwise": """f { p = f32[64,32,128] parameter(0) q = f32[128,32,64] parameter(1)
        t = f32[128,32,64] transpose(p), dimensions={2,1,0} e = f32[128,32,64] exponential(t)
        ROOT a = f32[128,32,64] add(e, q) }""",
    "transpose_and_its_input_as_outputs": """f { p = f32[64,128] parameter(0)
        t = f32[128,64] transpose(p), dimensions={1,0} n = f32[64,128] negate(p)
        ROOT r = (f32[128,64], f32[64,128]) tuple(t, n) }""",
    "transpose_to_another_layout": """f { p = f32[128,64]{1,0} parameter(0)
        t = f32[64,128]{0,1} transpose(p), dimensions={1,0} ROOT n = f32[64,128]{0,1} negate(t) }""",
    "concatenate_inside_elementwise": """f { a = f32[64,100] parameter(0) b = f32[64,200] parameter(1)
        c = f32[64,50] parameter(2) ea = f32[64,100] exponential(a)
        k = f32[64,350] concatenate(ea, b, c), dimensions={1} s = f32[64,350] sine(k)
        ROOT n = f32[64,350] multiply(s, k) }""",
    "slice_scale_pad": """f { p = f32[130,260] parameter(0) s = f32[128,130] slice(p), slice={[1:129],
        [0:260:2]}
        k = f32[] constant(3) bk = f32[128,130] broadcast(k), dimensions={} m = f32[128,130] multiply(s, bk)
        z = f32[] constant(0) ROOT pd = f32[133,132] pad(m, z), padding=2_3x1_1 }""",
    "dynamic_slice_scaled": """f { p = f32[64,128] parameter(0) i = s32[] parameter(1) z = s32[] constant(0)
        d = f32[8,128] dynamic-slice(p, i, z), dynamic_slice_sizes={8,128} c = f32[] constant(2)
        bc = f32[8,128] broadcast(c), dimensions={} ROOT m = f32[8,128] multiply(d, bc) }""",
    "gather_rows_scaled": """f { t = f32[1000,64] parameter(0) i = s32[256] parameter(1) bi =
        s32[256,1] bitcast(i)
        g = f32[256,64] gather(t, bi), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
          index_vector_dim=1, slice_sizes={1,64}
        c = f32[] constant(2) bc = f32[256,64] broadcast(c), dimensions={} ROOT m = f32[256,64]
        multiply(g, bc) }""",
    "outputs_of_different_sizes": """f { p = f32[64,128] parameter(0) q = f32[32] parameter(1)
        e = f32[64,128] exponential(p) n = f32[32] negate(q) ROOT t = (f32[64,128], f32[32]) tuple(e, n) }""",
    "outputs_bitcast_apart": """f { p = f32[64,128] parameter(0) e = f32[64,128] exponential(p)
        b = f32[8,8,128] bitcast(e) l = f32[8,8,128] log(b) ROOT t = (f32[64,128], f32[8,8,128])
        tuple(e, l) }""",
    "outputs_in_two_layouts": """f { p = f32[64,128]{1,0} parameter(0) e = f32[64,128]{1,0} exponential(p)
        c = f32[64,128]{0,1} copy(e) ROOT t = (f32[64,128]{1,0}, f32[64,128]{0,1}) tuple(e, c) }""",
    "same_root_twice_and_a_parameter_root": """f { p = f32[64,128] parameter(0) e = f32[64,128] exponential(p)
        ROOT t = (f32[64,128], f32[64,128], f32[64,128]) tuple(e, e, p) }""",
    "reverse_iota_mask": """f { p = f32[64,512] parameter(0) r = f32[64,512] reverse(p), dimensions={1}
        i0 = s32[64,512] iota(), iota_dimension=0 i1 = s32[64,512] iota(), iota_dimension=1
        lt = pred[64,512] compare(i1, i0), direction=LT z = f32[] constant(0)
        bz = f32[64,512] broadcast(z), dimensions={} ROOT s = f32[64,512] select(lt, r, bz) }""",
    "bf16_gelu_in_f32": """f { p = bf16[64,4096] parameter(0) c = f32[64,4096] convert(p) t =
        f32[64,4096] tanh(c)
        m = f32[64,4096] multiply(c, t) ROOT o = bf16[64,4096] convert(m) }""",
    # a reduction too small for the reduction emitter, normalizing its input in one loop kernel
    "small_reduce_and_broadcast": ADD + """f { p = f32[64,16] parameter(0) z = f32[] constant(0)
        r = f32[64] reduce(p, z), dimensions={1}, to_apply=add b = f32[64,16] broadcast(r), dimensions={0}
        ROOT d = f32[64,16] divide(p, b) }""",
}


# The kind XLA's HloFusionAnalysis gives where it is not the loop emitter: tiled transposes go to
# the transpose emitter, a concatenate found through elementwise ops to the concatenate emitter.
OTHER_KIND = {"concatenate_inside_elementwise": "concatenate", "outputs_in_two_layouts": "transpose",
              "transpose_and_its_input_as_outputs": "transpose", "transpose_then_elementwise": "transpose"}


@pytest.mark.parametrize("name", sorted(LOOP))
def test_loop_fusion_runs_and_matches(name: str) -> None:
    check(LOOP[name], OTHER_KIND.get(name, "loop"))


CONCAT = {
    "elementwise_operands": """f { a = f32[64,100] parameter(0) b = f32[64,200] parameter(1) c =
        f32[64,50] parameter(2)
        ea = f32[64,100] exponential(a) nb = f32[64,200] negate(b)
        ROOT k = f32[64,350] concatenate(ea, nb, c), dimensions={1} }""",
    "unary_epilogue": """f { a = f32[64,100] parameter(0) b = f32[64,200] parameter(1)
        k = f32[64,300] concatenate(a, b), dimensions={1} ROOT n = f32[64,300] exponential(k) }""",
    "transposed_operands": """f { a = f32[64,32] parameter(0) b = f32[64,32] parameter(1)
        ta = f32[32,64] transpose(a), dimensions={1,0} tb = f32[32,64] transpose(b), dimensions={1,0}
        ROOT k = f32[64,64] concatenate(ta, tb), dimensions={0} }""",
}


@pytest.mark.parametrize("name", sorted(CONCAT))
def test_concatenate_fusion_runs_and_matches(name: str) -> None:
    check(CONCAT[name], "concatenate")


def test_concatenate_read_through_a_binary_epilogue() -> None:
    # XLA's hero search passes ops of up to 3 operands: add(q, concat) keeps the concat hero,
    # q read at the output index
    fusion = fusion_of("""f { a = f32[64,100] parameter(0) b = f32[64,200] parameter(1) q = f32[64,300]
        parameter(2)
        k = f32[64,300] concatenate(a, b), dimensions={1} ROOT s = f32[64,300] add(q, k) }""")
    emitter = ConcatenateFusion(fusion)
    assert emitter.fallback is None
    kernel = emitter.emit()
    args = [np.ones((64, 100), np.float32), np.full((64, 200), 2.0, np.float32),
            np.arange(64 * 300, dtype=np.float32).reshape(64, 300)]
    (got,) = run_on_host(fusion, args, kernel)
    want = args[2] + np.concatenate(args[:2], axis=1)
    np.testing.assert_array_equal(got, want)


def test_concatenate_with_a_root_that_is_no_epilogue_uses_the_loop_emitter() -> None:
    fusion = fusion_of("""f { a = f32[64,100] parameter(0) b = f32[64,200] parameter(1)
        k = f32[64,300] concatenate(a, b), dimensions={1} r = f32[64,300] reverse(k), dimensions={1}
        ROOT s = f32[64,300] add(k, r) }""")
    emitter = ConcatenateFusion(fusion)
    assert emitter.fallback is not None
    args = [np.arange(6400, dtype=np.float32).reshape(64, 100), np.ones((64, 200), np.float32)]
    (got,) = run_on_host(fusion, args, emitter.emit())
    k = np.concatenate(args, axis=1)
    np.testing.assert_array_equal(got, k + k[:, ::-1])


DUS_SCALED_UPDATE = """f { p = f32[64,128] parameter(0) u = f32[4,128] parameter(1) i = s32[] parameter(2)
    z = s32[] constant(0) c = f32[] constant(2) bc = f32[4,128] broadcast(c), dimensions={}
    m = f32[4,128] multiply(u, bc) ROOT d = f32[64,128] dynamic-update-slice(p, m, i, z) }"""


@pytest.mark.parametrize("in_place", [False, True])
def test_dus_with_a_computed_update(in_place: bool) -> None:
    # in place: the output shares the updated parameter's buffer (argument ids 0 and 3)
    kernel = check(DUS_SCALED_UPDATE, "in_place_dynamic_update_slice",
                   argument_ids=[0, 1, 2, 0] if in_place else None)
    if in_place:  # one thread per update element, nothing else written
        assert kernel.grid == (4, 1, 1) and kernel.block == (128, 1, 1)


@pytest.mark.parametrize("in_place", [False, True])
def test_two_dus_roots_in_one_fusion(in_place: bool) -> None:
    check("""f { p = f32[64,128] parameter(0) q = f32[32,128] parameter(1) u = f32[4,128] parameter(2)
        i = s32[] parameter(3) z = s32[] constant(0)
        d1 = f32[64,128] dynamic-update-slice(p, u, i, z) n = f32[4,128] negate(u)
        d2 = f32[32,128] dynamic-update-slice(q, n, i, z)
        ROOT t = (f32[64,128], f32[32,128]) tuple(d1, d2) }""", "in_place_dynamic_update_slice",
          argument_ids=[0, 1, 2, 3, 0, 1] if in_place else None)


def test_dus_of_a_slice_of_the_same_buffer_in_place() -> None:
    check("""f { p = f32[64,128] parameter(0) i = s32[] parameter(1) z = s32[] constant(0)
        ds = f32[4,128] dynamic-slice(p, i, z), dynamic_slice_sizes={4,128} n = f32[4,128] negate(ds)
        ROOT d = f32[64,128] dynamic-update-slice(p, n, i, z) }""", "in_place_dynamic_update_slice",
          argument_ids=[0, 1, 0])


def test_dus_behind_a_bitcast_root() -> None:
    check("""f { p = f32[64,128] parameter(0) u = f32[4,128] parameter(1) i = s32[] parameter(2)
        z = s32[] constant(0) d = f32[64,128] dynamic-update-slice(p, u, i, z)
        ROOT b = f32[8192] bitcast(d) }""", "in_place_dynamic_update_slice")


def test_scatter_add_with_fused_updates() -> None:
    kernel = check(ADD + """f { t = f32[1000,64] parameter(0) i = s32[256] parameter(1) u = f32[256,64]
        parameter(2)
        bi = s32[256,1] bitcast(i) c = f32[] constant(2) bc = f32[256,64] broadcast(c), dimensions={}
        m = f32[256,64] multiply(u, bc)
        ROOT s = f32[1000,64] scatter(t, bi, m), update_window_dims={1}, inserted_window_dims={0},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add }""", "scatter")
    assert "multiply" in print_kernel(kernel) or "mulf" in print_kernel(kernel)


def test_transpose_hero_is_emitted_whatever_kind_it_gets() -> None:
    # XLA routes a tiled transpose to its transpose emitter; here it must at least run as a loop
    fusion = fusion_of("""f { p = f32[1024,768] parameter(0) t = f32[768,1024] transpose(p), dimensions={1,0}
        c = f32[] constant(1) b = f32[768,1024] broadcast(c), dimensions={} ROOT a = f32[768,1024]
        add(t, b) }""")
    assert emitter_kind(fusion)[0] in ("loop", "transpose")
    check(fusion)


@pytest.mark.parametrize("with_reduce", [False, True])
def test_chains_longer_than_pythons_recursion_limit(with_reduce: bool) -> None:
    # 1200 fused elementwise ops (and 1200 more after a reduce): elemental emission recurses per
    # op, beyond Python's default 1000 frames; compared with numpy (the interpreter recurses too)
    n = 1200
    lines = [ADD, "f { p = f32[64,128] parameter(0) z = f32[] constant(0)"]
    prev = "p"
    for i in range(n):
        lines.append(f"n{i} = f32[64,128] {'negate' if i % 2 else 'sine'}({prev})")
        prev = f"n{i}"
    if with_reduce:
        lines.append(f"r = f32[64] reduce({prev}, z), dimensions={{1}}, to_apply=add")
        prev = "r"
        for i in range(n):
            lines.append(f"e{i} = f32[64] {'negate' if i % 2 else 'cosine'}({prev})")
            prev = f"e{i}"
    lines.append(f"ROOT o = f32[{'64' if with_reduce else '64,128'}] abs({prev}) }}")
    fusion = fusion_of("\n".join(lines))
    emitter = (ReductionFusion if with_reduce else LoopFusion)(fusion)
    x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    (got,) = run_on_host(fusion, [x], emitter.emit())
    y = x
    for i in range(n):
        y = -y if i % 2 else np.sin(y)
    if with_reduce:
        y = y.sum(axis=1, dtype=np.float64).astype(np.float32)
        for i in range(n):
            y = -y if i % 2 else np.cos(y)
    np.testing.assert_allclose(got, np.abs(y), rtol=1e-5, atol=1e-5)
