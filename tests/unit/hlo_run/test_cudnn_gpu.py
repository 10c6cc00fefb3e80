"""cuDNN convolution calls on a real GPU (issue 20 item 3): every convolution module of the cuDNN
tests as XLA:GPU optimizes it (`testdata/cudnn/*.xla_gpu.hlo`, `__cudnn$conv*` calls that the cuda
target keeps as CudnnConvolutionThunks, run through cudnn-frontend by hlo_run/cudnn_runner.py),
against the interpreter with hlo-run's bounds. Marked `gpu`: skipped, with the reason, where no
GPU is usable (`make bench-gpu` runs them where one is lent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.manifest.thunks import walk
from hlo_run.compare import compare_values

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted((ROOT / "testdata" / "cudnn").glob("*.xla_gpu.hlo"))


@pytest.fixture(scope="module", autouse=True)
def gpu():
    from hlo_run.backends.cuda import CudaBackend

    reason = CudaBackend.unavailable_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")


def _args(module):
    rng = np.random.default_rng(5)
    out = []
    for p in module.entry.parameters:
        dtype = p.shape.element_type.np_dtype
        kind = np.dtype(dtype).kind
        values = rng.integers(-8, 9, p.shape.dims) if kind in "iu" else rng.uniform(-1, 1, p.shape.dims)
        out.append(np.asarray(values).astype(dtype))
    return out


@pytest.mark.parametrize("path", MODULES, ids=[p.name.removesuffix(".xla_gpu.hlo") for p in MODULES])
def test_cudnn_calls_on_the_gpu_match_the_interpreter(path):
    from hlo_run.backends.cuda import CudaDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    text = path.read_text()
    manifest = load_manifest(compile_module(parse_module(text, str(path)), CompileOptions(target="cuda"))
                             .manifest.to_bytes(), "m.json")
    assert any(t.kind == "kCudnnConvolution" for t in walk(manifest.thunks)) or "__cudnn" not in text
    module = parse_module(text, str(path))
    args = _args(module)
    executable = ManifestExecutable(manifest, CudaDevice())
    try:
        got = executable.run(args)
    finally:
        executable.close()
    result = compare_values(got, evaluate(module, args))
    assert result.ok, result.one_line()
