"""GemmRewriter ("cublas-gemm-rewriter") on the cuBLASLt path (XLA's default on the H100 the bench
compares with): dots -> `__cublas$lt$matmul` with a 4 MiB workspace, and XLA's epilogue fusions:
a broadcast vector bias (BIAS), ReLU (RELU / BIAS_RELU), the tanh-approximate GELU (GELU /
BIAS_GELU, *_AUX when the pre-activation values have other users). Each rewrite is checked against
the interpreter, which evaluates the epilogues (gemm_semantics.py)."""

import pytest

from layout_testlib import run_layout_pass

PASS = "cublas-gemm-rewriter"


def _calls(module):
    return [i for i in module.entry.instructions if i.opcode == "custom-call"]


def _config(call):
    return call.backend_config_data["gemm_backend_config"]


def _module(body: str, et: str = "f32", params: str = "") -> str:
    return f"""
HloModule m
ENTRY e {{
  a = {et}[64,32] parameter(0)
  b = {et}[32,16] parameter(1)
  v = {et}[16] parameter(2){params}
  d = {et}[64,16] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
{body}
}}
"""


def test_a_dot_becomes_a_cublaslt_matmul_with_a_fixed_workspace():
    module = run_layout_pass(PASS, _module("  ROOT n = f32[64,16] negate(d)") + """
// CHECK: %[[G:.*]] = (f32[64,16]{1,0}, s8[4194304]{0}) custom-call(%a, %b)
// CHECK-SAME: custom_call_target="__cublas$lt$matmul"
// CHECK: %[[R:.*]] = f32[64,16]{1,0} get-tuple-element(%[[G]]), index=0
// CHECK: negate(%[[R]])
""")
    (call,) = _calls(module)
    assert call.name.startswith("cublas-lt-matmul") and _config(call)["epilogue"] == "DEFAULT"


def test_s8_dots_stay_legacy_cublas_gemms():
    run_layout_pass(PASS, """
HloModule m
ENTRY e {
  a = s8[32,16] parameter(0)
  b = s8[16,8] parameter(1)
  ROOT d = s32[32,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
// CHECK: custom_call_target="__cublas$gemm"
""")


BIAS = "  vb = f32[64,16] broadcast(v), dimensions={1}\n"


def test_a_broadcast_vector_bias_over_the_columns_becomes_the_bias_epilogue():
    module = run_layout_pass(PASS, _module(BIAS + "  ROOT r = f32[64,16] add(vb, d)") + """
// CHECK-NOT: broadcast
// CHECK-NOT: add(
// CHECK: custom-call(%a, %b, %v), custom_call_target="__cublas$lt$matmul"
""")
    (call,) = _calls(module)
    assert (_config(call)["epilogue"], _config(call)["beta"]) == ("BIAS", 0)
    assert "output_to_operand_aliasing" not in call.attrs


def test_a_bias_over_the_rows_is_not_a_vector_bias():
    module = run_layout_pass(PASS, """
HloModule m
ENTRY e {
  a = f32[64,32] parameter(0)
  b = f32[32,16] parameter(1)
  v = f32[64] parameter(2)
  d = f32[64,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  vb = f32[64,16] broadcast(v), dimensions={0}
  ROOT r = f32[64,16] add(d, vb)
}
// CHECK: custom-call(%a, %b), custom_call_target="__cublas$lt$matmul"
// CHECK: ROOT %r = f32[64,16]{1,0} add(
""")
    assert _config(_calls(module)[0])["epilogue"] == "DEFAULT"


def test_bias_then_relu_becomes_bias_relu():
    # testdata/fusion/matmul_bias_relu: XLA:GPU makes this one BIAS_RELU cuBLASLt call.
    module = run_layout_pass(PASS, _module(BIAS + """  x = f32[64,16] add(d, vb)
  zero = f32[] constant(0)
  zb = f32[64,16] broadcast(zero), dimensions={}
  ROOT relu = f32[64,16] maximum(zb, x)""") + """
// CHECK-NOT: maximum
// CHECK: custom-call(%a, %b, %v)
""")
    assert _config(_calls(module)[0])["epilogue"] == "BIAS_RELU"


def test_relu_alone_and_a_maximum_with_another_constant():
    module = run_layout_pass(PASS, _module("""  zero = f32[] constant(0)
  zb = f32[64,16] broadcast(zero), dimensions={}
  ROOT relu = f32[64,16] maximum(d, zb)"""))
    assert _config(_calls(module)[0])["epilogue"] == "RELU"
    module = run_layout_pass(PASS, _module("""  one = f32[] constant(1)
  ob = f32[64,16] broadcast(one), dimensions={}
  ROOT m = f32[64,16] maximum(d, ob)""") + """
// CHECK: ROOT %m = f32[64,16]{1,0} maximum(
""")
    assert _config(_calls(module)[0])["epilogue"] == "DEFAULT"


