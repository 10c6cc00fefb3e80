"""GemmRewriter ("cublas-gemm-rewriter") with cuBLASLt off (XLA's --xla_gpu_enable_cublaslt=false):
dots -> `__cublas$gemm` custom calls returning (result, s8 workspace), a scalar multiply folded into
alpha, a matrix bias into beta, nothing else fused. The cuBLASLt path: test_cublaslt_epilogues.py."""

import numpy as np

from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module
from layout_testlib import run_layout_pass
from pass_testlib import check_unchanged, random_arguments

from hlo_opt.passes.cublas_gemm_rewriter import GemmRewriter

LEGACY = GemmRewriter(enable_cublaslt=False)

DOT = """
HloModule m
ENTRY e {
  a = f32[64,32] parameter(0)
  b = f32[32,16] parameter(1)
  ROOT d = f32[64,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def _gemm(module):
    (call,) = [i for i in module.entry.instructions if i.opcode == "custom-call"]
    return call


def test_a_dot_becomes_a_gemm_with_a_workspace():
    module = run_layout_pass(LEGACY, DOT + """
// CHECK:      %[[G:.*]] = (f32[64,16]{1,0}, s8[10240]{0}) custom-call(%a, %b)
// CHECK-SAME:   custom_call_target="__cublas$gemm"
// CHECK-SAME:   backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],
// CHECK-SAME:   "gemm_backend_config":{"alpha_real":1,"alpha_imag":0,"beta":0,
// CHECK:      ROOT %{{.*}} = f32[64,16]{1,0} get-tuple-element(%[[G]]), index=0
""")
    call = _gemm(module)
    assert call.name.startswith("cublas-gemm")
    config = call.backend_config_data["gemm_backend_config"]
    # Workspace: min(32 MiB, operand bytes) = 64*32*4 + 32*16*4 = 10240. Strides: the matrix sizes.
    assert config == {
        "alpha_real": 1, "alpha_imag": 0, "beta": 0,
        "dot_dimension_numbers": {"lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["0"],
                                  "lhs_batch_dimensions": [], "rhs_batch_dimensions": []},
        "precision_config": {"operand_precision": ["DEFAULT", "DEFAULT"], "algorithm": "ALG_UNSET"},
        "epilogue": "DEFAULT", "lhs_stride": "2048", "rhs_stride": "512", "grad_x": False, "grad_y": False,
        "damax_output": False, "is_fp8": False}


def test_batched_dots_name_their_batch_dims_and_strides():
    module = run_layout_pass(LEGACY, """
