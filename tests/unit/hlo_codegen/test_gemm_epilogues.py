"""cuBLASLt calls with fused epilogues (`cublas-gemm-rewriter`'s BIAS, RELU, GELU, *_AUX) in
hlo-codegen: `gemm-fallback` makes each a cuBLAS GEMM thunk followed by one epilogue kernel
(`hlo_common.passes.gemm_fallback.EpilogueLowering`), never a GEMM kernel. Checked here: the thunk
sequence, the GemmThunk's config as hlo-run's cuBLAS call reads it, and the numbers on the host
against the interpreter evaluating the original call (the reference) and a float64 numpy GEMM."""

from __future__ import annotations

import ctypes
import json

import ml_dtypes
import numpy as np
import pytest

from hlo_common.interpreter import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.manifest.thunks import GemmThunk, KernelThunk
from hlo_common.hlo.parser import parse_module
from hlo_common.passes.gemm_fallback import GemmFallback
from hlo_common.hlo.printer import print_module
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_run.backends.host import HostDevice
from hlo_run.cublas import _COMPUTE, DATA_TYPES, gemm_call, scale_factors
from hlo_run.manifest_runtime import ManifestExecutable

EPILOGUES = ["BIAS", "RELU", "BIAS_RELU", "GELU", "BIAS_GELU", "GELU_AUX", "BIAS_GELU_AUX"]
NP_TYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}
TOL = {"f32": 1e-5, "bf16": 2e-2}  # testing.md: 16-bit floats 2e-2 (the kernel keeps f32 inside)


def config(epilogue: str, alpha: float = 1, beta: float = 0, batch: bool = False) -> str:
    ddn = {"lhs_contracting_dimensions": ["2" if batch else "1"],
           "rhs_contracting_dimensions": ["1" if batch else "0"],
           "lhs_batch_dimensions": ["0"] if batch else [], "rhs_batch_dimensions": ["0"] if batch else []}
    return json.dumps({"operation_queue_id": "0", "gemm_backend_config": {
        "alpha_real": alpha, "alpha_imag": 0, "beta": beta, "dot_dimension_numbers": ddn,
        "epilogue": epilogue, "damax_output": False}})


def lt_module(t: str, epilogue: str, root: str = "out", m: int = 24, k: int = 40, n: int = 20,
              alpha: float = 1, beta: float = 0, c_layout: str = "{1,0}") -> str:
    """An entry holding one cuBLASLt call; `root` "out" reads element 0, "out_aux" the result and
    the aux output, "all" copies the whole tuple (workspace included)."""
    aux = epilogue.endswith("_AUX")
    params = [f"a = {t}[{m},{k}] parameter(0)", f"b = {t}[{k},{n}]{{0,1}} parameter(1)"]
    if beta:
        params.append(f"c = {t}[{m},{n}]{c_layout} parameter({len(params)})")
    if epilogue.startswith("BIAS"):
        params.append(f"v = {t}[{n}] parameter({len(params)})")
    names = ", ".join(p.split(" ")[0] for p in params)
    leaves = [f"{t}[{m},{n}]"] + ([f"{t}[{m},{n}]"] if aux else []) + ["s8[256]"]
    shape = "(" + ", ".join(leaves) + ")"
    if root == "out":
        tail = f"ROOT r = {t}[{m},{n}] get-tuple-element(g), index=0"
    elif root == "out_aux":
        tail = (f"o = {t}[{m},{n}] get-tuple-element(g), index=0\n"
                f"  x = {t}[{m},{n}] get-tuple-element(g), index=1\n"
                f"  ROOT r = ({t}[{m},{n}], {t}[{m},{n}]) tuple(o, x)")
    else:
        tail = f"ROOT r = {shape} copy(g)"
    return f"""HloModule lt_{epilogue.lower()}
ENTRY e {{ {' '.join(params)}
  g = {shape} custom-call({names}), custom_call_target="__cublas$lt$matmul",
    backend_config={config(epilogue, alpha, beta)}
  {tail} }}"""


