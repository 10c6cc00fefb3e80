"""The one definition of a cuBLAS GEMM (`hlo_common.interpreter.gemm_semantics`) against numpy by
hand (einsum in float64 / int64, formulas written out here), and its two users - the interpreter's
`__cublas$gemm` handler and hlo-run's host GemmThunk (`hlo_run.host_gemm`) - giving the same bits."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.errors import HloError, InterpreterError
from hlo_common.interpreter import evaluate
from hlo_common.interpreter.gemm_semantics import (
    EPILOGUES, GemmSemantics, evaluate_gemm, parse_gemm_semantics,
)
from hlo_common.hlo.parser import parse_module
from hlo_common.gpu.gemm_config import build_gemm_config
from hlo_run.host_gemm import run_gemm

RNG = np.random.default_rng(11)
F32, BF16, S32 = (PRIMITIVE_TYPES[t] for t in ("f32", "bf16", "s32"))
PLAIN = GemmSemantics(lhs_contracting_dims=(1,), rhs_contracting_dims=(0,))


def u(shape, dtype=np.float32):
    return RNG.uniform(-1, 1, shape).astype(dtype)


def gelu_by_hand(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def sem(**kw) -> GemmSemantics:
    return GemmSemantics(**{**PLAIN.__dict__, **kw})


@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_every_epilogue_with_alpha_beta_and_bias(name):
    a, b, c, v = u((5, 7)), u((7, 3)), u((5, 3)), u((3,))
    s = sem(alpha_real=1.5, beta=-0.5, epilogue=name)
    got = evaluate_gemm(s, F32, a, b, c, v if EPILOGUES[name].adds_bias else None)
    x = 1.5 * np.einsum("mk,kn->mn", a.astype(np.float64), b) - 0.5 * c
    if "BIAS" in name:
        x = x + v[None, :]
    np.testing.assert_allclose(got.pre_activation, x, rtol=1e-5, atol=1e-6)
    want = np.maximum(x, 0) if "RELU" in name else gelu_by_hand(x) if "GELU" in name else x
    np.testing.assert_allclose(got.result, want, rtol=1e-5, atol=1e-6)
    assert got.result.dtype == np.float32
    assert s.operand_roles() == {"lhs": 0, "rhs": 1, "c": 2, **({"bias": 3} if "BIAS" in name else {})}


def test_batch_dims_bias_over_several_column_dims_and_amax():
    a, b = u((2, 4, 3)), u((3, 3, 2, 2))  # contract lhs 2 with rhs 1, batch lhs 0 with rhs 2
    s = GemmSemantics((0,), (2,), (2,), (1,), epilogue="BIAS", damax_output=True)
    bias = u((6,))  # the rhs free dims (3, 2) of the result [2, 4, 3, 2], flattened
    got = evaluate_gemm(s, F32, a, b, None, bias)
    x = np.einsum("bmk,pkbq->bmpq", a.astype(np.float64), b) + bias.reshape(3, 2)[None, None]
    np.testing.assert_allclose(got.result, x, rtol=1e-5, atol=1e-6)
    assert got.amax.dtype == np.float32 and np.isclose(got.amax, np.abs(x).max(), rtol=1e-6)


def test_bf16_accumulates_in_f32_and_rounds_once():
    a, b = u((4, 64), ml_dtypes.bfloat16), u((64, 4), ml_dtypes.bfloat16)
    got = evaluate_gemm(sem(alpha_real=0.25), BF16, a, b).result
    want = (0.25 * (a.astype(np.float32) @ b.astype(np.float32))).astype(ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_s8_into_s32_is_exact_and_wraps():
    a = RNG.integers(-128, 128, (3, 8)).astype(np.int8)
    b = RNG.integers(-128, 128, (8, 4)).astype(np.int8)
    got = evaluate_gemm(PLAIN, S32, a, b).result
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    big = np.full((1, 2), 2 ** 30, np.int32)
    wrapped = evaluate_gemm(PLAIN, S32, big, np.full((2, 1), 2, np.int32)).result
    assert wrapped[0, 0] == 0  # 2 * 2**30 * 2 = 2**32 wraps to 0, as an s32 dot does


def test_complex_alpha_and_an_algorithm_that_rounds_operands():
    a = (u((3, 4)) + 1j * u((3, 4))).astype(np.complex64)
    b = (u((4, 2)) + 1j * u((4, 2))).astype(np.complex64)
    got = evaluate_gemm(sem(alpha_real=0.5, alpha_imag=-2), PRIMITIVE_TYPES["c64"], a, b).result
    np.testing.assert_allclose(got, (0.5 - 2j) * (a.astype(np.complex128) @ b), rtol=1e-5, atol=1e-5)
    x, y = u((3, 40)), u((40, 2))
    rounded = evaluate_gemm(sem(algorithm="ALG_DOT_BF16_BF16_F32"), F32, x, y).result
    as_bf16 = [v.astype(ml_dtypes.bfloat16).astype(np.float64) for v in (x, y)]
    np.testing.assert_allclose(rounded, as_bf16[0] @ as_bf16[1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(rounded, x.astype(np.float64) @ y, rtol=1e-7, atol=0)


def _custom_call(config: dict, operands: str = "a, b", shape: str = "f32[5,3]") -> str:
    text = json.dumps({"operation_queue_id": "0", "gemm_backend_config": config})
    return f"""HloModule g