def _gelu(x: str, et: str = "f32", coefficient: str = "0.044715", extra: str = "") -> str:
    """jax.nn.gelu(approximate=True) as JAX writes it (testdata/fusion/mlp_f32.hlo)."""
    s = f"{et}[64,16]"
    return f"""  sq = {s} multiply({x}, {x})
  cube = {s} multiply(sq, {x})
  k1 = {et}[] constant({coefficient})
  k1b = {s} broadcast(k1), dimensions={{}}
  t1 = {s} multiply(cube, k1b)
  t2 = {s} add({x}, t1)
  k2 = {et}[] constant(0.797884583)
  k2b = {s} broadcast(k2), dimensions={{}}
  t3 = {s} multiply(t2, k2b)
  th = {s} tanh(t3)
  one = {et}[] constant(1)
  oneb = {s} broadcast(one), dimensions={{}}
  t4 = {s} add(th, oneb)
  half = {et}[] constant(0.5)
  halfb = {s} broadcast(half), dimensions={{}}
  cdf = {s} multiply(t4, halfb)
  {"" if extra else "ROOT "}gelu = {s} multiply({x}, cdf){extra}"""


@pytest.mark.parametrize("et", ["f32", "bf16"])
def test_bias_then_approximate_gelu_becomes_bias_gelu(et):
    # testdata/fusion/mlp_f32 and mlp_bf16: XLA:GPU makes the first layer one BIAS_GELU call.
    module = run_layout_pass(PASS, _module(f"  vb = {et}[64,16] broadcast(v), dimensions={{1}}\n"
                                           f"  x = {et}[64,16] add(d, vb)\n" + _gelu("x", et), et) + """
// CHECK-NOT: tanh
// CHECK: custom-call(%a, %b, %v)
""")
    (call,) = _calls(module)
    assert _config(call)["epilogue"] == "BIAS_GELU"


def test_gelu_with_the_pre_activation_used_elsewhere_keeps_it_as_an_aux_output():
    extra = "\n  ROOT t = (f32[64,16], f32[64,16]) tuple(gelu, d)"
    module = run_layout_pass(PASS, _module(_gelu("d", extra=extra)) + """
// CHECK: %[[G:.*]] = (f32[64,16]{1,0}, f32[64,16]{1,0}, s8[4194304]{0}) custom-call(%a, %b)
// CHECK-DAG: get-tuple-element(%[[G]]), index=0
// CHECK-DAG: get-tuple-element(%[[G]]), index=1
""")
    assert _config(_calls(module)[0])["epilogue"] == "GELU_AUX"


def test_a_gelu_with_another_coefficient_is_left_alone():
    module = run_layout_pass(PASS, _module(_gelu("d", coefficient="0.05")) + """
// CHECK: tanh
""")
    assert _config(_calls(module)[0])["epilogue"] == "DEFAULT"


def test_a_matrix_bias_and_a_vector_bias_both_fold_and_a_parameter_bias_is_not_overwritten():
    # transformer_fwd: XLA:GPU's cublas-lt-matmul(a, w, c, bias) with beta 1 and epilogue BIAS.
    module = run_layout_pass(PASS, _module(BIAS + """  x = f32[64,16] add(d, vb)
  ROOT r = f32[64,16] add(x, c)""", params="\n  c = f32[64,16] parameter(3)") + """
// CHECK: custom-call(%a, %b, %c, %v), custom_call_target="__cublas$lt$matmul"
""")
    (call,) = _calls(module)
    assert (_config(call)["epilogue"], _config(call)["beta"]) == ("BIAS", 1)
    assert "output_to_operand_aliasing" not in call.attrs  # c is a parameter: written elsewhere



def test_a_second_run_changes_nothing_even_with_an_aux_output():
    from hlo_common.hlo.printer import print_module
    from pass_testlib import check_unchanged

    extra = "\n  ROOT t = (f32[64,16], f32[64,16]) tuple(gelu, x)"
    module = run_layout_pass(PASS, _module(BIAS + "  x = f32[64,16] add(d, vb)\n" + _gelu("x", extra=extra)))
    assert _config(_calls(module)[0])["epilogue"] == "BIAS_GELU_AUX"
    check_unchanged(PASS, print_module(module))
