"""The cuda platform on a real GPU: cuBLAS gemms in every operand layout, copies, memsets and host-side
control flow, against the interpreter. Marked `gpu`: skipped (with the reason) where no GPU is usable."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module

from codegen_testlib import KERNEL_FREE, compile_text

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def gpu():
    from hlo_run.backends.cuda import CudaBackend

    reason = CudaBackend.unavailable_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")


def run_cuda(text: str, args):
    from hlo_run.backends.cuda import CudaDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    result, _ = compile_text(text, target="cuda")
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    executable = ManifestExecutable(manifest, CudaDevice())
    try:
        return executable.run(args)
    finally:
        executable.close()


def rand(shape, dtype, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


DOT = ("HloModule d\nENTRY e {{ a = {a} parameter(0) b = {b} parameter(1)\n"
       " ROOT d = {out} dot(a, b), {dims} }}")
PLAIN = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
BATCH = "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}"


@pytest.mark.parametrize("a, b, out, dims, dtype, tol", [
    ("f32[33,65]", "f32[65,17]", "f32[33,17]", PLAIN, np.float32, 1e-5),
    ("f32[33,65]{0,1}", "f32[65,17]", "f32[33,17]", PLAIN, np.float32, 1e-5),
    ("f32[33,65]", "f32[65,17]{0,1}", "f32[33,17]{0,1}", PLAIN, np.float32, 1e-5),
    ("f32[33,65]{0,1}", "f32[65,17]{0,1}", "f32[33,17]{0,1}", PLAIN, np.float32, 1e-5),
    ("bf16[64,128]", "bf16[128,32]", "bf16[64,32]", PLAIN, ml_dtypes.bfloat16, 1e-2),
    ("bf16[64,128]", "bf16[128,32]", "f32[64,32]", PLAIN, ml_dtypes.bfloat16, 1e-5),
    ("f64[3,7,5]", "f64[3,5,4]{1,2,0}", "f64[3,7,4]", BATCH, np.float64, 1e-12),
    ("f32[3,7,5]", "f32[3,5,4]", "f32[3,7,4]{1,2,0}", BATCH, np.float32, 1e-5),
    ("c64[9,5]", "c64[5,4]", "c64[9,4]", PLAIN, np.complex64, 1e-5),
])
def test_cublas_gemm_matches_the_interpreter(a, b, out, dims, dtype, tol):
    text = DOT.format(a=a, b=b, out=out, dims=dims)
    module = parse_module(text)
    args = [rand(p.shape.dims, dtype, seed=i) for i, p in enumerate(module.entry.parameters)]
    if np.dtype(dtype).kind == "c":
        args = [x + 1j * rand(x.shape, np.float32, seed=9).astype(dtype) for x in args]
    got = run_cuda(text, args)
    want = evaluate(module, args)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got, np.complex128), np.asarray(want, np.complex128),
                               rtol=tol, atol=tol)


def test_gemm_custom_call_with_alpha_and_beta():
    text = """HloModule g
ENTRY e { a = f32[8,16] parameter(0) b = f32[16,4] parameter(1) c = f32[8,4] parameter(2)
  g = (f32[8,4], s8[1024]) custom-call(a, b, c), custom_call_target="__cublas$gemm",
    backend_config={"gemm_backend_config":{"alpha_real":2,"alpha_imag":0,"beta":-1,
      "dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],
      "lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"epilogue":"DEFAULT"}}
  ROOT r = f32[8,4] get-tuple-element(g), index=0 }"""
    args = [rand((8, 16), np.float32, 1), rand((16, 4), np.float32, 2), rand((8, 4), np.float32, 3)]
    got = run_cuda(text, args)
    want = 2 * (args[0].astype(np.float64) @ args[1]) - args[2]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("go", [True, False])
def test_control_flow_copies_and_constants(go):
    args = [np.array(go), rand((4, 4), np.float32, 1), rand((4, 4), np.float32, 2)]
    got = run_cuda(KERNEL_FREE, args)
    want = evaluate(parse_module(KERNEL_FREE), args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_memsets():
    text = """HloModule m
z { c = f32[] constant(0) ROOT b = f32[1000] broadcast(c), dimensions={} }
o { c = bf16[] constant(1) ROOT b = bf16[1000] broadcast(c), dimensions={} }
ENTRY e { a = f32[1000] fusion(), kind=kLoop, calls=z  b = bf16[1000] fusion(), kind=kLoop, calls=o
  ROOT t = (f32[1000], bf16[1000]) tuple(a, b) }"""
    a, b = run_cuda(text, [])
    assert not a.any() and (b == ml_dtypes.bfloat16(1)).all()


def test_cli_runs_a_cuda_manifest(tmp_path):
    from hlo_run.cli import cli

    text = DOT.format(a="f32[8,8]", b="f32[8,8]", out="f32[8,8]", dims=PLAIN)
    result, _ = compile_text(text, target="cuda")
    path = tmp_path / "m.json"
    path.write_bytes(result.manifest.to_bytes())
    out = CliRunner().invoke(cli, ["--platform", "cuda", "--iterations", "2", str(path)],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.stderr
    assert "Results on cuda and interpreter are close enough" in out.stderr and "001 kGemm d" in out.stderr


@pytest.mark.parametrize("name", ["int8_bf16", "mlp_bf16", "sliced_bf16", "batched_bf16", "skinny_bf16",
                                  "matmul_f32", "matmul_s8", "f8_bf16"])
def test_triton_gemm_kernels_match_the_interpreter(name):
    # XLA's own optimized modules (its GEMM fusions and tile configs), each GEMM a Triton kernel
    from pathlib import Path

    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_run.backends.cuda import CudaDevice
    from hlo_run.compare import compare_values
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.manifest_runtime import ManifestExecutable

    pytest.importorskip("triton")
    text = (Path(__file__).resolve().parents[3] / "testdata" / "triton" / f"{name}.xla_gpu.hlo").read_text()
    args = make_fake_arguments(parse_module(text, name), 1)
    want = evaluate(parse_module(text, name), args)
    result = compile_module(parse_module(text, name), CompileOptions(target="cuda", arch="sm_90"))
    assert any(k.num_warps for k in result.manifest.kernels.values())
    executable = ManifestExecutable(load_manifest(result.manifest.to_bytes(), "m.json"), CudaDevice())
    try:
        got = executable.run(args)
    finally:
        executable.close()
    comparison = compare_values(got, want)
    assert comparison.ok, comparison.one_line()
