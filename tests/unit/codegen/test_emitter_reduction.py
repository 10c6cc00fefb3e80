"""The reduction emitter: row reductions by warp (shuffle_reduce), others by thread, epilogues,
side outputs, variadic reducers and XLA's reduce_* emitter tests, on the host against the
interpreter and linked as PTX for sm_90."""

from __future__ import annotations


import numpy as np
import pytest

from corpus_lib import CORPUS_DIR as CORPUS
from emitter_testlib import check, fusion_of, run_on_host
from hlo_codegen.emitters.reduction import ReductionFusion
from hlo_codegen.kernel_ir import print_kernel


ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"


def test_row_reduction_is_a_warp_per_row() -> None:
    kernel = check(ADD + """f { p = f32[37,1000] parameter(0) z = f32[] constant(0)
        ROOT r = f32[37] reduce(p, z), dimensions={1}, to_apply=add }""", "reduction")
    assert kernel.block == (32, 4, 1) and kernel.grid == (10, 1, 1)  # 37 rows, 4 warps a block
    text = print_kernel(kernel)
    assert "shuffle_reduce" in text and "f64" in text  # f32 sums accumulate in f64


def test_column_reduction_is_a_thread_per_output() -> None:
    kernel = check(ADD + """f { p = f32[1000,300] parameter(0) z = f32[] constant(0)
        ROOT r = f32[300] reduce(p, z), dimensions={0}, to_apply=add }""", "reduction")
    assert "shuffle_reduce" not in print_kernel(kernel)


def test_full_reduction_with_non_identity_init_uses_it_once() -> None:
    fusion = fusion_of(ADD + """f { p = f32[100,70] parameter(0) z = f32[] parameter(1)
        ROOT r = f32[] reduce(p, z), dimensions={0,1}, to_apply=add }""")
    args = [np.ones((100, 70), np.float32), np.float32(5.0)]
    (got,) = run_on_host(fusion, args)
    assert got == 7005.0  # not 5 per lane
    check(fusion)


def test_integer_sums_wrap_exactly() -> None:
    fusion = fusion_of("""add { a = s8[] parameter(0) b = s8[] parameter(1) ROOT s = s8[] add(a, b) }
        f { p = s8[9,4096] parameter(0) z = s8[] constant(3)
        ROOT r = s8[9] reduce(p, z), dimensions={1}, to_apply=add }""")
    x = np.random.default_rng(0).integers(-128, 128, (9, 4096)).astype(np.int8)
    (got,) = run_on_host(fusion, [x])
    want = ((x.astype(np.int64).sum(axis=1) + 3 + 128) % 256 - 128).astype(np.int8)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("etype", ["f16", "bf16"])
def test_narrow_float_sums_accumulate_in_f32(etype: str) -> None:
    # Rounding to f16 after every step drifts far beyond 2e-2 over 2^16 elements.
    check(f"""add {{ a = {etype}[] parameter(0) b = {etype}[] parameter(1) ROOT s = {etype}[] add(a, b) }}
        f {{ p = {etype}[4,65536] parameter(0) z = {etype}[] constant(0)
        ROOT r = {etype}[4] reduce(p, z), dimensions={{1}}, to_apply=add }}""", "reduction")


def test_max_reduction_keeps_nans_and_signed_zeros() -> None:
    fusion = fusion_of("""mx { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] maximum(a, b) }
        f { p = f32[3,64] parameter(0) z = f32[] constant(-inf)
        ROOT r = f32[3] reduce(p, z), dimensions={1}, to_apply=mx }""")
    x = -np.ones((3, 64), np.float32)
    x[0, 17] = np.nan
    x[1, :] = -0.0
    x[1, 40] = 0.0
    (got,) = run_on_host(fusion, [x])
    assert np.isnan(got[0]) and got[1] == 0.0 and not np.signbit(got[1]) and got[2] == -1.0
    check(fusion, args=[x])


def test_variadic_argmax_row_reduction() -> None:
    check("""argmax { v0 = f32[] parameter(0) i0 = s32[] parameter(1)
          v1 = f32[] parameter(2) i1 = s32[] parameter(3)
          gt = pred[] compare(v0, v1), direction=GT eq = pred[] compare(v0, v1), direction=EQ
          lt = pred[] compare(i0, i1), direction=LT tie = pred[] and(eq, lt) keep = pred[] or(gt, tie)
          v = f32[] select(keep, v0, v1) i = s32[] select(keep, i0, i1) ROOT t = (f32[], s32[]) tuple(v, i) }
        f { p = f32[6,300] parameter(0) io = s32[6,300] iota(), iota_dimension=1
          ninf = f32[] constant(-inf) zero = s32[] constant(0)
          ROOT r = (f32[6], s32[6]) reduce(p, io, ninf, zero), dimensions={1}, to_apply=argmax }""",
          "reduction")


