"""DotStrengthReduction ("dot-strength-reduction"): the decisions and rewrites of XLA's
dot_strength_reduction_test.cc, the numbers against the interpreter, and the matrix-vector module
of testdata/triton through the whole pipeline as XLA:GPU compiles it."""

from pathlib import Path

import numpy as np
import pytest
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

from hlo_common.gpu.device import A100
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_opt.pipelines import build_gpu_pipeline

TRITON = Path(__file__).resolve().parents[4] / "testdata" / "triton"


def _module(params: str, dot: str) -> str:
    return f"HloModule m\nENTRY e {{\n{params}\n  ROOT dot = {dot}\n}}\n"


CASES = {
    # XLA: MultipleContractingDimensions (contracting dims taken in the dimension numbers' order)
    "multiple_contracting": _module(
        "  p0 = f32[4,256]{1,0} parameter(0)\n  p1 = f32[4096,4,256]{2,1,0} parameter(1)",
        "f32[4096]{0} dot(p0, p1), lhs_contracting_dims={1,0}, rhs_contracting_dims={2,1}") + """
// CHECK: f32[256,4]{1,0} transpose(%p0), dimensions={1,0}
// CHECK: f32[4096,256,4]{2,1,0} broadcast({{.*}}), dimensions={1,2}
// CHECK: f32[4096,256,4]{2,1,0} transpose(%p1), dimensions={0,2,1}
// CHECK: f32[4096,256,4]{2,1,0} multiply(
// CHECK: f32[4096]{0} reduce({{.*}}), dimensions={1,2}
""",
    # XLA: UpcastInReduction (bf16 multiply, f32 sum, bf16 result)
    "upcast_in_reduction": _module(
        "  p0 = bf16[6144]{0} parameter(0)\n  p1 = bf16[6144,256]{1,0} parameter(1)",
        "bf16[256]{0} dot(p0, p1), lhs_contracting_dims={0}, rhs_contracting_dims={0}") + """
// CHECK: bf16[256,6144]{1,0} multiply(
// CHECK: f32[256,6144]{1,0} convert(
// CHECK: f32[] constant(0)
// CHECK: f32[256]{0} reduce(
// CHECK: ROOT {{.*}} bf16[256]{0} convert(
""",
    # XLA: UpcastInReductionF8E4M3FN (batch dims kept first)
    "f8_batch": _module(
        "  x = f8e4m3fn[8,16]{1,0} parameter(0)\n  y = f8e4m3fn[8,16,32]{2,1,0} parameter(1)",
        "f8e4m3fn[8,32]{1,0} dot(x, y), lhs_batch_dims={0}, lhs_contracting_dims={1}, "
        "rhs_batch_dims={0}, rhs_contracting_dims={1}") + """
// CHECK: f8e4m3fn[8,32,16]{2,1,0} multiply(
// CHECK: f32[8,32,16]{2,1,0} convert(
// CHECK: f32[8,32]{1,0} reduce(
// CHECK: f8e4m3fn[8,32]{1,0} convert(
""",
    # XLA: VectorVectorDotShouldBeStrengthReduced
    "vector_vector": _module(
        "  p0 = f32[32,500] parameter(0)\n  p1 = f32[32,500] parameter(1)",
        "f32[32] dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
        "rhs_contracting_dims={1}") + """
// CHECK: f32[32,500]{1,0} multiply(%p0, %p1)
// CHECK: f32[32]{0} reduce(
""",
    # XLA: DotWithTypeUnsupportedByGemmFusionShouldBeStrengthReduced (large, but c64)
    "c64_large": _module(
        "  p0 = c64[32,5000,7000] parameter(0)\n  p1 = c64[32,5000] parameter(1)",
        "c64[32,7000] dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
        "rhs_contracting_dims={1}") + """
// CHECK: c64[32,7000,5000]{2,1,0} multiply(
// CHECK: c64[32,7000]{1,0} reduce(
""",
    # XLA: DotStrengthReductionWith_F32_F32_F32_Algorithm
    "f32_algorithm": _module(
        "  a = f32[128,2]{1,0} parameter(0)\n  b = f32[2]{0} parameter(1)",
        "f32[128]{0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
        "algorithm=dot_f32_f32_f32") + """
// CHECK: f32[128,2]{1,0} multiply(
// CHECK: f32[128]{0} reduce(
""",
    # XLA: DotStrengthReductionMixedOperandTypes (operands converted to the result type; the
    # result is s64 here, as our verifier wants a result at least as wide as the operands)
    "mixed_types": _module(
        "  a = s32[128,2]{1,0} parameter(0)\n  b = s64[2]{0} parameter(1)",
        "s64[128]{0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}") + """
// CHECK: s64[128,2]{1,0} convert(%a)
// CHECK: s64[128,2]{1,0} multiply(
// CHECK: s64[128]{0} reduce(
""",
    # XLA: S32MatrixMatrixDotShouldBeStrengthReduced (no vector, but s32 with rhs contracting 1)
    "s32_matrix_matrix": _module(
        "  p0 = s32[32,50] parameter(0)\n  p1 = s32[70,50] parameter(1)",
        "s32[32,70] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}") + """
// CHECK: s32[32,70,50]{2,1,0} multiply(
// CHECK: s32[32,70]{1,0} reduce(
""",
    # A large matrix-vector dot Triton refuses: non-default operand precision with no algorithm.
    "highest_precision": _module(
        "  p0 = f32[4000,3000] parameter(0)\n  p1 = f32[3000] parameter(1)",
        "f32[4000] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
        "operand_precision={highest,highest}") + """
// CHECK: f32[4000,3000]{1,0} multiply(
""",
}

