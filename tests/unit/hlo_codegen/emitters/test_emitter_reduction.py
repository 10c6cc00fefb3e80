"""The reduction emitter: XLA's row, multi-row, column and small-column kernels (launch
dimensions, shared tiles and shuffle distances worked out by hand from XLA's rules), the simple
kernels it falls back to, epilogues, side outputs, variadic reducers and XLA's reduce_* emitter
tests, on the host against the interpreter and linked as PTX for sm_90."""

from __future__ import annotations


import numpy as np
import pytest

from corpus_lib import CORPUS_DIR as CORPUS
from emitter_testlib import check, fusion_of, run_on_host
from hlo_codegen.emitters.reduction import ReductionFusion
from hlo_codegen.kernel_ir import print_kernel


ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"


def _ops(kernel, name: str) -> list:
    return [op for op in kernel.body.walk() if op.name == name]


def _shared(kernel) -> list[tuple[str, int]]:
    return [(b.hlo_type, b.num_elements) for b in kernel.buffers if b.kind == "shared"]


def _loads(kernel) -> set[str]:
    return {op.results[0].type for op in kernel.body.walk() if op.name == "load"}


def test_row_reduction_is_xla_row_emitter() -> None:
    # minor 1000: 64 threads per row (ceil(1000 / 16) rounded up to a warp), 4 rows per block of
    # 256, vector 2 (f32, 2 * 64 <= 1000), 8 vectors per thread: one block per 4 rows.
    kernel = check(ADD + """f { p = f32[37,1000] parameter(0) z = f32[] constant(0)
        ROOT r = f32[37] reduce(p, z), dimensions={1}, to_apply=add }""", "reduction")
    assert kernel.block == (256, 1, 1) and kernel.grid == (10, 1, 1)
    shuffles = _ops(kernel, "shuffle_reduce")
    assert [op.attrs["max_distance"] for op in shuffles] == [16, 16]  # warp, then across warps
    assert _shared(kernel) == [("f32", 4 * 2)] and len(_ops(kernel, "sync_threads")) == 1
    assert "vector<2xf32>" in _loads(kernel)
    assert "f64" not in print_kernel(kernel)  # f32 sums accumulate in f32, as XLA's


def test_one_warp_per_row_needs_no_shared_memory() -> None:
    kernel = check(ADD + """f { p = f32[100,256] parameter(0) z = f32[] constant(0)
        ROOT r = f32[100] reduce(p, z), dimensions={1}, to_apply=add }""", "reduction")
    assert kernel.block == (256, 1, 1) and kernel.grid == (13, 1, 1)  # 8 rows of 32 threads
    assert not _shared(kernel) and len(_ops(kernel, "shuffle_reduce")) == 1


def test_multi_row_reduction_shuffles_within_the_row() -> None:
    # minor 16 (a power of two): vector 2 would give 64 blocks < 132 SMs, so vector 1: 16 threads
    # per row, 16 rows per block, 128 blocks, one shuffle over 16 lanes
    kernel = check(ADD + """f { p = f32[2048,16] parameter(0) z = f32[] constant(0)
        ROOT r = f32[2048] reduce(p, z), dimensions={1}, to_apply=add }""", "reduction")
    assert kernel.block == (256, 1, 1) and kernel.grid == (128, 1, 1)
    assert [op.attrs["max_distance"] for op in _ops(kernel, "shuffle_reduce")] == [8]
    assert not _shared(kernel)


def test_column_reduction_goes_through_a_transposed_shared_tile() -> None:
    # 32 x 32 threads, vector 2 along the kept minor dim: ceil(300 / 64) = 5 blocks, a
    # [32][65] f32 tile, then one warp shuffle per vector lane
    kernel = check(ADD + """f { p = f32[1000,300] parameter(0) z = f32[] constant(0)
        ROOT r = f32[300] reduce(p, z), dimensions={0}, to_apply=add }""", "reduction")
    assert kernel.block == (1024, 1, 1) and kernel.grid == (5, 1, 1)
    assert _shared(kernel) == [("f32", 32 * 65)] and kernel.shared_memory_bytes == 8320
    assert [op.attrs["max_distance"] for op in _ops(kernel, "shuffle_reduce")] == [16, 16]
    assert "vector<2xf32>" in _loads(kernel)


