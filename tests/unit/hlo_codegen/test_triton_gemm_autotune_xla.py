"""XLA:GPU takes the autotune results hlo-codegen writes (issue 18 item 2, XLA's side): jaxlib's
deviceless compile, given `--xla_gpu_load_autotune_results_from` a file of `format_entry` entries
under `xla_device_key`, builds every Triton GEMM fusion with the file's config, and a cuBLAS
entry turns the fusion into XLA's cuBLAS call. Slow and outside the default run: it needs a python
with jax's CUDA plugin (XLA_GPU_PYTHON) and XLA's H100 target spec (XLA_GPU_TARGET,
xla/backends/gpu/target_config/specs/h100_sxm.txtpb); without them it is skipped saying so.
`testdata/triton/xla_autotune_check.py` runs the same check over every module (docs/tools.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "testdata" / "triton"))
XLA_PYTHON, TARGET = os.environ.get("XLA_GPU_PYTHON"), os.environ.get("XLA_GPU_TARGET")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (XLA_PYTHON and TARGET), reason="needs XLA_GPU_PYTHON (jax's CUDA "
                                 "plugin) and XLA_GPU_TARGET (XLA's H100 spec)")]
MODULES = ["matmul_f16", "bias_gelu_bf16", "attention_bf16", "int8_bf16"]


@pytest.mark.parametrize("name", MODULES)
def test_xla_builds_its_fusions_with_the_configs_we_wrote(tmp_path, name):
    from xla_autotune_check import our_entries, took_ours, xla_configs

    xla = ROOT / "testdata" / "triton" / f"{name}.xla_gpu.hlo"
    count, text = our_entries(xla.read_text(), xla.name, optimize=False)
    results = tmp_path / "results.txtpb"
    results.write_text(text)
    configs = xla_configs(XLA_PYTHON, TARGET, ROOT / "testdata" / "triton" / f"{name}.hlo", results)
    assert not isinstance(configs, str), configs
    assert len(configs) == count and all(map(took_ours, configs))


@pytest.mark.parametrize("name", ["f8_bf16", "int8_bf16", "skinny_bf16", "mlp_bf16"])
def test_xla_takes_entries_keyed_by_hlo_opts_fusions(tmp_path, name):
    """Keyed by hlo-opt's own fusions (the first three are the ones XLA's GemmFusionSwapOperands
    swaps, as gemm-fusion-swap-operands now does), XLA finds and takes every entry."""
    from xla_autotune_check import our_entries, took_ours, xla_configs

    module = ROOT / "testdata" / "triton" / f"{name}.hlo"
    count, text = our_entries(module.read_text(), module.name)
    results = tmp_path / "results.txtpb"
    results.write_text(text)
    configs = xla_configs(XLA_PYTHON, TARGET, module, results)
    assert not isinstance(configs, str), configs
    assert count and len(configs) == count and all(map(took_ours, configs))


def test_a_cublas_entry_makes_xla_call_cublas(tmp_path):
    import re

    from xla_autotune_check import our_entries

    xla = ROOT / "testdata" / "triton" / "bias_gelu_bf16.xla_gpu.hlo"
    _, text = our_entries(xla.read_text(), xla.name, optimize=False)
    results = tmp_path / "results.txtpb"
    results.write_text(re.sub(r"triton \{[^}]*\}", "gemm { algorithm: -1 }", text))
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_gpu_load_autotune_results_from={results}")
    module = ROOT / "testdata" / "triton" / "bias_gelu_bf16.hlo"
    done = subprocess.run([XLA_PYTHON, str(ROOT / "testdata" / "xla_gpu_compile.py"), "--target", TARGET,
                           "--out-dir", str(tmp_path), str(module)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-500:]
    out = (tmp_path / "bias_gelu_bf16.hlo").read_text()
    assert "__cublas$lt$matmul" in out and "__triton_nested_gemm_fusion" not in out
