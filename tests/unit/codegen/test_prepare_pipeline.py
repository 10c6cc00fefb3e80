"""hlo-codegen's prepare pipeline (`compiler.prepare_pipeline`): the shared passes of
`hlo_common.passes` in order, each of them a no-op on what hlo-opt's gpu pipeline already did
(flat call graph, wrapped ops, copies inserted), and doing the work on a module that never went
through hlo-opt."""

from pathlib import Path

from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_codegen.compiler import prepare_module, prepare_pipeline

ROOT = Path(__file__).resolve().parents[3]


def test_the_prepare_passes_and_their_order():
    assert prepare_pipeline().pass_names() == [
        "xla-builder-calls", "async-ops-to-calls", "flatten-call-graph", "bounded-dynamic-dimensions",
        "codegen-support-checks", "single-device-collectives", "gemm-fallback", "cudnn-conv-fallback",
        "inline-nested-fusions", "fusion-wrapper", "codegen-copy-insertion", "fusion-wrapper",
    ]


def _changed(module) -> list[str]:
    options = RunOptions(records=[])
    prepare_module(module, options)
    return [r.pass_name for r in options.records if r.changed]


def test_nothing_to_do_on_hlo_opt_output_and_the_wrapping_on_raw_input():
    from hlo_opt.pipelines import build_gpu_pipeline  # only the test runs both tools

    text = (ROOT / "testdata" / "softmax.hlo").read_text()
    optimized = parse_module(text)
    build_gpu_pipeline().run_with(optimized, RunOptions())
    before = print_module(optimized)
    assert _changed(optimized) == []
    assert print_module(optimized) == before

    raw = parse_module(text)
    assert _changed(raw) == ["fusion-wrapper"]
    kernels = [i for i in raw.entry.instructions if i.opcode not in ("parameter", "constant", "fusion")]
    assert kernels == [], [i.name for i in kernels]
