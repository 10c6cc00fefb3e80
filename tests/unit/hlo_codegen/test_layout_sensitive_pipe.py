"""The layout tier in small: hand-written modules (`tests/helpers/layout_cases.py`) aimed at each pass that
rewrites according to layouts (the GEMM rewriter's BIAS / RELU / GELU / BIAS_RELU / BIAS_GELU
epilogues on column-major results, a batched BIAS in every layout the dot can take,
bitcast-producing reshapes and transposes, reductions over
non-default layouts, concatenate / slice / pad / dynamic-update-slice / scatter / gather, a
convolution, while and conditional with non-default parameter layouts).

Each module, as written and as variant 1, is first checked on XLA:CPU against the interpreter
(the reference's reference). Then, as written and as layout variants (`tests/helpers/layout_variants.py`:
permuted entry layouts plus layout-assignment's `vary_layouts_seed` knob):

    hlo-opt (gpu pipeline, verifier after every pass)    interpreter after == interpreter before
      | hlo-codegen --target host | hlo-run --platform host    == the interpreter on the input
      | hlo-codegen --target cuda                           PTX links (nvJitLink)

all in-process, with the tools' own functions. The default run takes every module as written and
variant 1; variants 0 and 2 are `slow`."""

from __future__ import annotations

import re

import pytest

from layout_cases import CASES, WITNESS, gemm_batched  # noqa: E402
from layout_variants import pipeline_overrides, variant_text  # noqa: E402

from hlo_common.interpreter.evaluator import evaluate  # noqa: E402
from hlo_common.hlo.parser import parse_module  # noqa: E402
from hlo_common.hlo.printer import print_module  # noqa: E402
from hlo_run.compare import compare_values  # noqa: E402
from hlo_run.inputs import make_fake_arguments  # noqa: E402

F32_BOUND = 1e-4  # interpreter against interpreter, and against XLA:CPU (design/testing.md)
HOST_BOUND = 1e-3  # hlo-run's default bounds, the pipe tier's


def optimize(text: str, name: str, knob_seed: int | None) -> str:
    """What hlo-opt prints, with the verifier after every pass (and the knob when seeded). The
    GEMM cases are aimed at the cuBLAS rewriter: Triton GEMMs are off for them
    (--xla_gpu_enable_triton_gemm=false, as XLA's GEMM rewriter tests run)."""
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    module = parse_module(text, name)
    options = RunOptions(verify_each=True, triton_gemm=not name.startswith("gemm"))
    build_gpu_pipeline(pipeline_overrides(knob_seed)).run_with(module, options)
    return print_module(module)


def compile_for(text: str, name: str, target: str):
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.manifest.manifest import load_manifest

    data = compile_module(parse_module(text, name), CompileOptions(target=target)).manifest.to_bytes()
    return load_manifest(data, f"{name}.json")  # as hlo-run reads the file


def run_host(manifest, args, name: str):
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    return ManifestExecutable(manifest, HostDevice(), name).run(args)


def assert_matches(got, want, bound: float, what: str) -> None:
    comparison = compare_values(got, want, bound, bound)
    assert comparison.ok, f"{what}: {comparison.one_line()}"


@pytest.mark.parametrize("name, k", [(name, k) for name in sorted(CASES) for k in (None, 1)])
def test_the_interpreter_gives_xla_cpus_answer(name, k):
    """The module as written and its variant 1 (permuted entry layouts) before optimization."""
    from hlo_run.xla_cpu import run_hlo_text

    pytest.importorskip("jax", reason="XLA:CPU runs through jax (the test extra)")
    text, _ = variant(name, k)
    module = parse_module(text, name)
    args = make_fake_arguments(module, 0)
    want = run_hlo_text(text, args)
    assert_matches(evaluate(module, args), want, F32_BOUND, "interpreter vs XLA:CPU")


def variant(name: str, k: int | None) -> tuple[str, int | None]:
    return (CASES[name], None) if k is None else variant_text(CASES[name], name, k)


PARAMS = [pytest.param(name, k, id=f"{name}-{'as_written' if k is None else f'v{k}'}",
                       marks=[pytest.mark.slow] if k in (0, 2) else [])
          for name in sorted(CASES) for k in (None, 0, 1, 2)]


@pytest.mark.parametrize("name, k", PARAMS)
def test_pipeline_and_host_pipe_keep_the_results(name, k):
    text, seed = variant(name, k)
    module = parse_module(text, name)
    args = make_fake_arguments(module, 0)
    want = evaluate(module, args)
    optimized = optimize(text, name, seed)
    if k is None:
        assert WITNESS[name](optimized), f"{name} no longer reaches the path it is written for:\n{optimized}"
    assert_matches(evaluate(parse_module(optimized), args), want, F32_BOUND, "interpreter after hlo-opt")
    manifest = compile_for(optimized, name, "host")
    assert_matches(run_host(manifest, args, name), want, HOST_BOUND, "host pipe vs the interpreter")


@pytest.mark.parametrize("name, k", PARAMS)
def test_cuda_ptx_links(name, k):
    pytest.importorskip("cuda.bindings.nvjitlink", reason="PTX linking needs nvJitLink (the ptx extra)")
    text, seed = variant(name, k)
    # hlo-codegen --target cuda links every kernel's PTX for sm_90 with nvJitLink as it compiles
    manifest = compile_for(optimize(text, name, seed), name, "cuda")
    assert manifest.target == "cuda" and manifest.thunks.thunks


LT_CALL = re.compile(r'\(f32\[4,32,8\]\{([\d,]+)\}, s8\[\d+\]\{0\}\) custom-call\([^\n]*"epilogue":"(\w+)"')


@pytest.mark.parametrize("bias_dim", [1, 2])
def test_a_batched_bias_epilogue_in_every_layout_the_dot_can_take(bias_dim):
    """The knob puts the batched dot into each non-default layout cuBLAS can write ((B,C,R),
    (R,B,C), (C,B,R) major to minor); the rewriter fuses the bias exactly when it runs along the
    result's most minor dim (XLA's FuseVectorBiasAdd), and the host pipe gives the interpreter's
    answer in each."""
    text = gemm_batched(f"gemm_batched_bias{bias_dim}", "{2,1,0}", bias_dim)
    module = parse_module(text)
    args = make_fake_arguments(module, 0)
    want = evaluate(module, args)
    reached = {}
    for seed in range(12):
        optimized = optimize(text, "gemm_b", seed)
        layout, epilogue = LT_CALL.search(optimized).groups()
        if layout not in reached:
            reached[layout] = epilogue
            manifest = compile_for(optimized, "b", "host")
            assert_matches(run_host(manifest, args, "b"), want, HOST_BOUND, f"host pipe, dot {{{layout}}}")
    assert set(reached) == {"1,2,0", "2,0,1", "1,0,2"}
    assert {layout for layout, e in reached.items() if e == "BIAS"} == \
        {m for m in reached if int(m.split(",")[0]) == bias_dim}
