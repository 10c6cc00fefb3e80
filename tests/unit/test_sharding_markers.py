"""Sharding markers (`hlo_common/hlo/annotations.py`) on a one-device run: a jax 0.10 module of a
sharded function (`jax.jit` with NamedSharding arguments and results, a with_sharding_constraint)
holds `Sharding` and `xla.sdy.FuncResultSharding` custom calls; the interpreter passes their
operand on, hlo-opt's sharding-remover takes them out, and the host pipe runs the module (it
stopped at `xla.sdy.FuncResultSharding` before)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.interpreter.evaluator import evaluate

# What jax 0.10.2 lowers for tanh(with_sharding_constraint(a @ b)) on a 4x2 mesh (as_text(dialect="hlo")).
SHARDED = (Path(__file__).resolve().parents[2] / "testdata" / "sharding" / "jax_sharded_tanh.hlo").read_text()


def _args():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32)]


def test_the_interpreter_passes_sharding_markers_on():
    a, b = _args()
    got = evaluate(parse_module(SHARDED, "sharded.hlo"), [a, b])
    np.testing.assert_allclose(got, np.tanh(a @ b), rtol=1e-5, atol=1e-6)


def test_hlo_opt_removes_the_markers_and_the_host_runs_the_module():
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_common.manifest.manifest import load_manifest
    from hlo_opt.pipelines import build_gpu_pipeline
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    module = parse_module(SHARDED, "sharded.hlo")
    build_gpu_pipeline().run_with(module, RunOptions())
    text = print_module(module)
    assert "xla.sdy.FuncResultSharding" not in text and 'custom_call_target="Sharding"' not in text
    manifest = compile_module(parse_module(text, "opt.hlo"), CompileOptions(target="host")).manifest
    got = ManifestExecutable(load_manifest(manifest.to_bytes(), "m.json"), HostDevice(), "m").run(_args())
    a, b = _args()
    np.testing.assert_allclose(np.asarray(got).reshape(16, 4), np.tanh(a @ b), rtol=1e-5, atol=1e-6)
