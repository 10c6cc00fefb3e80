"""A cuBLASLt BIAS epilogue on a result that is not row-major (issue: `jax.vmap` over an
`eqx.nn.Linear` gave wrong answers on the host pipe).

`bias = b[128]; add(dot(w, x) -> f32[128,4], broadcast(b, dims={0}))` under a transpose: layout
assignment makes the dot's result column-major ({0,1}), so the bias runs along dim 0, which is then
the most minor physical dim, and `cublas-gemm-rewriter` fuses it as XLA's FuseVectorBiasAdd does
(XLA:GPU gives the same call). The epilogue adds the bias in memory order, along the result's most
minor elements; the interpreter, the host GemmThunk and gemm-fallback's epilogue kernel must all
read it so, and the answer must be XLA:CPU's."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_common.passes.gemm_fallback import GemmFallback
from hlo_common.hlo.printer import print_instruction
from hlo_common.hlo.verifier import verify_module
from hlo_run.cli import cli
from hlo_run.compile_hook import compile_to_manifest

RNG = np.random.default_rng(7)
BIN = Path(sys.executable).parent
GEMM_BIAS_DIM0 = """HloModule gemm_bias_dim0

ENTRY main {
  w = f32[128,16] parameter(0)
  x = f32[4,16] parameter(1)
  b = f32[128] parameter(2)
  d = f32[128,4] dot(w, x), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  bb = f32[128,4] broadcast(b), dimensions={0}
  a = f32[128,4] add(d, bb)
  ROOT t = f32[4,128] transpose(a), dimensions={1,0}
}
"""
DDN = {"lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["0"],
       "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}


def lt_call(out: str, bias: str, epilogue: str = "BIAS") -> str:
    """A cuBLASLt call a[6,5] x b[5,4] -> `out` with `bias` as its vector (copied, so the root's
    layout is the call's)."""
    config = json.dumps({"gemm_backend_config": {"alpha_real": 1, "beta": 0, "dot_dimension_numbers": DDN,
                                                 "epilogue": epilogue}})
    return f"""HloModule lt
ENTRY e {{ a = f32[6,5] parameter(0) b = f32[5,4] parameter(1) v = {bias} parameter(2)
  g = {out} custom-call(a, b, v), custom_call_target="__cublas$lt$matmul", backend_config={config}
  ROOT r = {out} copy(g) }}"""


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def test_the_bias_runs_along_the_most_minor_physical_dims():
    from hlo_common.interpreter.gemm_semantics import add_bias, bias_output_dims

    assert bias_output_dims((1, 0), (128, 4), 4) == (1,)
    assert bias_output_dims((0, 1), (128, 4), 128) == (0,)
    assert bias_output_dims((2, 1, 0), (2, 3, 4), 12) == (2, 1)
    assert bias_output_dims((0, 1), (128, 4), 4) is None
    acc = np.zeros((3, 2))
    np.testing.assert_array_equal(add_bias(acc, (0, 1), np.array([1.0, 2.0, 3.0])),
                                  [[1, 1], [2, 2], [3, 3]])
    np.testing.assert_array_equal(add_bias(acc, (1, 0), np.array([1.0, 2.0])), [[1, 2]] * 3)
    # a 2-d bias is read in its own memory order: [[1, 2], [3, 4]]{0,1} holds 1, 3, 2, 4
    grid = np.zeros((1, 2, 2))
    np.testing.assert_array_equal(add_bias(grid, (2, 1, 0), np.array([[1.0, 2.0], [3.0, 4.0]]), (0, 1)),
                                  [[[1, 3], [2, 4]]])


def hlo_opt(text: str, tmp_path) -> str:
    path = tmp_path / "in.hlo"
    path.write_text(text)
    # Triton GEMMs off (XLA's --xla_gpu_enable_triton_gemm=false): the cuBLASLt path is the subject
    opt = subprocess.run([str(BIN / "hlo-opt"), "--xla_gpu_enable_triton_gemm=false", str(path)],
                         capture_output=True, text=True)
    assert opt.returncode == 0, opt.stderr
    return opt.stdout


def test_hlo_opt_fuses_the_bias_as_xla_does_and_the_host_pipe_gives_xla_cpus_answer(tmp_path):
    from hlo_run.xla_cpu import run_hlo_text

    optimized = parse_module(hlo_opt(GEMM_BIAS_DIM0, tmp_path))
    (call,) = [i for i in optimized.entry.instructions if i.opcode == "custom-call"]
    assert '"epilogue":"BIAS"' in print_instruction(call)  # XLA:GPU makes the same call
    assert call.shape.tuple_shapes[0].minor_to_major == (0, 1)
    args = [RNG.uniform(-1, 1, s).astype(np.float32) for s in [(128, 16), (4, 16), (128,)]]
    want = np.asarray(run_hlo_text(GEMM_BIAS_DIM0, args))
    np.testing.assert_allclose(evaluate(parse_module(GEMM_BIAS_DIM0), args), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(evaluate(optimized, args), want, rtol=1e-5, atol=1e-5)
    path = tmp_path / "m.hlo"
    path.write_text(GEMM_BIAS_DIM0)
    np.savez(tmp_path / "in.npz", **{f"arg{i}": a for i, a in enumerate(args)})
    result = run(["--platform", "host", "--inputs", str(tmp_path / "in.npz"), "--output",
                  str(tmp_path / "out.npz"), str(path)])
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["out0"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("out, bias, along", [
    ("f32[6,4]{0,1}", "f32[6]", 0),  # column-major result: the bias runs along the rows
    ("f32[6,4]{1,0}", "f32[4]", 1),
])
def test_interpreter_and_gemm_fallback_add_the_bias_along_the_minor_dim(out, bias, along):
    text = lt_call(out, bias)
    a, b = RNG.uniform(-1, 1, (6, 5)).astype(np.float32), RNG.uniform(-1, 1, (5, 4)).astype(np.float32)
    v = RNG.uniform(-1, 1, (6,) if along == 0 else (4,)).astype(np.float32)
    want = a.astype(np.float64) @ b + (v[:, None] if along == 0 else v[None, :])
    module = parse_module(text)
    np.testing.assert_allclose(evaluate(module, [a, b, v]), want, rtol=1e-5, atol=1e-6)
    assert GemmFallback().run(module)  # the epilogue kernel (host and cuda both take this path)
    verify_module(module)
    np.testing.assert_allclose(evaluate(module, [a, b, v]), want, rtol=1e-5, atol=1e-6)


def test_a_two_dim_bias_is_read_in_its_own_memory_order():
    # out[6,2,2] = a[6,5] x b[5,2,2]; bias f32[2,2]{0,1} holds v[0,0], v[1,0], v[0,1], v[1,1], which
    # run along the result's minor dims (2 then 1): out[i, j, k] += v[k, j]
    config = json.dumps({"gemm_backend_config": {"alpha_real": 1, "beta": 0, "dot_dimension_numbers": DDN,
                                                 "epilogue": "BIAS"}})
    text = f"""HloModule lt2
ENTRY e {{ a = f32[6,5] parameter(0) b = f32[5,2,2] parameter(1) v = f32[2,2]{{0,1}} parameter(2)
  g = f32[6,2,2] custom-call(a, b, v), custom_call_target="__cublas$lt$matmul", backend_config={config}
  ROOT r = f32[6,2,2] copy(g) }}"""
    a, b = RNG.uniform(-1, 1, (6, 5)).astype(np.float32), RNG.uniform(-1, 1, (5, 2, 2)).astype(np.float32)
    v = RNG.uniform(-1, 1, (2, 2)).astype(np.float32)
    want = np.einsum("ik,kjl->ijl", a.astype(np.float64), b) + v.T[None]
    module = parse_module(text)
    np.testing.assert_allclose(evaluate(module, [a, b, v]), want, rtol=1e-5, atol=1e-6)
    assert GemmFallback().run(module)
    verify_module(module)
    np.testing.assert_allclose(evaluate(module, [a, b, v]), want, rtol=1e-5, atol=1e-6)


def test_host_gemm_thunk_adds_a_flat_bias_buffer_in_memory_order():
    # a manifest's GemmThunk may carry a BIAS epilogue (hlo-codegen splits it off today): the host
    # reads the bias buffer as a flat vector and adds it along the output's most minor elements
    from hlo_common.gpu.gemm_config import build_gemm_config
    from hlo_common.hlo.shape import Shape
    from hlo_run.host_gemm import run_gemm

    out = Shape.array("f32", (6, 4), (0, 1))
    a, b = RNG.uniform(-1, 1, (6, 5)).astype(np.float32), RNG.uniform(-1, 1, (5, 4)).astype(np.float32)
    v = RNG.uniform(-1, 1, (6,)).astype(np.float32)
    cfg = build_gemm_config(Shape.array("f32", (6, 5)), Shape.array("f32", (5, 4)), out,
                            ((), (), (1,), (0,)), (1.0, 0.0), 0.0, "BIAS")
    got = run_gemm(cfg, out, a, b, None, v)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b + v[:, None], rtol=1e-5, atol=1e-6)


def test_the_bisector_runs_the_issue_module_to_a_match(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(GEMM_BIAS_DIM0)
    result = run(["--platform", "host", "--seed", "0", "--find-first-mismatch", str(path)])
    assert result.exit_code == 0, result.output
    assert "match, thunk by thunk" in result.stdout


def test_the_bisector_names_the_call_when_the_manifests_module_is_invalid(tmp_path):
    # the module a manifest's kernels came from is not valid HLO (gemm-fallback used to leave a
    # reshape of the 128-element bias into 4 here; now the epilogue's broadcast is broken by hand):
    # the bisector names the instruction and the kernel, exit 1, no traceback
    path = tmp_path / "m.hlo"
    path.write_text(GEMM_BIAS_DIM0)
    manifest = compile_to_manifest(hlo_opt(GEMM_BIAS_DIM0, tmp_path), str(path), "host")
    module = parse_module(manifest.hlo)
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]  # the epilogue kernel
    (old,) = [ln for ln in manifest.hlo.splitlines() if " broadcast(" in ln]
    broken = manifest.hlo.replace(old, old.replace("dimensions={0}", "dimensions={1}"))
    assert broken != manifest.hlo
    bad = tmp_path / "bad.json"
    bad.write_bytes(dataclasses.replace(load_manifest(manifest.to_bytes(), "m"), hlo=broken).to_bytes())
    result = run(["--platform", "host", "--seed", "0", "--find-first-mismatch", str(bad)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "is not valid HLO" in result.stdout and f"belongs to %{fusion.name} (kernel" in result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("hlo-run: error: ") and \
        last.endswith(f"bad.json: the manifest's module is not valid HLO at %{fusion.name}")