UNCHANGED = {
    # XLA: F32MatrixMatrixDotShouldNotBeStrengthReduced
    "f32_matrix_matrix": _module(
        "  p0 = f32[32,500] parameter(0)\n  p1 = f32[700,500] parameter(1)",
        "f32[32,700] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}"),
    # a large matrix-vector dot Triton takes: (M + N) * K = (4000 + 1) * 3000 >= 10^7
    "large_matvec": _module(
        "  p0 = f32[4000,3000] parameter(0)\n  p1 = f32[3000] parameter(1)",
        "f32[4000] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    # s32 x s32 matrices with rhs contracting dim 0 are not the favourable case
    "s32_rhs_contracting_0": _module(
        "  p0 = s32[32,50] parameter(0)\n  p1 = s32[50,70] parameter(1)",
        "s32[32,70] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
}

NUMERIC = ("multiple_contracting", "vector_vector", "f32_algorithm", "mixed_types", "s32_matrix_matrix")


def check_bf16_matvec(before_text: str, after) -> None:
    """The rewritten bf16 dot rounds each product to bf16 before the f32 sum (as XLA's does): its
    result may differ from the dot's by half a bf16 ulp per product plus the final rounding, i.e.
    by at most (|a| @ |b|) * 2^-8 + |result| * 2^-7, computed here in float64 from the inputs."""
    from hlo_common.interpreter import evaluate
    from pass_testlib import random_arguments

    before = parse_module(before_text, "<before>")
    a, b = random_arguments(before, seed=0)
    want = np.asarray(evaluate(before, [a, b]), np.float64)
    got = np.asarray(evaluate(after, [a, b]), np.float64)
    bound = np.abs(a.astype(np.float64)).T @ np.abs(b.astype(np.float64)) if a.ndim == 1 else \
        np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(got - want) <= bound * 2.0 ** -8 + np.abs(want) * 2.0 ** -7 + 1e-6)
    assert np.abs(got - want).max() > 0  # the products were rounded: not the dot's own path


@pytest.mark.parametrize("name", sorted(CASES))
def test_xla_cases_are_strength_reduced(name):
    module = check_pass("dot-strength-reduction", CASES[name])
    assert not any(i.opcode == "dot" for c in module.computations for i in c.instructions)
    if name in NUMERIC:
        check_same_results(CASES[name], module)
    elif name == "upcast_in_reduction":
        check_bf16_matvec(CASES[name], module)


@pytest.mark.parametrize("name", sorted(UNCHANGED))
def test_dots_for_the_gemm_paths_stay(name):
    check_unchanged("dot-strength-reduction", UNCHANGED[name])


def test_f16_output_on_ampere_and_f8e4m3fn_before_hopper():
    """f8e4m3fn results are Triton's from Hopper on only: the same large dot is reduced on an A100."""
    text = _module("  p0 = f8e4m3fn[4000,3000] parameter(0)\n  p1 = f8e4m3fn[3000] parameter(1)",
                   "f8e4m3fn[4000] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    check_unchanged("dot-strength-reduction", text)
    check_pass("dot-strength-reduction", text, device=A100)


def test_metadata_carried():
    text = _module("  p0 = bf16[6144]{0} parameter(0)\n  p1 = bf16[6144,256]{1,0} parameter(1)",
                   'bf16[256]{0} dot(p0, p1), lhs_contracting_dims={0}, rhs_contracting_dims={0}, '
                   'metadata={op_name="test"}') + """
// CHECK: bf16[256,6144]{1,0} multiply({{.*}}metadata={op_name="test"}
// CHECK: f32[256]{0} reduce({{.*}}metadata={op_name="test"}
"""
    check_pass("dot-strength-reduction", text)


def test_matvec_module_becomes_xlas_input_reduce_fusion():
    """testdata/triton/matvec_bf16: XLA:GPU's kInput fusion (broadcast, bf16 multiply, f32 sum),
    no cuBLAS call; same numbers as the unoptimized module on the interpreter."""
    text = (TRITON / "matvec_bf16.hlo").read_text()
    module = parse_module(text, "matvec_bf16.hlo")
    build_gpu_pipeline().run_with(module, RunOptions())
    root = module.entry.root
    assert root.opcode == "fusion" and root.attrs["kind"] == "kInput"
    body = [(i.opcode, i.shape.element_type.name) for i in root.fused_computation().instructions
            if i.opcode not in ("parameter", "constant")]
    assert body == [("broadcast", "bf16"), ("multiply", "bf16"), ("convert", "f32"), ("reduce", "f32"),
                    ("convert", "bf16")]
    check_bf16_matvec(text, module)
