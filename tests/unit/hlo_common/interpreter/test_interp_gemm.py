"""The interpreter's `__cublas$gemm` / `__cublas$lt$matmul` handler against numpy (expected values
computed here with einsum, independently of the interpreter's dot helpers)."""

import json

import ml_dtypes
import numpy as np
import pytest

from hlo_common.errors import InterpreterError
from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module


def _config(alpha=(1, 0), beta=0, epilogue="DEFAULT", batch=False, damax=False) -> str:
    ddn = {"lhs_contracting_dimensions": ["2" if batch else "1"],
           "rhs_contracting_dimensions": ["1" if batch else "0"],
           "lhs_batch_dimensions": ["0"] if batch else [], "rhs_batch_dimensions": ["0"] if batch else []}
    gemm = {"alpha_real": alpha[0], "alpha_imag": alpha[1], "beta": beta, "dot_dimension_numbers": ddn,
            "precision_config": {"operand_precision": ["DEFAULT", "DEFAULT"], "algorithm": "ALG_UNSET"},
            "epilogue": epilogue, "damax_output": damax}
    return json.dumps({"operation_queue_id": "0", "gemm_backend_config": gemm})


def _run(text: str, *args):
    return evaluate(parse_module(text), [np.asarray(a) for a in args])


RNG = np.random.default_rng(7)
A = RNG.uniform(-1, 1, (6, 5)).astype(np.float32)
B = RNG.uniform(-1, 1, (5, 4)).astype(np.float32)
C = RNG.uniform(-1, 1, (6, 4)).astype(np.float32)


def test_alpha_beta_and_the_workspace():
    out, ws = _run(f"""
ENTRY e {{
  a = f32[6,5] parameter(0)
  b = f32[5,4] parameter(1)
  c = f32[6,4] parameter(2)
  ROOT g = (f32[6,4], s8[64]) custom-call(a, b, c), custom_call_target="__cublas$gemm",
    backend_config={_config((0.5, 0), 1)}
}}""", A, B, C)
    np.testing.assert_allclose(out, 0.5 * np.einsum("mk,kn->mn", A, B) + C, rtol=1e-6, atol=1e-6)
    assert ws.dtype == np.int8 and ws.shape == (64,) and not ws.any()


def test_batched_bf16_accumulates_in_f32_and_rounds_once():
    a = RNG.uniform(-1, 1, (3, 6, 5)).astype(ml_dtypes.bfloat16)
    b = RNG.uniform(-1, 1, (3, 5, 4)).astype(ml_dtypes.bfloat16)
    got = _run(f"""
ENTRY e {{
  a = bf16[3,6,5] parameter(0)
  b = bf16[3,5,4] parameter(1)
  ROOT g = bf16[3,6,4] custom-call(a, b), custom_call_target="__cublas$gemm",
    backend_config={_config(batch=True)}
}}""", a, b)
    want = np.einsum("bmk,bkn->bmn", a.astype(np.float32), b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_complex_alpha():
    a = (RNG.uniform(-1, 1, (6, 5)) + 1j * RNG.uniform(-1, 1, (6, 5))).astype(np.complex64)
    b = (RNG.uniform(-1, 1, (5, 4)) + 1j * RNG.uniform(-1, 1, (5, 4))).astype(np.complex64)
    got = _run(f"""
ENTRY e {{
  a = c64[6,5] parameter(0)
  b = c64[5,4] parameter(1)
  ROOT g = c64[6,4] custom-call(a, b), custom_call_target="__cublas$gemm", backend_config={_config((0, 2))}
}}""", a, b)
    np.testing.assert_allclose(got, 2j * (a @ b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("epilogue", ["BIAS", "RELU", "BIAS_RELU", "GELU", "BIAS_GELU"])
def test_cublaslt_epilogues(epilogue):
    bias = RNG.uniform(-1, 1, (4,)).astype(np.float32)
    has_bias = epilogue.startswith("BIAS")
    operands = "a, b, v" if has_bias else "a, b"
    got = _run(f"""
ENTRY e {{
  a = f32[6,5] parameter(0)
  b = f32[5,4] parameter(1)
  v = f32[4] parameter(2)
  ROOT g = f32[6,4] custom-call({operands}), custom_call_target="__cublas$lt$matmul",
    backend_config={_config(epilogue=epilogue)}
}}""", A, B, bias)
    x = A.astype(np.float64) @ B + (bias if has_bias else 0)
    if "RELU" in epilogue:
        x = np.where(x > 0, x, 0)
    if "GELU" in epilogue:
        x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(got, x, rtol=1e-5, atol=1e-6)


def test_aux_and_amax_outputs():
    out, aux, amax, ws = _run(f"""
ENTRY e {{
  a = f32[6,5] parameter(0)
  b = f32[5,4] parameter(1)
  ROOT g = (f32[6,4], f32[6,4], f32[], s8[16]) custom-call(a, b), custom_call_target="__cublas$lt$matmul",
    backend_config={_config(epilogue="GELU_AUX", damax=True)}
}}""", A, B)
    pre = A.astype(np.float64) @ B
    np.testing.assert_allclose(aux, pre, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(amax, np.abs(out).max(), rtol=1e-6)
    assert not ws.any()


def test_a_missing_config_is_an_interpreter_error_naming_the_call():
    with pytest.raises(InterpreterError, match="%g"):
        _run("""
ENTRY e {
  a = f32[6,5] parameter(0)
  b = f32[5,4] parameter(1)
  ROOT g = f32[6,4] custom-call(a, b), custom_call_target="__cublas$gemm"
}""", A, B)