def test_small_column_reduction() -> None:
    # kept minor 8 divides 32: 128 threads, vector 2 over reduced x kept, 2 * 128 / 8 = 32 shared
    # rows of 8 + 1 (padding) elements, shuffles over the 32 rows
    kernel = check(ADD + """f { p = f32[100,300,8] parameter(0) z = f32[] constant(0)
        ROOT r = f32[100,8] reduce(p, z), dimensions={1}, to_apply=add }""", "reduction")
    assert kernel.block == (128, 1, 1) and kernel.grid == (100, 1, 1)
    assert _shared(kernel) == [("f32", 32 * 9)]
    assert [op.attrs["max_distance"] for op in _ops(kernel, "shuffle_reduce")] == [16, 16]


def test_reduction_groups_run_on_blocks_z() -> None:
    kernel = check(ADD + """f { p = f32[128,300] parameter(0) q = f32[128,300] parameter(1)
        z = f32[] constant(0) r1 = f32[128] reduce(p, z), dimensions={1}, to_apply=add
        r2 = f32[128] reduce(q, z), dimensions={1}, to_apply=add
        ROOT t = (f32[128], f32[128]) tuple(r1, r2) }""", "reduction")
    assert kernel.grid[2] == 2 and any(op.attrs.get("dim") == "z" for op in _ops(kernel, "block_id"))
    # minor 300: 32 threads per row (one warp), so each group shuffles once, no shared step
    assert len(_ops(kernel, "shuffle_reduce")) == 2 and not _shared(kernel)


@pytest.mark.parametrize("text", [
    ADD + "f { p = f32[37,1000] parameter(0) z = f32[] constant(0) ROOT r = f32[37] reduce(p, z), "
          "dimensions={1}, to_apply=add }",
    ADD + "f { p = f32[7,3000,130] parameter(0) z = f32[] constant(0) ROOT r = f32[7,130] reduce(p, z), "
          "dimensions={1}, to_apply=add }",
    ADD + "f { p = f32[8,20,64] parameter(0) z = f32[] constant(0) ROOT r = f32[20] reduce(p, z), "
          "dimensions={0,2}, to_apply=add }",
])
def test_launch_dimensions_are_fusion_analysis_figures(text: str) -> None:
    from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis

    fusion = fusion_of(text)
    kernel = ReductionFusion(fusion).emit()
    analysis = FusionAnalysis.of_fusion(fusion)
    blocks, threads = analysis.launch_dimensions()
    assert (kernel.num_blocks, kernel.num_threads) == (blocks, threads)


def test_bf16_sums_keep_f32_partials() -> None:
    kernel = check("""add { a = bf16[] parameter(0) b = bf16[] parameter(1) ROOT s = bf16[] add(a, b) }
        f { p = bf16[64,8192] parameter(0) z = bf16[] constant(0)
        ROOT r = bf16[64] reduce(p, z), dimensions={1}, to_apply=add }""", "reduction")
    assert _shared(kernel) == [("f32", 16)]  # 512 threads per row: 16 warps


def test_variadic_reducer_with_parameter_init_keeps_the_simple_kernel() -> None:
    # argmax's init is no identity the tiled kernels could start every thread from
    text = """am { v0 = f32[] parameter(0) i0 = s32[] parameter(1) v1 = f32[] parameter(2)
          i1 = s32[] parameter(3) gt = pred[] compare(v0, v1), direction=GT
          v = f32[] select(gt, v0, v1) i = s32[] select(gt, i0, i1) ROOT t = (f32[], s32[]) tuple(v, i) }
        f { p = f32[6,300] parameter(0) io = s32[6,300] iota(), iota_dimension=1
          m = f32[] parameter(1) zero = s32[] constant(0)
          ROOT r = (f32[6], s32[6]) reduce(p, io, m, zero), dimensions={1}, to_apply=am }"""
    from hlo_codegen.emitters.reduction import SimpleReductionFusion

    assert isinstance(ReductionFusion(fusion_of(text)), SimpleReductionFusion)
    check(text, "reduction")


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
    # XLA's row kernel: 32 threads per row, all 8 rows in one block; the side output is written
    # by the threads that read its elements
    assert kernel.grid == (1, 1, 1) and kernel.block == (256, 1, 1)


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
    assert "shuffle_reduce" not in print_kernel(kernel)  # packed outputs: the simple kernels


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