def arguments(text: str, seed: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for p in parse_module(text).entry.parameters:
        t = NP_TYPES[p.shape.element_type.name]
        out.append(rng.uniform(-1, 1, p.shape.dims).astype(t))
    return out


def compile_host(text: str):
    result = compile_module(parse_module(text), CompileOptions(target="host"))
    return result, load_manifest(result.manifest.to_bytes(), "m.json")


def run(manifest, args):
    got = ManifestExecutable(manifest, HostDevice()).run(args)
    return list(got) if isinstance(got, (tuple, list)) else [got]


def as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def float64_reference(epilogue: str, args, alpha: float = 1, beta: float = 0):
    """(out, pre-activation) in float64 from the arguments, by numpy alone."""
    a, b, *rest = (np.asarray(x, np.float64) for x in args)
    pre = alpha * (a @ b)
    if beta:
        pre = pre + beta * rest.pop(0)
    if epilogue.startswith("BIAS"):
        pre = pre + rest.pop(0)[None, :]
    if "RELU" in epilogue:
        return np.maximum(pre, 0), pre
    if "GELU" in epilogue:
        return 0.5 * pre * (1 + np.tanh(np.sqrt(2 / np.pi) * (pre + 0.044715 * pre ** 3))), pre
    return pre, pre


def close(got, want, t: str) -> None:
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=TOL[t], atol=TOL[t])