def test_epilogue_and_side_output() -> None:
    kernel = check(ADD + """f { p = f32[8,512] parameter(0) z = f32[] constant(0)
        e = f32[8,512] exponential(p)
        r = f32[8] reduce(p, z), dimensions={1}, to_apply=add
        c = bf16[8] convert(r) n = bf16[8] negate(c) b = bf16[2,4] bitcast(n)
        ROOT t = (bf16[2,4], f32[8,512]) tuple(b, e) }""", "reduction")
    assert kernel.grid[0] >= 8 * 512 // 128  # the side output needs a thread per element


def test_reduce_of_fused_producer_and_layout() -> None:
    check(ADD + """f { p = f32[40,50,60]{0,2,1} parameter(0) q = f32[40,50,60] parameter(1)
        z = f32[] constant(0)
        m = f32[40,50,60] multiply(p, q)
        ROOT r = f32[50]{0} reduce(m, z), dimensions={0,2}, to_apply=add }""")
    check(ADD + """f { p = f32[16,33,64]{1,2,0} parameter(0) z = f32[] constant(0)
        ROOT r = f32[16,33]{0,1} reduce(p, z), dimensions={2}, to_apply=add }""", "reduction")


def test_small_rows_and_pred_reductions() -> None:
    check("""or { a = pred[] parameter(0) b = pred[] parameter(1) ROOT s = pred[] or(a, b) }
        f { p = pred[512,8] parameter(0) z = pred[] constant(false)
        ROOT r = pred[512] reduce(p, z), dimensions={1}, to_apply=or }""", "reduction")
    check("""mul { a = c64[] parameter(0) b = c64[] parameter(1) ROOT s = c64[] multiply(a, b) }
        f { p = c64[64,40] parameter(0) z = c64[] constant((1, 0))
        ROOT r = c64[64] reduce(p, z), dimensions={1}, to_apply=mul }""")


def test_packed_outputs_are_written_by_whole_bytes() -> None:
    kernel = check("""add { a = s4[] parameter(0) b = s4[] parameter(1) ROOT s = s4[] add(a, b) }
        f { p = s4[37,64]{1,0:E(4)} parameter(0) z = s4[] constant(0)
        ROOT r = s4[37]{0:E(4)} reduce(p, z), dimensions={1}, to_apply=add }""", "reduction")
    assert "shuffle_reduce" not in print_kernel(kernel)


def test_empty_reduced_dims_give_the_init() -> None:
    fusion = fusion_of(ADD + """f { p = f32[64,0] parameter(0) z = f32[] constant(2.5)
        ROOT r = f32[64] reduce(p, z), dimensions={1}, to_apply=add }""")
    # (emitter_kind's hero test divides by the reduced size; XLA removes such reduces earlier)
    (got,) = run_on_host(fusion, [np.zeros((64, 0), np.float32)], ReductionFusion(fusion).emit())
    assert (got == 2.5).all()


# One file per XLA variant and feature runs by default, the rest in the slow tier.
DEFAULT_FILES = {f"backends_gpu_codegen_emitters_tests_reduce_{n}.hlo" for n in (
    "column__odd_sizes", "column__vectorize_x1_c64", "column__mof_heteorgeneous_input_shapes",
    "column_small__input_layout", "multirow__f16_v4", "multirow__pred_mof_x2_v4", "row__mof_epilogue",
    "row__mof_variadic_variadic", "row__reduction_groups", "row__side_output_s4", "row__layout",
    "row__minor_and_major")}
REDUCE_FILES = [pytest.param(p.name, marks=() if p.name in DEFAULT_FILES else pytest.mark.slow)
                for p in sorted(CORPUS.glob("backends_gpu_codegen_emitters_tests_reduce_*.hlo"))]


@pytest.mark.parametrize("name", REDUCE_FILES)
def test_xla_reduce_emitter_files(name: str) -> None:
    # PTX linking of these kernel shapes is covered above; here the numbers.
    check((CORPUS / name).read_text(), "reduction", ptx=False)
