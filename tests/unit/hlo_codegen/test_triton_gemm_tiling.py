"""The tiling of the Triton GEMM kernels checked without a GPU: every GEMM fusion hlo-opt makes of
the testdata/triton modules (and of ragged ones here) that the kernel writer takes is run tile by
tile in numpy from its tiled program (hlo_codegen.triton_gemm.tiled_eval, the kernel's own index
arithmetic) and compared with the interpreter evaluating the fusion's computation: ragged M, N
and K (shapes no multiple of the tile), split-k batches, transposed and column-major operands,
converts and epilogue side inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hlo_codegen.thunk_emitter import computation_module_text
from hlo_codegen.triton_gemm.program import Unsupported, tiled_program
from hlo_codegen.triton_gemm.tiled_eval import evaluate_tiled
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_common.interpreter.evaluator import evaluate
from hlo_opt.pipelines import build_gpu_pipeline
from hlo_run.compare import compare_values
from hlo_run.inputs import make_fake_arguments

TRITON = Path(__file__).resolve().parents[3] / "testdata" / "triton"
MODULES = ["int8_bf16", "f8_bf16", "attention_bf16", "mlp_bf16", "bias_gelu_bf16", "matmul_f32",
           "transposed_lhs_bf16", "transposed_rhs_bf16", "batched_bf16", "skinny_bf16", "reshape_lhs_bf16",
           "small_f32", "matmul_f64"]
# K is short next to M and N, so the dot is not split and the epilogue stays in the GEMM fusion
# (a split dot's epilogue goes with the reduce into a loop fusion, as XLA's loop_reduce_fusion).
RAGGED = (Path(__file__).resolve().parents[2] / "data" / "s8_weights_bias_scale.hlo").read_text()
RAGGED_SPLIT = """HloModule ragged_split
ENTRY e {
  a = f32[6,3000]{1,0} parameter(0)
  b = f32[3000,40]{1,0} parameter(1)
  ROOT d = f32[6,40]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


def _fusions(text: str, name: str):
    module = parse_module(text, name)
    build_gpu_pipeline().run_with(module, RunOptions())
    return [i for i in module.entry.instructions if i.opcode == "fusion" and i.name.startswith("gemm_fusion")]


def _check(fusion, config) -> None:
    computation = parse_module(computation_module_text(fusion.fused_computation()), fusion.name)
    args = make_fake_arguments(computation, 1)
    want = evaluate(computation, args)
    shapes = [o.shape for o in fusion.operands]
    got = evaluate_tiled(tiled_program(fusion), config, args, shapes, fusion.shape)
    comparison = compare_values(got, want)  # bounds fitted to the type: only the summation order differs
    assert comparison.ok, f"{fusion.name} {config}: {comparison.one_line()}"


CONFIGS = [{"block_m": 32, "block_n": 32, "block_k": 32}, {"block_m": 64, "block_n": 16, "block_k": 64}]
XLA_DEFAULT = {"block_m": 16, "block_n": 8, "block_k": 16}  # under tl.dot's 16: padded, masked


@pytest.mark.parametrize("name", MODULES)
def test_tiled_program_gives_the_interpreters_answer(name):
    fusions = _fusions((TRITON / f"{name}.hlo").read_text(), name)
    assert fusions
    for fusion in fusions:
        _check(fusion, CONFIGS[0])


@pytest.mark.parametrize("config", [*CONFIGS, XLA_DEFAULT],
                         ids=lambda c: f"{c['block_m']}x{c['block_n']}x{c['block_k']}")
def test_ragged_edges_column_major_lhs_and_an_epilogue(config):
    (fusion,) = _fusions(RAGGED, "ragged")
    ops = sorted(i.opcode for i in fusion.fused_computation().instructions if i.opcode != "parameter")
    assert {"convert", "dot", "add", "multiply"} <= set(ops)  # prologue and epilogue are in the kernel
    # the s8 side computes: gemm-fusion-swap-operands made it the lhs, the epilogue reads the N x M
    # dot through a bitcast back to M x N
    program = tiled_program(fusion)
    assert program.lhs.param_type == "s8" and (program.m, program.n) == (200, 300)
    _check(fusion, config)


def test_split_k_with_a_ragged_k():
    (fusion,) = _fusions(RAGGED_SPLIT, "ragged_split")
    program = tiled_program(fusion)
    assert program.batch > 1 and program.k * program.batch >= 3000  # split, K padded to the split
    _check(fusion, {"block_m": 16, "block_n": 32, "block_k": 64})


REVERSED = """HloModule reversed
gemm_body {
  p0 = bf16[32,64]{1,0} parameter(0)
  r = bf16[32,64]{1,0} reverse(p0), dimensions={0}
  p1 = bf16[64,16]{1,0} parameter(1)
  ROOT d = bf16[32,16]{1,0} dot(r, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY e {
  a = bf16[32,64]{1,0} parameter(0)
  b = bf16[64,16]{1,0} parameter(1)
  ROOT f = bf16[32,16]{1,0} fusion(a, b), kind=kCustom, calls=gemm_body,
    backend_config={"fusion_backend_config":{"kind":"__triton_gemm","triton_gemm_config":
      {"block_m":"16","block_n":"16","block_k":"16","split_k":"1","num_stages":"1","num_warps":"2"}}}
}"""


def test_what_the_program_does_not_take_is_said():
    fusion = parse_module(REVERSED, "reversed").entry.root
    with pytest.raises(Unsupported, match="reverse in the prologue"):
        tiled_program(fusion)


# The fusions whose body keeps a broadcast or transpose in XLA's own output (testdata/triton/
# *.xla_gpu.hlo); split-k's reshapes are hoisted out (hoist-fused-bitcasts). sliced_bf16's slice
# is a fusion of its own in XLA's output and in ours.
@pytest.mark.parametrize("name", ["broadcast_lhs_bf16", "matmul_s8", "mlp_bf16", "attention_bf16"])
def test_broadcast_and_transpose_prologues(name):
    fusions = _fusions((TRITON / f"{name}.hlo").read_text(), name)
    ops = set().union(*({i.opcode for i in f.fused_computation().instructions} for f in fusions))
    assert ops & {"broadcast", "transpose"}  # the prologue op is inside the fusion
    assert not ops & {"bitcast", "reshape"}  # and no reshape, as in XLA's
    for fusion in fusions:
        for config in [*CONFIGS, XLA_DEFAULT]:
            _check(fusion, config)


def test_a_split_slice_is_not_in_the_gemm_fusion():
    (fusion,) = _fusions((TRITON / "sliced_bf16.hlo").read_text(), "sliced_bf16")
    assert {i.opcode for i in fusion.fused_computation().instructions} == {"parameter", "dot"}
    for config in [*CONFIGS, XLA_DEFAULT]:
        _check(fusion, config)  # the split GEMM, tile by tile


def _xla_fusions(name: str):
    """The GEMM fusions of XLA:GPU's own optimized module (testdata/triton/NAME.xla_gpu.hlo):
    XLA's nesting, split-k batches and root bitcasts, with XLA's configs."""
    from hlo_common.passes.triton_gemm_fallback import is_triton_gemm_fusion

    module = parse_module((TRITON / f"{name}.xla_gpu.hlo").read_text(), name)
    return [i for c in module.computations for i in c.instructions if is_triton_gemm_fusion(i)]


LARGE = {"matmul_f32_large", "mlp_bf16", "bias_gelu_bf16"}  # thousands of 16 x 8 tiles: 4-9 s each
XLA_MODULES = [pytest.param(n, marks=[pytest.mark.slow] if n in LARGE else []) for n in
               sorted(p.name[:-len(".xla_gpu.hlo")] for p in TRITON.glob("*.xla_gpu.hlo"))]


@pytest.mark.parametrize("name", XLA_MODULES)
def test_xlas_own_gemm_fusions_tile_by_tile_with_xlas_configs(name):
    from hlo_codegen.triton_gemm.config import fusion_config

    for fusion in _xla_fusions(name):
        _check(fusion, fusion_config(fusion))
