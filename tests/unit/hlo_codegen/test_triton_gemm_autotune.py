"""GEMM tile configs from XLA's autotune results (issue 18 item 2, without a GPU): a results
file in XLA's AutotuneResults text-proto form (`--xla_gpu_load_autotune_results_from`), keyed by
the canonical text of the fusion's computation (written out by hand below, in XLA's canonical
print: tmp_N names in post order, operand shapes, no backend config) and the device's compute
capability, sets the config the Triton kernel is built and launched with; entries of another
device are ignored; a malformed file is a one-line error naming file:line:col; `--autotune`
without a GPU says that it needs one and exits 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hlo_codegen.triton_gemm.autotune import apply_autotune_results, parse_textproto
from hlo_codegen.triton_gemm.config import fusion_config
from hlo_common.errors import InputError
from hlo_common.hlo.parser import parse_module

TRITON = Path(__file__).resolve().parents[3] / "testdata" / "triton"
SMALL_KEY = ("{\\n  tmp_0 = bf16[16,32]{1,0} parameter(0)\\n  tmp_1 = bf16[32,16]{1,0} parameter(1)\\n"
             "  ROOT tmp_2 = bf16[16,16]{1,0} dot(bf16[16,32]{1,0} tmp_0, bf16[32,16]{1,0} tmp_1), "
             "lhs_contracting_dims={1}, rhs_contracting_dims={0}\\n}")
RESULTS = """version: 3
# XLA writes one entry per fusion and device
results {
  device: "CUDA: 9.0, Cores: 132, GPU clock: 1.98 GHz, Memory bandwidth: 3352 GB/s, L2 cache: 50 MB"
  hlo: "%s"
  result {
    run_time { nanos: 5120 }
    triton { block_m: 32 block_n: 64 block_k: 32 split_k: 1 num_stages: 3 num_warps: 4 num_ctas: 1 }
  }
}
results {
  device: "CUDA: 8.0, Cores: 108, GPU clock: 1.41 GHz, Memory bandwidth: 2039 GB/s, L2 cache: 40 MB"
  hlo: "%s"
  result { triton { block_m: 64 block_n: 16 block_k: 64 split_k: 1 num_stages: 2 num_warps: 2 } }
}
""" % (SMALL_KEY, SMALL_KEY)


def _small():
    module = parse_module((TRITON / "small_bf16.xla_gpu.hlo").read_text(), "small_bf16")
    return module, module.entry.root


@pytest.mark.parametrize("arch,want", [("sm_90", (32, 64, 32, 3, 4)), ("sm_80", (64, 16, 64, 2, 2))])
def test_the_results_entry_of_the_device_sets_the_fusions_config(tmp_path, arch, want):
    path = tmp_path / "results.txtpb"
    path.write_text(RESULTS)
    module, fusion = _small()
    assert fusion_config(fusion)["block_m"] == 16  # XLA's deviceless default before
    assert apply_autotune_results(module, str(path), arch) == 1
    c = fusion_config(fusion)
    assert (c["block_m"], c["block_n"], c["block_k"], c["num_stages"], c["num_warps"]) == want


def test_a_fusion_without_an_entry_keeps_its_config(tmp_path):
    path = tmp_path / "results.txtpb"
    path.write_text(RESULTS.replace("bf16[32,16]{1,0} tmp_1), ", "bf16[32,16]{0,1} tmp_1), "))
    module, fusion = _small()
    assert apply_autotune_results(module, str(path), "sm_90") == 0
    assert fusion_config(fusion)["block_m"] == 16


@pytest.mark.parametrize("text,where", [("results {\n  hlo: \"x\"\n", "f.txtpb:3:1"),
                                        ("version: 3\n}\n", "f.txtpb:2:1"),
                                        ("results { : 3 }", "f.txtpb:1:11")])
def test_a_malformed_results_file_is_one_line_naming_the_place(text, where):
    with pytest.raises(InputError, match=where):
        parse_textproto(text, "f.txtpb")


def test_the_cli_applies_the_results_and_launches_with_them(tmp_path):
    pytest.importorskip("triton")
    results = tmp_path / "results.txtpb"
    results.write_text(RESULTS)
    done = subprocess.run([sys.executable, "-m", "hlo_codegen.cli", "--no-cache", "--stage", "thunks",
                           "--xla_gpu_load_autotune_results_from", str(results),
                           str(TRITON / "small_bf16.xla_gpu.hlo")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # 16 x 16 result in one 32 x 64 tile, 4 warps
    assert "kernel=gemm_fusion_dot_general_1" in done.stdout
    assert "blocks: {1, 1, 1}, threads/block: {128, 1, 1}" in done.stdout


def test_autotune_without_a_gpu_says_it_needs_one(tmp_path):
    from hlo_codegen.triton_gemm.autotune_gpu import gpu_unavailable

    if gpu_unavailable() is None:
        pytest.skip("this machine has a GPU: --autotune would run")
    out = tmp_path / "tuned.txtpb"
    command = [sys.executable, "-m", "hlo_codegen.cli", "--no-cache", "--autotune", str(out), "-o",
               str(tmp_path / "m.json"), str(TRITON / "small_bf16.xla_gpu.hlo")]
    done = subprocess.run(command, capture_output=True, text=True)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "on a GPU" in lines[0], lines
    assert not out.exists() and not (tmp_path / "m.json").exists()


def test_what_autotune_writes_reads_back_for_the_same_fusion(tmp_path):
    from hlo_codegen.triton_gemm.autotune import canonical_text, format_entry

    module, fusion = _small()
    assert canonical_text(fusion.fused_computation()) == SMALL_KEY.replace("\\n", "\n")  # XLA's form
    config = {"block_m": 64, "block_n": 32, "block_k": 64, "split_k": 1, "num_stages": 4, "num_warps": 8}
    path = tmp_path / "tuned.txtpb"
    path.write_text("version: 3\n" + format_entry("CUDA: 9.0", canonical_text(fusion.fused_computation()),
                                                  config, 7.5e-6))
    assert apply_autotune_results(module, str(path), "sm_90a") == 1
    assert {k: fusion_config(fusion)[k] for k in config} == config


def test_a_fusion_without_a_config_gets_xlas_deviceless_default():
    text = (TRITON / "small_bf16.xla_gpu.hlo").read_text()
    start = text.index('"fusion_backend_config":{')
    end = text.index("}}", start) + 2
    module = parse_module(text[:start] + '"fusion_backend_config":{"kind":"__triton_gemm"}' + text[end:], "m")
    config = fusion_config(module.entry.root)
    assert (config["block_m"], config["block_n"], config["block_k"], config["num_warps"]) == (16, 8, 16, 2)


def test_a_config_lands_on_the_dots_m_and_n_through_a_root_bitcast():
    from hlo_codegen.triton_gemm.autotune import set_config
    from hlo_common.passes.triton_gemm_fallback import is_triton_gemm_fusion

    # XLA's skinny_bf16: the dot f32[8,4096,4]{1,2,0} under a root bitcast to f32[8,4,4096]{2,1,0}
    module = parse_module((TRITON / "skinny_bf16.xla_gpu.hlo").read_text(), "skinny")
    (fusion,) = [i for c in module.computations for i in c.instructions if is_triton_gemm_fusion(i)]
    set_config(fusion, {"block_m": 64, "block_n": 16, "block_k": 32, "num_stages": 2, "num_warps": 4})
    config = fusion_config(fusion)
    assert (config["block_m"], config["block_n"], config["block_k"]) == (64, 16, 32)
    tile = fusion.backend_config_data["fusion_backend_config"]["block_level_fusion_config"]["output_tiles"]
    assert tile == [{"sizes": ["1", "16", "64"]}]  # root dims [8, 4 (the dot's N), 4096 (its M)]


def test_hlo_opts_default_configs_for_the_h100_are_xlas_deviceless_ones():
    """jaxlib 0.10.2 gives every GEMM fusion of its H100 deviceless compile the same config, a
    16 x 8 tile of the dot's M and N, block_k 16, 1 stage, 2 warps (no warpgroups: mma.sync, not
    wgmma; docs/tools.md); hlo-opt's fusions for the H100 get the same."""
    from hlo_codegen.triton_gemm.autotune import gemm_fusions
    from hlo_common.gpu.device import H100
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    want = {"block_m": 16, "block_n": 8, "block_k": 16, "split_k": 1, "num_stages": 1, "num_warps": 2}
    xla_count = ours_count = 0
    for path in sorted(TRITON.glob("*.xla_gpu.hlo")):
        xla = parse_module(path.read_text(), path.name)
        for fusion in gemm_fusions(xla):
            assert fusion_config(fusion) == want, (path.name, fusion.name)
            xla_count += 1
        ours = parse_module((TRITON / path.name.replace(".xla_gpu", "")).read_text(), path.name)
        build_gpu_pipeline().run_with(ours, RunOptions(device=H100))
        for fusion in gemm_fusions(ours):
            assert fusion_config(fusion) == want, (path.name, fusion.name)
            ours_count += 1
    assert xla_count == 25 and ours_count == 25