ENTRY e {{ a = f32[5,7] parameter(0) b = f32[7,3] parameter(1) c = f32[5,3] parameter(2)
  v = f32[3] parameter(3)
  ROOT g = {shape} custom-call({operands}), custom_call_target="__cublas$lt$matmul",
    backend_config={text} }}"""


DDN = {"lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["0"],
       "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}


def test_every_documented_field_is_read():
    config = {"alpha_real": 2, "alpha_imag": 0, "beta": 1, "dot_dimension_numbers": DDN,
              "precision_config": {"operand_precision": ["HIGHEST", "DEFAULT"],
                                   "algorithm": "ALG_DOT_F16_F16_F32"},
              "epilogue": "BIAS_GELU_AUX", "lhs_stride": "35", "rhs_stride": "21", "grad_x": True,
              "grad_y": False,
              "damax_output": True, "is_fp8": False}
    module = parse_module(_custom_call(config, "a, b, c, v"))
    s = parse_gemm_semantics(module.entry.root)
    assert s == GemmSemantics((), (), (1,), (0,), 2.0, 0.0, 1.0, "BIAS_GELU_AUX", "ALG_DOT_F16_F16_F32", True)


@pytest.mark.parametrize("config, operands, message", [
    ({"alpha_real": 1}, "a, b", "no gemm_backend_config with dot_dimension_numbers"),
    ({"dot_dimension_numbers": DDN, "epilogue": "SILU"}, "a, b", "epilogue SILU is not supported"),
    ({"dot_dimension_numbers": DDN, "beta": 1}, "a, b",
     "beta=1 and epilogue DEFAULT takes 3 operands, it has 2"),
    ({"dot_dimension_numbers": {"lhs_contracting_dimensions": ["x"]}}, "a, b", "malformed numbers"),
])
def test_bad_configs_name_the_call(config, operands, message):
    call = parse_module(_custom_call(config, operands)).entry.root
    with pytest.raises(HloError, match=f"%g: .*{message}"):
        parse_gemm_semantics(call)
    with pytest.raises(InterpreterError, match=message):
        parse_gemm_semantics(call, InterpreterError)


@pytest.mark.parametrize("epilogue", ["DEFAULT", "BIAS", "RELU", "BIAS_GELU"])
def test_interpreter_and_host_gemm_thunk_agree(epilogue):
    """The same semantics; the f32 product is the host's own GEMM (host_blas), so the results may
    differ by the summation order only."""
    has_bias = epilogue.startswith("BIAS")
    config = {"alpha_real": -0.75, "alpha_imag": 0, "beta": 1, "dot_dimension_numbers": DDN,
              "epilogue": epilogue}
    text = _custom_call(config, "a, b, c" + (", v" if has_bias else ""))
    module = parse_module(text)
    args = [u((5, 7)), u((7, 3)), u((5, 3)), u((3,))]
    interpreted = evaluate(module, args)
    call = module.entry.root
    out = call.shape
    cfg = build_gemm_config(call.operands[0].shape, call.operands[1].shape, out, ((), (), (1,), (0,)),
                            (-0.75, 0.0), 1.0, epilogue)
    host = run_gemm(cfg, out, args[0], args[1], args[2], args[3] if has_bias else None)
    np.testing.assert_allclose(host, interpreted, rtol=1e-6, atol=1e-6)