@pytest.mark.parametrize("t", ["f32", "bf16"])
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_epilogue_is_a_cublas_gemm_then_one_kernel(epilogue, t):
    root = "out_aux" if epilogue.endswith("_AUX") else "out"
    text = lt_module(t, epilogue, root, alpha=0.5)
    result, manifest = compile_host(text)
    thunks = result.manifest.thunks.thunks
    assert [th.kind for th in thunks] == ["kGemm", "kKernel"]
    gemm, kernel = thunks
    assert isinstance(gemm, GemmThunk) and isinstance(kernel, KernelThunk)
    cfg = gemm.config
    # The plain matmul: alpha kept, no epilogue, no bias; 16-bit results are computed in f32.
    assert cfg.epilogue == "DEFAULT" and gemm.bias is None and cfg.alpha_real == 0.5
    assert cfg.output_shape.startswith("f32[24,20]") and cfg.lhs_shape.startswith(f"{t}[24,40]")
    # The kernel reads the GEMM's result (an f32 result is overwritten in place, a bf16 call's
    # f32 result is a temporary) and writes the call's outputs (and the aux output).
    assert kernel.args[0].slice == gemm.output and kernel.args[0].written == (t == "f32")
    written = [a for a in kernel.args if a.written]
    assert len(written) == (2 if root == "out_aux" else 1)

    args = arguments(text)
    got = run(manifest, args)
    want = as_list(evaluate(parse_module(text), args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        close(g, w, t)
    out64, pre64 = float64_reference(epilogue, args, alpha=0.5)
    close(got[0], out64, t)
    if root == "out_aux":
        close(got[1], pre64, t)


@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_aux_output_that_nobody_reads_and_the_whole_tuple(t):
    """A *_AUX call read only through element 0, and one whose whole tuple (aux, workspace) is the
    result: the workspace reads as zeros (a memset), as the interpreter gives it."""
    text = lt_module(t, "BIAS_GELU_AUX", "out")
    result, manifest = compile_host(text)
    assert [th.kind for th in result.manifest.thunks.thunks] == ["kGemm", "kKernel"]
    args = arguments(text)
    close(run(manifest, args)[0], evaluate(parse_module(text), args), t)

    text = lt_module(t, "GELU_AUX", "all")
    result, manifest = compile_host(text)
    kinds = [th.kind for th in result.manifest.thunks.thunks]
    assert kinds.count("kGemm") == 1 and kinds.count("kKernel") == 1 and "kMemzero" in kinds
    args = arguments(text)
    got, want = run(manifest, args), as_list(evaluate(parse_module(text), args))
    close(got[0], want[0], t)
    close(got[1], want[1], t)
    assert got[2].dtype == np.int8 and not got[2].any()


@pytest.mark.parametrize("aliased", [False, True])
def test_f32_matrix_bias_stays_in_the_gemm(aliased):
    """With `output_to_operand_aliasing` (out written over c) the GEMM keeps it: c, a parameter, is
    copied first and the GEMM runs in place."""
    text = lt_module("f32", "BIAS_RELU", alpha=2, beta=0.5)
    if aliased:
        target = 'custom_call_target="__cublas$lt$matmul"'
        text = text.replace(target, target + ", output_to_operand_aliasing={{0}: (2, {})}")
    result, manifest = compile_host(text)
    *copies, gemm, kernel = result.manifest.thunks.thunks
    assert [c.kind for c in copies] == (["kCopy"] if aliased else [])
    assert gemm.kind == "kGemm" and gemm.c is not None and gemm.config.beta == 0.5
    assert (gemm.c == gemm.output) == aliased
    assert [a.shape for a in kernel.args] == ["f32[24,20]{1,0}", "f32[20]{0}"]  # gemm result in place, bias
    args = arguments(text)
    got = run(manifest, args)[0]
    close(got, evaluate(parse_module(text), args), "f32")
    close(got, float64_reference("BIAS_RELU", args, 2, 0.5)[0], "f32")


@pytest.mark.parametrize("t, c_layout", [("bf16", "{1,0}"), ("f32", "{0,1}")])
def test_matrix_bias_the_gemm_cannot_take_moves_into_the_kernel(t, c_layout):
    """A bf16 c cannot be the f32 GEMM result's initial value, nor a c in another layout than the
    result's: beta * c is added by the epilogue kernel, the GEMM has beta 0."""
    text = lt_module(t, "BIAS_GELU", alpha=0.5, beta=2, c_layout=c_layout)
    result, manifest = compile_host(text)
    gemm, kernel = result.manifest.thunks.thunks
    assert gemm.kind == "kGemm" and gemm.c is None and gemm.config.beta == 0
    assert f"{t}[24,20]{c_layout}" in [a.shape for a in kernel.args if not a.written]
    args = arguments(text)
    got = run(manifest, args)[0]
    close(got, evaluate(parse_module(text), args), t)
    close(got, float64_reference("BIAS_GELU", args, 0.5, 2)[0], t)


def test_batched_bias_relu():
    text = f"""HloModule batched
ENTRY e {{ a = bf16[3,16,8] parameter(0) b = bf16[3,8,12] parameter(1) v = bf16[12] parameter(2)
  g = (bf16[3,16,12], s8[64]) custom-call(a, b, v), custom_call_target="__cublas$lt$matmul",
    backend_config={config("BIAS_RELU", batch=True)}
  ROOT r = bf16[3,16,12] get-tuple-element(g), index=0 }}"""
    result, manifest = compile_host(text)
    gemm, _ = result.manifest.thunks.thunks
    assert gemm.kind == "kGemm" and gemm.config.output_matrix.batch == 3
    args = arguments(text)
    got = run(manifest, args)[0]
    close(got, evaluate(parse_module(text), args), "bf16")
    a, b, v = (np.asarray(x, np.float64) for x in args)
    close(got, np.maximum(np.einsum("bmk,bkn->bmn", a, b) + v, 0), "bf16")


def test_the_gemm_config_is_one_hlo_runs_cublas_call_accepts():
    """What `hlo_run.cublas.Cublas.gemm` would pass to cublasGemmStridedBatchedEx for a bf16
    BIAS_GELU call: bf16 x bf16 -> f32 (CUBLAS_COMPUTE_32F, float scales), no epilogue."""
    result, _ = compile_host(lt_module("bf16", "BIAS_GELU", alpha=0.5))
    cfg = result.manifest.thunks.thunks[0].config
    assert cfg.epilogue == "DEFAULT"  # Cublas.gemm refuses any other
    assert DATA_TYPES["bf16"] == 14 and DATA_TYPES["f32"] == 0 and _COMPUTE["f32"][0] == 68
    call = gemm_call(cfg)
    # Row-major output: cuBLAS computes out^T = b^T a^T, so rhs comes first; (m, n, k) = (20, 24, 40).
    assert (call["m"], call["n"], call["k"], call["batch"]) == (20, 24, 40, 1)
    assert call["first"][0] == "rhs" and call["ldc"] == 20
    alpha, beta = scale_factors(cfg, ctypes.c_float, False)
    assert (alpha.value, beta.value) == (0.5, 0.0)


def test_second_run_changes_nothing():
    module = parse_module(lt_module("f32", "BIAS_GELU_AUX", "out_aux", beta=1))
    assert GemmFallback().run(module)
    text = print_module(module)
    assert "__cublas$lt$matmul" not in text and text.count('custom_call_target="__cublas$gemm"') == 1
    assert not GemmFallback().run(module)
    assert print_module(module) == text


def test_calls_cublas_cannot_run_anyway_stay_one_kernel():
    """Mixed operand types: even without the epilogue cuBLAS has no such GEMM, so the whole call is
    the elemental-dot kernel, as before."""
    text = f"""HloModule mixed
ENTRY e {{ a = bf16[4,6] parameter(0) b = s4[6,3] parameter(1) v = bf16[3] parameter(2)
  g = (bf16[4,3], s8[8]) custom-call(a, b, v), custom_call_target="__cublas$lt$matmul",
    backend_config={config("BIAS_RELU")}
  ROOT r = bf16[4,3] get-tuple-element(g), index=0 }}"""
    result, manifest = compile_host(text)
    assert [th.kind for th in result.manifest.thunks.thunks] == ["kKernel"]
    a = np.random.default_rng(1).uniform(-1, 1, (4, 6)).astype(ml_dtypes.bfloat16)
    b = np.random.default_rng(2).integers(-8, 8, (6, 3)).astype(ml_dtypes.int4)
    v = np.random.default_rng(3).uniform(-1, 1, (3,)).astype(ml_dtypes.bfloat16)
    got = run(manifest, [a, b, v])[0]
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + v.astype(np.float64), 0)
    close(got, want, "bf16")


def test_a_plain_gemm_whose_c_has_another_layout_is_a_kernel():
    """cuBLAS overwrites c in place, so c must lie as the result does; otherwise the host GEMM read
    c in the result's layout (a wrong answer before this check)."""
    ddn = {"lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["0"]}
    cfg = json.dumps({"gemm_backend_config": {"alpha_real": 1, "beta": 1, "dot_dimension_numbers": ddn}})
    text = f"""HloModule c_layout
ENTRY e {{ a = f32[4,3] parameter(0) b = f32[3,5] parameter(1) c = f32[4,5]{{0,1}} parameter(2)
  g = (f32[4,5]{{1,0}}, s8[16]) custom-call(a, b, c), custom_call_target="__cublas$gemm", backend_config={cfg}
  ROOT r = f32[4,5] get-tuple-element(g), index=0 }}"""
    result, manifest = compile_host(text)
    assert [th.kind for th in result.manifest.thunks.thunks] == ["kKernel"]
    args = arguments(text)
    got = run(manifest, args)[0]
    a, b, c = (np.asarray(x, np.float64) for x in args)
    close(got, a @ b + c, "f32")


def test_cuda_target_links_the_epilogue_kernels():
    pytest.importorskip("cuda.bindings.nvjitlink", reason="PTX linking needs nvJitLink")
    for t in ("f32", "bf16"):
        result = compile_module(parse_module(lt_module(t, "BIAS_GELU_AUX", "out_aux", beta=1)),
                                CompileOptions(target="cuda"))
        assert [th.kind for th in result.manifest.thunks.thunks] == ["kGemm", "kKernel"]


def test_a_call_without_workspace_or_tuple():
    """An array-shaped cuBLASLt call (no workspace element) becomes an array-shaped `__cublas$gemm`."""
    text = f"""HloModule bare
ENTRY e {{ a = f32[8,16] parameter(0) b = f32[16,12] parameter(1) v = f32[12] parameter(2)
  ROOT g = f32[8,12] custom-call(a, b, v), custom_call_target="__cublas$lt$matmul",
    backend_config={config("BIAS_GELU")} }}"""
    module = parse_module(text)
    assert GemmFallback().run(module)
    gemm = [i for i in module.entry.instructions if i.opcode == "custom-call"]
    assert len(gemm) == 1 and gemm[0].shape.to_string() == "f32[8,12]{1,0}"
    result, manifest = compile_host(text)
    assert [th.kind for th in result.manifest.thunks.thunks] == ["kGemm", "kKernel"]
    args = arguments(text)
    got = run(manifest, args)[0]
    close(got, evaluate(parse_module(text), args), "f32")
    close(got, float64_reference("BIAS_GELU", args)[0], "f32")
