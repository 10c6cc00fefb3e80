"""The three fusion gaps left against XLA:GPU (issue 21 item 7), on the fusion bench's own modules
(`testdata/fusion/make_modules.py`): max beside argmax of the same rows, argsort (a sort with an
iota operand), and a threefry dropout. Each launches at most XLA:GPU's kernels (counted by
`bench/kernel_stats.py` against XLA's stored optimized HLO), and goes through the whole pipe:
hlo-opt's GPU pipeline, hlo-codegen for the host (run by hlo-run's runtime and compared with the
interpreter running the module as written) and for cuda (every kernel's PTX linked by
nvJitLink)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from emitter_testlib import nvjitlink_available
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_opt.pipelines import build_gpu_pipeline

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "testdata" / "fusion"
sys.path.insert(0, str(ROOT / "bench"))
from kernel_stats import kernel_stats  # noqa: E402  (bench/kernel_stats.py)

# module -> (the pass that closes its gap, or None where it is a rule inside algsimp)
GAPS = {"reduce_argmax_max": None, "sort_argsort": "sort-iota-fusion",
        "dropout": "post-scheduling-copy-insertion"}


def optimized(name: str, disabled: tuple[str, ...] = ()):
    module = parse_module((DATA / f"{name}.hlo").read_text(), f"{name}.hlo")
    build_gpu_pipeline().run_with(module, RunOptions(disabled_passes=frozenset(disabled)))
    return module


def xla_kernels(name: str) -> int:
    return kernel_stats(parse_module((DATA / "xla" / f"{name}.notriton.hlo").read_text())).count


@pytest.mark.parametrize("name", sorted(GAPS))
def test_launches_at_most_xla_gpu(name):
    ours, xla = kernel_stats(optimized(name)).count, xla_kernels(name)
    assert ours <= xla, (ours, xla)
    if GAPS[name] is not None:  # the pass is what closes the gap
        assert kernel_stats(optimized(name, (GAPS[name],))).count > xla


def test_max_beside_argmax_is_one_two_output_reduction():
    module = optimized("reduce_argmax_max")
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    reduces = [i for i in fusion.fused_computation().instructions if i.opcode == "reduce"]
    assert len(reduces) == 1 and len(reduces[0].operands) == 4


def _run_host(module):
    from hlo_run.backends.host import HostDevice
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.manifest_runtime import ManifestExecutable

    result = compile_module(parse_module(print_module(module), "optimized"), CompileOptions(target="host"))
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    args = make_fake_arguments(module, 0)
    return args, ManifestExecutable(manifest, HostDevice()).run(args)


@pytest.mark.parametrize("name", sorted(GAPS))
def test_host_pipe_matches_the_interpreter_on_the_module_as_written(name):
    from hlo_run.compare import compare_values

    args, got = _run_host(optimized(name))
    want = evaluate(parse_module((DATA / f"{name}.hlo").read_text()), args)
    comparison = compare_values(got, want, 1e-4, 1e-4)  # f32 1e-4; integer outputs exact
    assert comparison.ok, comparison.one_line()
    if name == "sort_argsort":  # a stable argsort: a permutation of each row
        rows = np.sort(np.asarray(got if not isinstance(got, tuple) else got[0]), axis=-1)
        assert (rows == np.arange(rows.shape[-1])).all()


@pytest.mark.parametrize("name", sorted(GAPS))
def test_cuda_kernels_link_for_sm90(name):
    if not nvjitlink_available():
        pytest.skip("nvJitLink (cuda.bindings) is not importable")
    module = optimized(name)
    result = compile_module(parse_module(print_module(module), "optimized"), CompileOptions(target="cuda"))
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    assert manifest.kernels and all(".target sm_90" in k.ptx for k in manifest.kernels.values())
    if name == "sort_argsort":  # one sort kernel, which computes its iota operand itself
        assert len(manifest.kernels) == 1, sorted(manifest.kernels)