HloModule m
ENTRY e {
  a = bf16[4,16,32] parameter(0)
  b = bf16[4,32,8] parameter(1)
  ROOT d = bf16[4,16,8] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={1}, operand_precision={high,default}
}
// CHECK: %cublas-batch-gemm{{.*}} = (bf16[4,16,8]{2,1,0}, s8[6144]{0}) custom-call(%a, %b)
""")
    config = _gemm(module).backend_config_data["gemm_backend_config"]
    assert config["dot_dimension_numbers"]["lhs_batch_dimensions"] == ["0"]
    assert (config["lhs_stride"], config["rhs_stride"]) == ("512", "256")
    assert config["precision_config"]["operand_precision"] == ["HIGH", "DEFAULT"]


SCALED_BIAS = """
HloModule m
ENTRY e {
  a = f32[64,32] parameter(0)
  b = f32[32,16] parameter(1)
  p = f32[64,16] parameter(2)
  c = f32[64,16] exponential(p)
  d = f32[64,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  k = f32[] constant(0.5)
  kb = f32[64,16] broadcast(k), dimensions={}
  m = f32[64,16] multiply(d, kb)
  ROOT r = f32[64,16] add(m, c)
}
"""


def test_alpha_and_a_matrix_bias_fold_into_the_call():
    module = run_layout_pass(LEGACY, SCALED_BIAS + """
// CHECK-NOT:  multiply
// CHECK-NOT:  add(
// CHECK:      custom-call(%a, %b, %c), custom_call_target="__cublas$gemm"
// CHECK-SAME:   output_to_operand_aliasing={{[{][{]}}0}: (2, {})}
""")
    config = _gemm(module).backend_config_data["gemm_backend_config"]
    assert (config["alpha_real"], config["alpha_imag"], config["beta"]) == (0.5, 0, 1)
    # workspace: operand bytes 8192 + 2048 + 4096 = 14336
    assert _gemm(module).shape.tuple_shapes[1].dims == (14336,)


def test_a_parameter_bias_is_not_overwritten_unless_donated():
    text = SCALED_BIAS.replace("ROOT r = f32[64,16] add(m, c)", "ROOT r = f32[64,16] add(m, p)")
    module = run_layout_pass(LEGACY, text + """
// CHECK: %[[G:.*]] = (f32[64,16]{1,0}, s8[10240]{0}) custom-call(%a, %b)
// CHECK: add(%{{.*}}, %p)
""")
    assert _gemm(module).backend_config_data["gemm_backend_config"]["alpha_real"] == 0.5
    donated = text.replace("HloModule m", "HloModule m, input_output_alias={ {}: (2, {}, may-alias) }")
    donated = donated.replace("  c = f32[64,16] exponential(p)\n", "")
    run_layout_pass(LEGACY, donated + """
// CHECK: custom-call(%a, %b, %p)
""")


def test_a_converted_result_plus_a_wider_bias_folds_with_the_bias_type():
    text = """
HloModule m
ENTRY e {
  a = bf16[64,32] parameter(0)
  b = bf16[32,16] parameter(1)
  p = f32[64,16] parameter(2)
  c = f32[64,16] negate(p)
  d = bf16[64,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  v = f32[64,16] convert(d)
  ROOT r = f32[64,16] add(v, c)
}
// CHECK-NOT: convert
// CHECK:     (f32[64,16]{1,0}, s8[{{[0-9]+}}]{0}) custom-call(%a, %b, %c)
"""
    module = run_layout_pass(LEGACY, text, numerics=False)
    assert _gemm(module).backend_config_data["gemm_backend_config"]["beta"] == 1
    # The fused call keeps the product in f32 instead of rounding it to bf16 first, so it may differ
    # from the original by bf16 rounding of the product: compare with the bf16 tolerance.
    before = parse_module(text, "<before>")
    args = random_arguments(before)
    np.testing.assert_allclose(evaluate(module, args), evaluate(before, args), rtol=2e-2, atol=2e-2)


def test_a_bias_added_after_a_bitcast_is_fused_through_it():
    run_layout_pass(LEGACY, """
HloModule m
ENTRY e {
  a = f32[64,32] parameter(0)
  b = f32[32,16] parameter(1)
  p = f32[4,16,16] parameter(2)
  c = f32[4,16,16] exponential(p)
  d = f32[64,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  x = f32[4,16,16] bitcast(d)
  ROOT r = f32[4,16,16] add(x, c)
}
// CHECK: %[[C:.*]] = f32[64,16]{1,0} bitcast(%c)
// CHECK: custom-call(%a, %b, %[[C]])
""")


RELU_AND_VECTOR_BIAS = """
HloModule m
ENTRY e {
  a = f32[64,32] parameter(0)
  b = f32[32,16] parameter(1)
  d = f32[64,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  zb = f32[64,16] broadcast(zero), dimensions={}
  relu = f32[64,16] maximum(d, zb)
  v = f32[16] parameter(2)
  vb = f32[64,16] broadcast(v), dimensions={1}
  ROOT r = f32[64,16] add(relu, vb)
}
"""


def test_cublaslt_epilogues_are_not_fused_on_the_legacy_path():
    run_layout_pass(LEGACY, RELU_AND_VECTOR_BIAS + """
// CHECK: "epilogue":"DEFAULT"
// CHECK: %relu = f32[64,16]{1,0} maximum(
// CHECK: ROOT %r = f32[64,16]{1,0} add(%relu, %vb)
""")


def test_s8_dots_are_rewritten_even_when_tiny():
    run_layout_pass(LEGACY, """
HloModule m
ENTRY e {
  a = s8[2,3] parameter(0)
  b = s8[3,4] parameter(1)
  ROOT d = s32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
// CHECK: (s32[2,4]{1,0}, s8[{{[0-9]+}}]{0}) custom-call(%a, %b), custom_call_target="__cublas$gemm"
""")


def test_tiny_dots_transposed_operands_and_non_canonical_dots_are_left_alone():
    check_unchanged(LEGACY, """
HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  tiny = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  x = f32[32,64] parameter(2)
  t = f32[64,32] transpose(x), dimensions={1,0}
  y = f32[32,16] parameter(3)
  transposed = f32[64,16] dot(t, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  u = f32[8,8,32] parameter(4)
  v = f32[8,8,16] parameter(5)
  two = f32[32,16] dot(u, v), lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}
  ROOT r = (f32[2,4], f32[64,16], f32[32,16]) tuple(tiny, transposed, two)
}
""")
