"""cuBLASLt epilogues in one call on the cuda target (issue 18 item 6): hlo-codegen keeps a
`__cublas$lt$matmul` with a BIAS / RELU / GELU epilogue as one GemmThunk (no epilogue kernel), and
`hlo_run.cublas_lt.lt_matmul` translates it to cublasLtMatmul's arguments. No GPU here: the
translation is executed by a numpy model of cublasLtMatmul (column-major matrices with leading
dims, batch strides, op(A) op(B), the bias per row of D, the activation) on the operands' bytes
as they lie in memory, and compared with the interpreter evaluating the original call."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter import evaluate
from hlo_common.manifest.thunks import GemmThunk
from hlo_run.cublas import CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_32F, OP_N, OP_T
from hlo_run.cublas_lt import LT_EPILOGUES, LtLayout, lt_matmul

from test_gemm_epilogues import arguments, config, lt_module 

FUSED = ["BIAS", "RELU", "BIAS_RELU", "GELU", "BIAS_GELU"]
# cublasLtEpilogue_t's names as nvmath.bindings.cublasLt.Epilogue spells them (nvmath-python 1.0)
NVMATH_EPILOGUES = {"DEFAULT", "RELU", "BIAS", "RELU_BIAS", "GELU", "GELU_BIAS"}


def thunks(text: str, target: str = "cuda"):
    return compile_module(parse_module(text), CompileOptions(target=target)).manifest.thunks.thunks


@pytest.mark.parametrize("t", ["f32", "bf16"])
@pytest.mark.parametrize("epilogue", FUSED)
def test_cuda_keeps_the_call_whole(epilogue, t):
    (gemm,) = thunks(lt_module(t, epilogue))
    assert isinstance(gemm, GemmThunk) and gemm.config.epilogue == epilogue
    assert (gemm.bias is not None) == epilogue.startswith("BIAS") and gemm.workspace is not None
    assert gemm.config.output_shape.startswith(f"{t}[24,20]")
    # the host target still runs it as a GEMM and an epilogue kernel
    assert [th.kind for th in thunks(lt_module(t, epilogue), "host")] == ["kGemm", "kKernel"]


@pytest.mark.parametrize("text", [
    lt_module("f32", "BIAS_GELU_AUX", "out_aux"),  # an aux output: no single call here
    lt_module("bf16", "BIAS", ).replace("v = bf16[20]", "v = f32[20]").replace("bf16[20] parameter", "f32[20] parameter"),
])
def test_what_one_call_cannot_take_is_still_split(text):
    assert [th.kind for th in thunks(text)] == ["kGemm", "kKernel"]


def test_epilogue_names_are_cublaslts():
    assert set(LT_EPILOGUES.values()) <= NVMATH_EPILOGUES


def test_translation_of_a_row_major_output():
    """a bf16[24,40]{1,0} . b bf16[40,20]{0,1} -> bf16[24,20]{1,0}: D^T = B^T A^T, bias along N."""
    (gemm,) = thunks(lt_module("bf16", "BIAS_RELU"))
    call = lt_matmul(gemm.config, 20)
    assert (call.a_role, call.b_role, call.trans_a, call.trans_b) == ("rhs", "lhs", OP_T, OP_N)
    assert call.a == LtLayout(CUDA_R_16BF, 40, 20, 40, 1, 0)
    assert call.b == LtLayout(CUDA_R_16BF, 40, 24, 40, 1, 0)
    assert call.d == LtLayout(CUDA_R_16BF, 20, 24, 20, 1, 0)
    assert (call.compute_type, call.scale_type, call.epilogue) == (CUBLAS_COMPUTE_32F, CUDA_R_32F, "RELU_BIAS")
    assert (call.bias_type, call.bias_length) == (CUDA_R_16BF, 20)
    with pytest.raises(Exception, match="one per row of D"):
        lt_matmul(gemm.config, 24)


def _matrix(flat: np.ndarray, lay: LtLayout, batch: int) -> np.ndarray:
    """Matrix `batch` of a column-major layout, as cuBLASLt reads it."""
    base = batch * lay.stride
    i, j = np.meshgrid(np.arange(lay.rows), np.arange(lay.cols), indexing="ij")
    return flat[base + i + j * lay.ld].astype(np.float64)


def _model_lt(call, memory: dict[str, np.ndarray], alpha: float, beta: float) -> np.ndarray:
    """cublasLtMatmul in numpy: D = epilogue(alpha op(A) op(B) + beta C + bias[row])."""
    out = memory["output"].astype(np.float64).copy()
    for n in range(call.d.batch):
        a = _matrix(memory[call.a_role], call.a, n)
        b = _matrix(memory[call.b_role], call.b, n)
        a = a.T if call.trans_a == OP_T else a
        b = b.T if call.trans_b == OP_T else b
        d = alpha * (a @ b) + beta * _matrix(out, call.d, n)
        if call.bias_type is not None:
            d = d + memory["bias"].astype(np.float64)[:, None]
        if "RELU" in call.epilogue:
            d = np.maximum(d, 0)
        elif "GELU" in call.epilogue:
            d = 0.5 * d * (1 + np.tanh(np.sqrt(2 / np.pi) * (d + 0.044715 * d ** 3)))
        i, j = np.meshgrid(np.arange(call.d.rows), np.arange(call.d.cols), indexing="ij")
        out[n * call.d.stride + i + j * call.d.ld] = d
    return out


def _in_memory(value: np.ndarray, shape) -> np.ndarray:
    """The array's elements in the order its layout stores them (major to minor)."""
    return np.ascontiguousarray(np.transpose(value, tuple(reversed(shape.minor_to_major)))).ravel()


