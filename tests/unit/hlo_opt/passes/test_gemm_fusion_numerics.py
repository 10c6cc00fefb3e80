"""The Triton GEMM fusions compute what the modules as written compute: the interpreter on the
optimized module against the interpreter on the original, and the whole host pipe (hlo-opt's GPU
pipeline, hlo-codegen --target host, whose GemmFusionThunks hlo-run's host platform evaluates with
numpy) against the interpreter on the original, on the testdata/triton modules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.manifest.thunks import GemmFusionThunk, KernelThunk, thunk_from_json, walk
from hlo_opt.pipelines import build_gpu_pipeline

TRITON = Path(__file__).resolve().parents[4] / "testdata" / "triton"
HOST_CASES = ["int8_bf16", "f8_bf16", "attention_bf16", "mlp_bf16", "matmul_s8", "transposed_lhs_bf16",
              "broadcast_lhs_bf16", "sliced_bf16", "batched_bf16", "skinny_bf16", "matmul_f64", "small_f32"]


def _optimized(name: str):
    module = parse_module((TRITON / f"{name}.hlo").read_text(), f"{name}.hlo")
    build_gpu_pipeline().run_with(module, RunOptions())
    return module


def _compile(module, target: str):
    result = compile_module(parse_module(print_module(module), "optimized"), CompileOptions(target=target))
    return load_manifest(result.manifest.to_bytes(), "m.json")


@pytest.mark.parametrize("name", HOST_CASES)
def test_host_pipe_matches_the_interpreter_on_the_module_as_written(name):
    from hlo_run.backends.host import HostDevice
    from hlo_run.compare import compare_values
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.manifest_runtime import ManifestExecutable

    module = _optimized(name)
    manifest = _compile(module, "host")
    assert any(isinstance(t, GemmFusionThunk) for t in walk(manifest.thunks))
    args = make_fake_arguments(module, 0)
    got = ManifestExecutable(manifest, HostDevice()).run(args)
    want = evaluate(parse_module((TRITON / f"{name}.hlo").read_text()), args)
    comparison = compare_values(got, want)  # bounds fitted to the output type
    assert comparison.ok, comparison.one_line()


@pytest.mark.parametrize("name", ["int8_bf16", "mlp_bf16", "matmul_s8", "f8_bf16", "transposed_lhs_bf16"])
def test_interpreter_agrees_before_and_after(name):
    """Every one of these dots is split along K in XLA's output (a reduce after its GEMM fusion,
    testdata/triton/NAME.xla_gpu.hlo) and in ours: the f32 partial sums are added in another order,
    so floating results agree within the type's bounds; integer sums are exact."""
    from hlo_run.compare import compare_values
    from hlo_run.inputs import make_fake_arguments

    assert " reduce(" in (TRITON / f"{name}.xla_gpu.hlo").read_text()
    module = _optimized(name)
    assert any(i.opcode == "reduce" for c in module.computations for i in c.instructions)
    args = make_fake_arguments(module, 0)
    before = evaluate(parse_module((TRITON / f"{name}.hlo").read_text()), args)
    after = evaluate(module, args)
    comparison = compare_values(after, before)
    assert comparison.ok, comparison.one_line()
    if np.asarray(before).dtype.kind in "iu":
        assert np.array_equal(np.asarray(before), np.asarray(after))


def test_cuda_target_launches_a_kernel_and_the_thunk_round_trips():
    module = _optimized("int8_bf16")
    cuda = _compile(module, "cuda")
    assert not any(isinstance(t, GemmFusionThunk) for t in walk(cuda.thunks))
    assert any(isinstance(t, KernelThunk) and t.profile_annotation.startswith("gemm_fusion_")
               for t in walk(cuda.thunks))
    (thunk,) = [t for t in walk(_compile(module, "host").thunks) if isinstance(t, GemmFusionThunk)]
    assert thunk_from_json(thunk.to_json(), "t") == thunk
    assert thunk.operand_shapes[1].startswith("s8[") and "ENTRY" in thunk.computation


# s8 weights converted in the fusion (the rhs computes, the lhs only reads): gemm-fusion-swap-operands
# swaps the dot, so the bias-add and scale epilogue reads the swapped dot through the bitcast back to
# [M, N]; the lhs is column-major and M, N, K are no multiples of the tiles.
SWAPPED_EPILOGUE = (Path(__file__).resolve().parents[3] / "data" / "s8_weights_bias_scale.hlo").read_text()


def test_swapped_fusion_with_an_epilogue_on_the_host_matches_the_interpreter():
    from hlo_run.backends.host import HostDevice
    from hlo_run.compare import compare_values
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.manifest_runtime import ManifestExecutable

    module = parse_module(SWAPPED_EPILOGUE, "swapped_epilogue")
    build_gpu_pipeline().run_with(module, RunOptions())
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    body = fusion.fused_computation()
    (dot,) = [i for i in body.instructions if i.opcode == "dot"]
    assert dot.operands[0].opcode == "convert" and dot.shape.dims == (200, 300)  # swapped: N x M
    assert [u.opcode for u in dot.users] == ["bitcast"] and body.root.opcode == "multiply"
    manifest = _compile(module, "host")
    args = make_fake_arguments(module, 0)
    got = ManifestExecutable(manifest, HostDevice()).run(args)
    want = evaluate(parse_module(SWAPPED_EPILOGUE, "swapped_epilogue"), args)
    comparison = compare_values(got, want)
    assert comparison.ok, comparison.one_line()
