"""Gemm custom calls cuBLAS cannot run become kernels (`hlo_common.passes.gemm_fallback`), the ones it can
run GemmThunks (`gemm_config`): s8 GEMMs by XLA's int8 rules, cuBLASLt epilogues, amax outputs,
mixed operand types. Results on the host are checked against numpy by hand and against the
interpreter evaluating the original custom call."""

from __future__ import annotations

import ctypes
import json

import ml_dtypes
import numpy as np
import pytest

from hlo_common.interpreter import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.gpu.gemm_config import gemm_config_for_custom_call
from hlo_run.backends.host import HostDevice
from hlo_run.cublas import scale_factors
from hlo_run.manifest_runtime import ManifestExecutable

RNG = np.random.default_rng(5)


def config(epilogue="DEFAULT", alpha=1, beta=0, batch=False, damax=False) -> str:
    ddn = {"lhs_contracting_dimensions": ["2" if batch else "1"],
           "rhs_contracting_dimensions": ["1" if batch else "0"],
           "lhs_batch_dimensions": ["0"] if batch else [], "rhs_batch_dimensions": ["0"] if batch else []}
    return json.dumps({"gemm_backend_config": {"alpha_real": alpha, "alpha_imag": 0, "beta": beta,
                                               "dot_dimension_numbers": ddn, "epilogue": epilogue,
                                               "damax_output": damax}})


def s8_batched(m: int, k: int, n: int) -> str:
    return f"""HloModule s8
ENTRY e {{ a = s8[2,{m},{k}]{{2,1,0}} parameter(0) b = s8[2,{k},{n}]{{1,2,0}} parameter(1)
  g = (s32[2,{m},{n}], s8[64]) custom-call(a, b), custom_call_target="__cublas$gemm",
    backend_config={config(batch=True)}
  ROOT r = s32[2,{m},{n}] get-tuple-element(g), index=0 }}"""


def compile_and_run(text: str, args, target: str = "host"):
    result = compile_module(parse_module(text), CompileOptions(target=target))
    kinds = [t.kind for t in result.manifest.thunks.thunks]
    if target != "host":
        return kinds, None
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    return kinds, ManifestExecutable(manifest, HostDevice()).run(args)


def int8(shape):
    return RNG.integers(-128, 128, shape).astype(np.int8)


@pytest.mark.parametrize("m, k, n, kinds", [(2, 2, 3, ["kKernel"]), (4, 8, 4, ["kGemm"])])
def test_s8_gemm_is_a_cublas_gemm_only_when_aligned_to_4(m, k, n, kinds):
    a, b = int8((2, m, k)), int8((2, k, n))
    got_kinds, got = compile_and_run(s8_batched(m, k, n), [a, b])
    assert got_kinds == kinds
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.einsum("bmk,bkn->bmn", a.astype(np.int64), b.astype(np.int64)))


def test_s8_gemm_config_holds_int8_types_and_cuda_scales_are_int32():
    call = parse_module(s8_batched(4, 8, 4)).entry.instruction("g")
    cfg, roles = gemm_config_for_custom_call(call)
    assert roles == {"lhs": 0, "rhs": 1} and cfg.output_shape.startswith("s32[2,4,4]")
    assert (cfg.lhs_matrix.rows, cfg.lhs_matrix.cols, cfg.rhs_matrix.order) == (4, 8, "column_major")
    alpha, beta = scale_factors(cfg, ctypes.c_int32, False)
    assert isinstance(alpha, ctypes.c_int32) and (alpha.value, beta.value) == (1, 0)
    assert gemm_config_for_custom_call(parse_module(s8_batched(2, 2, 3)).entry.instruction("g")) is None


def test_cublaslt_epilogue_aux_amax_and_workspace_as_kernels():
    text = f"""HloModule lt
ENTRY e {{ a = bf16[6,5] parameter(0) b = bf16[5,4]{{0,1}} parameter(1) c = bf16[6,4] parameter(2)
  v = bf16[4] parameter(3)
  g = (bf16[6,4], bf16[6,4], f32[], s8[16]) custom-call(a, b, c, v), custom_call_target="__cublas$lt$matmul",
    backend_config={config("BIAS_GELU_AUX", 0.5, 2, damax=True)}
  g0 = bf16[6,4] get-tuple-element(g), index=0
  g1 = bf16[6,4] get-tuple-element(g), index=1
  g2 = f32[] get-tuple-element(g), index=2
  g3 = s8[16] get-tuple-element(g), index=3
  ROOT r = (bf16[6,4], bf16[6,4], f32[], s8[16]) tuple(g0, g1, g2, g3) }}"""
    args = [RNG.uniform(-1, 1, s).astype(ml_dtypes.bfloat16) for s in [(6, 5), (5, 4), (6, 4), (4,)]]
    kinds, got = compile_and_run(text, args)
    assert kinds.count("kGemm") == 0 and "kMemzero" in kinds
    want = evaluate(parse_module(text), args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=1e-6, atol=1e-6)
    a, b, c, v = (x.astype(np.float64) for x in args)
    pre = 0.5 * (a @ b) + 2 * c + v[None, :]
    gelu = 0.5 * pre * (1 + np.tanh(np.sqrt(2 / np.pi) * (pre + 0.044715 * pre ** 3)))
    np.testing.assert_allclose(np.asarray(got[0], np.float64), gelu, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(np.asarray(got[1], np.float64), pre, rtol=1e-2, atol=1e-2)
    assert np.isclose(got[2], np.abs(gelu).max(), rtol=1e-4) and not np.asarray(got[3]).any()


def test_mixed_operand_types_become_a_kernel():
    text = f"""HloModule mixed
ENTRY e {{ a = bf16[4,6] parameter(0) b = s4[6,3] parameter(1)
  g = (bf16[4,3], s8[8]) custom-call(a, b), custom_call_target="__cublas$gemm", backend_config={config()}
  ROOT r = bf16[4,3] get-tuple-element(g), index=0 }}"""
    a = RNG.uniform(-1, 1, (4, 6)).astype(ml_dtypes.bfloat16)
    b = RNG.integers(-8, 8, (6, 3)).astype(ml_dtypes.int4)
    kinds, got = compile_and_run(text, [a, b])
    assert kinds == ["kKernel"]
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(got, np.float32), want.astype(np.float32))


def test_cuda_target_lowers_the_same_calls_to_ptx_kernels():
    pytest.importorskip("cuda.bindings.nvjitlink", reason="PTX linking needs nvJitLink")
    assert compile_and_run(s8_batched(2, 2, 3), None, "cuda")[0] == ["kKernel"]
    assert compile_and_run(s8_batched(4, 8, 4), None, "cuda")[0] == ["kGemm"]