CASES = {
    "row_major_bias_gelu": lt_module("f32", "BIAS_GELU", alpha=0.5),
    "row_major_beta_relu": lt_module("f32", "RELU", beta=1),
    "column_major_out_bias": f"""HloModule cm
ENTRY e {{ a = f32[24,40]{{0,1}} parameter(0) b = f32[40,20] parameter(1) v = f32[24] parameter(2)
  g = (f32[24,20]{{0,1}}, s8[256]) custom-call(a, b, v), custom_call_target="__cublas$lt$matmul",
    backend_config={config("BIAS_RELU")}
  ROOT r = f32[24,20]{{0,1}} get-tuple-element(g), index=0 }}""",
    "batched_bias": f"""HloModule bb
ENTRY e {{ a = f32[3,8,16] parameter(0) b = f32[3,16,12] parameter(1) v = f32[12] parameter(2)
  g = (f32[3,8,12], s8[256]) custom-call(a, b, v), custom_call_target="__cublas$lt$matmul",
    backend_config={config("BIAS_GELU", batch=True)}
  ROOT r = f32[3,8,12] get-tuple-element(g), index=0 }}""",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_translation_computes_the_reference(case):
    text = CASES[case]
    module = parse_module(text)
    (gemm,) = thunks(text)
    assert gemm.config.epilogue != "DEFAULT"
    args = arguments(text)
    params = module.entry.parameters
    roles = {"lhs": 0, "rhs": 1}
    if gemm.c is not None:
        roles["c"] = 2
    if gemm.bias is not None:
        roles["bias"] = len(roles)
    memory = {role: _in_memory(np.asarray(args[i]), params[i].shape) for role, i in roles.items()}
    out_shape = module.entry.root.shape
    memory["output"] = memory["c"].copy() if "c" in memory else np.zeros(out_shape.num_elements)
    bias = memory["bias"].size if "bias" in memory else None
    call = lt_matmul(gemm.config, bias)
    got_flat = _model_lt(call, memory, gemm.config.alpha_real, gemm.config.beta)
    want = np.asarray(evaluate(module, args), np.float64)
    np.testing.assert_allclose(got_flat, _in_memory(want, out_shape), rtol=1e-5, atol=1e-5)
