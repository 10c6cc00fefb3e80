"""Elemental dot and convolution (fused or wrapped, emitted by the loop emitter): batch and
contracting dims, integer / pred / complex / narrow-float accumulation, every convolution
feature - on the host against the interpreter and numpy, PTX linked for sm_90."""

from __future__ import annotations


import numpy as np
import pytest

from corpus_lib import CORPUS_DIR as CORPUS
from emitter_testlib import check, fusion_of, index_aware_args, run_on_host



@pytest.mark.parametrize("a, b, out, dims", [
    ("f32[4,5,6]", "f32[4,6,3]", "f32[4,5,3]",
     "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}"),
    ("bf16[7,6]", "s8[3,6]", "f32[7,3]", "lhs_contracting_dims={1}, rhs_contracting_dims={1}"),
    ("s8[7,6]", "s8[6,3]", "s32[7,3]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("f32[3,4,5]{0,1,2}", "f32[5,2,4]", "f32[3,2]", "lhs_contracting_dims={1,2}, rhs_contracting_dims={2,0}"),
    ("c64[3,4]", "c64[4]", "c64[3]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("pred[5,8]", "pred[8,2]", "pred[5,2]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("f32[6]", "f32[6]", "f32[]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    ("f16[2,3]", "f16[4,5]", "f16[2,3,4,5]", ""),  # an outer product: nothing contracted
])
def test_dot(a: str, b: str, out: str, dims: str) -> None:
    attrs = f", {dims}" if dims else ""
    check(f"f {{ a = {a} parameter(0) b = {b} parameter(1) ROOT d = {out} dot(a, b){attrs} }}", "loop")


def test_integer_dot_wraps_like_numpy() -> None:
    fusion = fusion_of("""f { a = s32[3,50] parameter(0) b = s32[50,2] parameter(1)
        ROOT d = s32[3,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} }""")
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-2**31, 2**31, s).astype(np.int32) for s in ((3, 50), (50, 2)))
    (got,) = run_on_host(fusion, [a, b])
    np.testing.assert_array_equal(got, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32))


def test_fused_dot_with_prologue_and_epilogue() -> None:
    check("""f { a = bf16[16,32] parameter(0) b = bf16[32,8] parameter(1) c = f32[16,8] parameter(2)
        e = bf16[16,32] exponential(a) t = bf16[8,32] transpose(b), dimensions={1,0}
        d = f32[16,8] dot(e, t), lhs_contracting_dims={1}, rhs_contracting_dims={1}
        ROOT r = f32[16,8] add(d, c) }""", "loop")


@pytest.mark.parametrize("conv", [
    "f32[2,7,7,3] parameter(0), f32[3,3,3,4] parameter(1) -> f32[2,4,4,4]: "
    "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
    "f32[4,6,5,5] parameter(0), f32[4,3,2,2] parameter(1) -> f32[4,4,10,3]: "
    "window={size=2x2 pad=1_1x0_0 lhs_dilate=2x1 rhs_dilate=1x2 rhs_reversal=1x0}, "
    "dim_labels=bf01_oi01->bf01, "
    "feature_group_count=2",
    "f32[4,3,5] parameter(0), f32[3,2,4] parameter(1) -> f32[2,4,4]: "
    "window={size=2}, dim_labels=bf0_i0o->bf0, batch_group_count=2",
    "bf16[1,9,4] parameter(0), bf16[3,4,6] parameter(1) -> bf16[1,5,6]: "
    "window={size=3 stride=2 pad=2_1}, dim_labels=b0f_0io->b0f",
    "s8[2,3,8]{0,2,1} parameter(0), s8[2,3,5] parameter(1) -> s32[2,5,7]{1,0,2}: "
    "window={size=2 pad=0_0}, dim_labels=bf0_0io->bf0",
])
def test_convolution(conv: str) -> None:
    operands, _, rest = conv.partition(" -> ")
    out, _, attrs = rest.partition(": ")
    lhs, rhs = operands.split(", ")
    check(f"f {{ x = {lhs} k = {rhs} ROOT c = {out} convolution(x, k), {attrs} }}", "loop")


def test_convolution_is_a_correlation_by_hand() -> None:
    fusion = fusion_of("""f { x = f32[1,1,6] parameter(0) k = f32[1,1,3] parameter(1)
        ROOT c = f32[1,1,4] convolution(x, k), window={size=3}, dim_labels=bf0_oi0->bf0 }""")
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 6)
    k = np.array([1, 10, 100], np.float32).reshape(1, 1, 3)
    (got,) = run_on_host(fusion, [x, k])
    np.testing.assert_array_equal(got.reshape(-1), np.correlate(x.reshape(-1), k.reshape(-1), "valid"))


# XLA's Triton GEMM fusions small enough for a host run (the multiply-adds of the others run
# in the corpus sweep, or are too many for a test).
TRITON_GEMM_FILES = [f"backends_gpu_codegen_triton_tests_dot__{n}.hlo" for n in (
    "duplicate_dot_operand", "single_tile_dot", "dot_broadcast_sequential_dim_mismatch",
    "bf16_small_rhs_outer",
    "use_major_to_minor_schedule_lhs_larger", "use_transposed_schedule_lhs_smaller")]


@pytest.mark.parametrize("name", [n for n in TRITON_GEMM_FILES if (CORPUS / n).exists()])
def test_fused_dots_of_xla_triton_tests(name: str) -> None:
    check((CORPUS / name).read_text(), ptx=False)


def test_scaled_dot_with_block_scales() -> None:
    check("""f { a = f8e4m3fn[4,64] parameter(0) b = f8e4m3fn[64,8] parameter(1)
        s = bf16[4,2] parameter(2) t = bf16[2,8] parameter(3)
        ROOT d = bf16[4,8] scaled-dot(a, b, s, t), lhs_contracting_dims={1},
          rhs_contracting_dims={0} }""", "loop")


@pytest.mark.parametrize("dot", [
    # ragged non-contracting dim: rows of group g use rhs[g]; rows past the groups give 0
    "f32[2,11,7] ragged-dot(f32[2,11,5] a, f32[3,2,5,7] b, s64[2,3] g), lhs_batch_dims={0},"
    " rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1},"
    " rhs_group_dims={0}",
    # ragged contracting dim: one output per group
    "f32[3,11,7] ragged-dot(f32[11,9] a, f32[9,7] b, s32[3] g), lhs_contracting_dims={1},"
    " rhs_contracting_dims={0}, lhs_ragged_dims={1}",
    # ragged batch dim: a plain batched dot
    "f32[4,6,7] ragged-dot(f32[4,6,5] a, f32[4,5,7] b, s32[3] g), lhs_batch_dims={0}, rhs_batch_dims={0},"
    " lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={0}",
])
def test_ragged_dot(dot: str) -> None:
    out, _, rest = dot.partition(" ragged-dot(")
    operands, _, attrs = rest.partition("), ")
    params = " ".join(f"{op.split()[1]} = {op.split()[0]} parameter({i})"
                      for i, op in enumerate(operands.split(", ")))
    fusion = fusion_of(f"f {{ {params} ROOT r = {out} ragged-dot(a, b, g), {attrs} }}")
    args = index_aware_args(fusion)
    args[2] = np.abs(args[2]) % 5  # group sizes: small, some past the end
    check(fusion, "loop", args=args)
