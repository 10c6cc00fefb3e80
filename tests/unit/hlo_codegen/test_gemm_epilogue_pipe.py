"""The fusion bench's matmul modules through the three tools, `hlo-opt | hlo-codegen --target host |
hlo-run --platform host`: hlo-opt (Triton GEMMs off, `--xla_gpu_enable_triton_gemm=false`, as
XLA's cuBLAS tests run) makes their dots cuBLASLt calls with BIAS, BIAS_RELU and
BIAS_GELU epilogues, hlo-codegen runs each as a GEMM thunk plus one epilogue kernel (no GEMM is
left to a kernel), and hlo-run's results match the interpreter, or for the ill-conditioned
mlp_bf16 (2048-long bf16 sums) and transformer_fwd (layer norms and a softmax) lie no farther
from a float64 evaluation than the interpreter's or XLA:CPU's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
MODULES = ROOT / "testdata" / "fusion"


def compile_to_manifest(name: str, tmp_path: Path) -> tuple[Path, list[dict]]:
    """hlo-opt | hlo-codegen --target host; the manifest and its entry thunks."""
    manifest = tmp_path / f"{name}.json"
    opt = subprocess.run([str(BIN / "hlo-opt"), "--xla_gpu_enable_triton_gemm=false",
                          str(MODULES / f"{name}.hlo")], capture_output=True, text=True)
    assert opt.returncode == 0, opt.stderr
    assert "__cublas$lt$matmul" in opt.stdout and '"epilogue":"BIAS' in opt.stdout
    codegen = subprocess.run([str(BIN / "hlo-codegen"), "--target", "host", "-o", str(manifest)],
                             input=opt.stdout, capture_output=True, text=True)
    assert codegen.returncode == 0, codegen.stderr
    return manifest, json.loads(manifest.read_text())["thunks"]["thunks"]


def gemm_and_epilogue_thunks(thunks: list[dict]) -> tuple[int, int]:
    gemms = sum(t["kind"] == "kGemm" for t in thunks)
    epilogues = sum(t["kind"] == "kKernel" and t["kernel"].startswith("gemm_epilogue") for t in thunks)
    assert not any(t["kind"] == "kKernel" and t["kernel"].startswith("gemm_fusion") for t in thunks)
    return gemms, epilogues


def random_arguments(module, dtype) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.uniform(-1, 1, p.shape.dims).astype(dtype) for p in module.entry.parameters]


def run_host(manifest: Path, args, tmp_path: Path, reference: str) -> np.ndarray:
    """hlo-run --platform host on these arguments (compared with `reference` by hlo-run itself)."""
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{f"arg{i}": a.astype(np.float32) for i, a in enumerate(args)})  # bf16 travels as f32
    run = subprocess.run([str(BIN / "hlo-run"), "--platform", "host", "--reference-platform", reference,
                          "--inputs", str(inputs), "--output", str(outputs), str(manifest)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    return np.asarray(np.load(outputs)["out0"], np.float64)


@pytest.mark.parametrize("name, gemms, epilogues", [("matmul_bias_relu", 1, 1), ("mlp_f32", 2, 2)])
def test_pipe_matches_the_interpreter(name, gemms, epilogues, tmp_path):
    manifest, thunks = compile_to_manifest(name, tmp_path)
    assert gemm_and_epilogue_thunks(thunks) == (gemms, epilogues)
    module = parse_module((MODULES / f"{name}.hlo").read_text())
    args = random_arguments(module, np.float32)
    # hlo-run compares with the interpreter running the manifest's (rewritten) HLO; this test also
    # with the interpreter running the module as written, before hlo-opt and gemm-fallback.
    got = run_host(manifest, args, tmp_path, "interpreter")
    want = np.asarray(evaluate(module, args), np.float64)
    bound = 1e-3  # hlo-run's f32 bound, the corpus pipe tier's
    bad = (np.abs(got - want) > bound) & (np.abs(got - want) > bound * np.abs(want))
    assert not bad.any(), (np.abs(got - want).max(), int(bad.sum()))


def test_transformer_fwd_is_as_near_a_float64_evaluation_as_xla_cpu(tmp_path):
    # Two layer norms and a softmax over 512-long f32 sums: the interpreter itself lies up to 1e-2
    # from a float64 evaluation, so two correct f32 evaluations differ by more than 1e-3. Judged as
    # design/testing.md says for ill-conditioned modules: by distance to float64, no larger than
    # XLA:CPU's own.
    from hlo_run.xla_cpu import XlaCpuExecutable

    manifest, thunks = compile_to_manifest("transformer_fwd", tmp_path)
    assert gemm_and_epilogue_thunks(thunks) == (6, 2)
    text = (MODULES / "transformer_fwd.hlo").read_text()
    module = parse_module(text)
    args = random_arguments(module, np.float32)
    got = run_host(manifest, args, tmp_path, "none")
    exact = np.asarray(evaluate(parse_module(text.replace("f32", "f64")),
                                [a.astype(np.float64) for a in args]), np.float64)
    xla = XlaCpuExecutable.compile(text).run(args)
    xla = np.asarray(xla[0] if isinstance(xla, (list, tuple)) else xla, np.float64)
    ours, theirs = np.abs(got - exact), np.abs(xla - exact)
    assert ours.max() <= theirs.max() and ours.mean() <= theirs.mean(), (ours.max(), theirs.max())
    assert theirs.max() > 1e-3  # not vacuous: XLA:CPU is itself past the f32 bound here


def test_mlp_bf16_is_as_near_a_float64_evaluation_as_the_interpreter(tmp_path):
    manifest, thunks = compile_to_manifest("mlp_bf16", tmp_path)
    assert gemm_and_epilogue_thunks(thunks) == (2, 2)
    text = (MODULES / "mlp_bf16.hlo").read_text()
    module = parse_module(text)
    args = random_arguments(module, ml_dtypes.bfloat16)
    # These arguments take hlo-run's own comparison past 2e-2 (see below), so it compares nothing.
    got = run_host(manifest, args, tmp_path, "none")
    interpreter = np.asarray(evaluate(module, args), np.float64)
    wide = parse_module(text.replace("bf16", "f64"))  # the same module in float64
    exact = np.asarray(evaluate(wide, [a.astype(np.float64) for a in args]))
    ours, theirs = np.abs(got - exact), np.abs(interpreter - exact)
    assert ours.max() <= theirs.max() and ours.mean() <= theirs.mean(), (ours.max(), theirs.max())
    # Not vacuous: the outputs are large and the interpreter's own error is well above bf16's 2e-2.
    assert np.abs(exact).max() > 10 and theirs.max() > 0.5
