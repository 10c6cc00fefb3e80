"""`hlo-codegen --autotune` without a GPU (issue 18 item 2): the search of XLA's GemmFusionAutotuner
with the timer replaced by the test's own. Every GEMM fusion's candidates are the Triton configs
the device can run, then cuBLAS; the fastest is kept (a tie: the earlier candidate); a Triton
winner becomes the fusion's config, a cuBLAS winner dissolves the fusion; the results file holds
one entry per distinct fusion under XLA's device string (`gemm { algorithm: -1 }` for cuBLAS), and
a later compile on a machine without a GPU, given that file, builds the chosen form: a cuBLAS
GemmThunk plus kernels for one fusion, the Triton kernel of the chosen config for the other.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_common.gpu.device import A100, H100
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_opt.pipelines import build_gpu_pipeline

from hlo_codegen.triton_gemm.autotune import (CUBLAS, apply_autotune_results, canonical_text, gemm_fusions,
                                              load_autotune_results, xla_device_key)
from hlo_codegen.triton_gemm.autotuner import autotune_module, candidates
from hlo_codegen.triton_gemm.config import fusion_config, shared_memory_bytes

TRITON = Path(__file__).resolve().parents[3] / "testdata" / "triton"
WIDE = {"block_m": 64, "block_n": 128, "block_k": 32, "split_k": 1, "num_stages": 3, "num_warps": 4}


def _mlp():
    """hlo-opt's mlp_bf16 for the H100: two GEMM fusions, as XLA's (testdata/triton/
    mlp_bf16.xla_gpu.hlo): gemm_fusion_dot_general.2 (bias in its epilogue) and gemm_fusion_dot,
    the second dot split 8 ways along K (its reduce a loop fusion after it)."""
    module = parse_module((TRITON / "mlp_bf16.hlo").read_text(), "mlp_bf16.hlo")
    build_gpu_pipeline().run_with(module, RunOptions(device=H100))
    return module


class FakeTimer:
    """cuBLAS fastest for the fusion of dot_general.2, the WIDE config for the others; every
    other candidate 1 ms. Records what it was asked to time."""

    def __init__(self):
        self.asked: list[tuple[str, list]] = []

    def seconds(self, fusion, listed, arch):
        self.asked.append((fusion.name, list(listed)))
        fast = CUBLAS if fusion.name == "gemm_fusion_dot_general.2" else WIDE
        return [1e-5 if c == fast else 1e-3 for c in listed]


def test_the_candidates_are_the_configs_the_device_runs_then_cublas():
    (fusion, *_) = gemm_fusions(_mlp())
    for device in (H100, A100):
        listed = candidates(fusion, device)
        assert listed[-1] == CUBLAS and CUBLAS not in listed[:-1]
        assert len(listed) > 5 and all(shared_memory_bytes(fusion, c) <= device.shared_memory_per_block_optin
                                       for c in listed[:-1])
    tight = candidates(fusion, A100.__class__(**{**A100.__dict__, "shared_memory_per_block_optin": 40000}))
    assert len(tight) < len(candidates(fusion, A100))  # configs whose tiles do not fit are left out


def test_the_fastest_candidate_is_kept_and_written_as_xla_writes_it(tmp_path):
    module, timer, out = _mlp(), FakeTimer(), tmp_path / "tuned.txtpb"
    keys = {f.name: canonical_text(f.fused_computation()) for f in gemm_fusions(module)}
    won = autotune_module(module, "sm_90", str(out), timer=timer)
    assert [name for name, _ in timer.asked] == ["gemm_fusion_dot_general.2", "gemm_fusion_dot"]
    assert all(listed[-1] == CUBLAS and WIDE in listed for _, listed in timer.asked)
    assert won == {keys["gemm_fusion_dot_general.2"]: CUBLAS, keys["gemm_fusion_dot"]: WIDE}
    # the module as it compiles now: the first fusion dissolved (its dot a plain dot), the other tuned
    (left,) = gemm_fusions(module)
    assert left.name == "gemm_fusion_dot" and fusion_config(left) == WIDE
    assert [i.opcode for i in module.entry.instructions].count("dot") == 1
    entries = load_autotune_results(str(out))
    assert {(d, h, c if c == CUBLAS else tuple(sorted(c.items()))) for d, h, c in entries} == {
        (xla_device_key(H100), keys["gemm_fusion_dot_general.2"], CUBLAS),
        (xla_device_key(H100), keys["gemm_fusion_dot"],
         tuple(sorted({**WIDE, "num_ctas": 1}.items())))}
    text = out.read_text()
    assert text.startswith("version: 3\n") and "gemm { algorithm: -1 }" in text
    assert not list(tmp_path.glob("*.tmp"))


def test_a_tie_goes_to_the_earlier_candidate(tmp_path):
    class Even:
        def seconds(self, fusion, listed, arch):
            return [1e-4] * len(listed)

    module = _mlp()
    (first, *_) = gemm_fusions(module)
    expected = candidates(first, H100)[0]
    won = autotune_module(module, "sm_90", str(tmp_path / "t.txtpb"), timer=Even())
    assert set(map(str, won.values())) == {str(expected)}


def test_a_later_compile_without_a_gpu_builds_what_won(tmp_path):
    pytest.importorskip("triton")
    module, out = _mlp(), tmp_path / "tuned.txtpb"
    source = tmp_path / "mlp.hlo"
    source.write_text(print_module(module))  # hlo-opt's output, before tuning
    autotune_module(module, "sm_90", str(out), timer=FakeTimer())
    done = subprocess.run([sys.executable, "-m", "hlo_codegen.cli", "--no-cache", "--stage", "thunks",
                           "--xla_gpu_load_autotune_results_from", str(out), str(source)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    gemms = [line for line in lines if "kGemm" in line.split("\t")[0]]
    assert len(gemms) == 1 and "profile_annotation=dot_general.2" in gemms[0]  # the dissolved fusion's dot
    (triton,) = [line for line in lines if "kernel=gemm_fusion_dot," in line]
    # XLA's fusion writes f32[8,256,512] (split 8): each of the 8 parts in 64 x 128 tiles
    blocks = 8 * math.ceil(256 / 64) * math.ceil(512 / 128)
    assert f"blocks: {{{blocks}, 1, 1}}, threads/block: {{128, 1, 1}}" in triton
    assert "gemm_fusion_dot_general.2" not in done.stdout


def test_hlo_runs_profile_sums_to_the_cublas_time():
    from hlo_codegen.triton_gemm.autotune_gpu import fusion_module_text, profile_seconds

    stderr = ("cuda: 10 runs: min 0.000210s, median 0.000230s, mean 0.000231s, total 0.002310s\n"
              "last run, per step:\n  dot_general.2          0.012 ms\n  wrapped_add             0.003 ms\n")
    assert profile_seconds(stderr) == pytest.approx(15e-6)
    assert profile_seconds("cuda: 1 runs\n") is None
    (fusion, *_) = gemm_fusions(_mlp())
    extracted = parse_module(fusion_module_text(fusion), "extracted")
    assert extracted.entry.root.shape == fusion.shape
    assert sorted(i.opcode for i in extracted.entry.instructions) == sorted(
        i.opcode for i in fusion.fused_computation().instructions)


def test_a_file_in_xlas_own_form_loads_both_kinds_of_result(tmp_path):
    """Entries as XLA 0.10's SerializeAutotuneEntry writes them (autotuner_cache.cc): its device
    string, its cache version (45 in jaxlib 0.10.2), TritonGemmKey with the fields of that XLA."""
    module = _mlp()
    first, second = gemm_fusions(module)
    entry = ('results {\n  device: "%s"\n  hlo: %s\n  result {\n    run_time {\n      nanos: 41000\n    }\n'
             '    %s\n  }\n  version: 45\n}\n')
    triton = ("triton {\n      block_m: 128\n      block_n: 64\n      block_k: 32\n      split_k: 1\n"
              "      num_stages: 4\n      num_warps: 8\n      num_ctas: 1\n      is_tma_allowed: false\n"
              "      is_warp_specialization_allowed: false\n    }")
    quoted = [json.dumps(canonical_text(f.fused_computation())) for f in (first, second)]
    path = tmp_path / "xla.txtpb"
    gemm = "gemm {\n      algorithm: -1\n    }"
    path.write_text("version: 3\n" + entry % (xla_device_key(H100), quoted[0], gemm)
                    + entry % (xla_device_key(H100), quoted[1], triton))
    assert apply_autotune_results(module, str(path), "sm_90") == 2
    (left,) = gemm_fusions(module)
    assert left is second
    want = {"block_m": 128, "block_n": 64, "block_k": 32, "num_stages": 4, "num_warps": 8}
    assert {k: fusion_config(left)[k] for k in want} == want
    assert [i.opcode for i in module.entry.instructions].count("dot") == 1  # the first one's, for cuBLAS


def test_xla_device_key_is_xlas_string_for_its_h100_spec():
    # XLA's DeviceDescriptionToCacheKey of xla/backends/gpu/target_config/specs/h100_sxm.txtpb, as
    # jaxlib 0.10.2 matched it (docs/tools.md)
    assert xla_device_key(H100) == ("CUDA: 9.0, Cores: 132, GPU clock: 1.98 GHz, Memory bandwidth: "
                                    "3352 GB/s, L2 cache: 50 MB, DNN version: 9.8.0")
    assert xla_device_key(A100).startswith("CUDA: 8.0, Cores: 108, GPU clock: 1.41 GHz, Memory bandwidth: "
                                           "2039 GB/s, L2 cache: 40 MB")


def _small_results(tmp_path, config) -> tuple:
    from hlo_codegen.triton_gemm.autotune import format_entry

    module = parse_module((TRITON / "small_bf16.xla_gpu.hlo").read_text(), "small_bf16")
    (fusion,) = gemm_fusions(module)
    path = tmp_path / "bad.txtpb"
    key = canonical_text(fusion.fused_computation())
    path.write_text("version: 3\n" + format_entry(xla_device_key(H100), key, {**WIDE, **config}, 1e-5))
    return module, path


@pytest.mark.parametrize("config,says", [
    ({"block_m": 48}, "block_m=48 is not a power of two"),
    ({"block_m": 256, "block_n": 256, "block_k": 256, "num_stages": 4},
     "needs 1048576 bytes of shared memory"),
    ({"split_k": 4}, "split_k=4")])
def test_an_entry_the_device_cannot_run_is_an_error_naming_file_and_fusion(tmp_path, config, says):
    from hlo_common.errors import HloError

    module, path = _small_results(tmp_path, config)
    with pytest.raises(HloError) as caught:
        apply_autotune_results(module, str(path), "sm_90")
    assert str(caught.value).startswith(f"{path}: the entry for %gemm_fusion_dot_general.1: ")
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_the_cli_says_it_in_one_line_and_writes_nothing(tmp_path):
    _, path = _small_results(tmp_path, {"block_n": 24})
    out = tmp_path / "m.json"
    done = subprocess.run([sys.executable, "-m", "hlo_codegen.cli", "--no-cache", "-o", str(out),
                           "--xla_gpu_load_autotune_results_from", str(path),
                           str(TRITON / "small_bf16.xla_gpu.hlo")], capture_output=True, text=True)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and not out.exists()
    assert "%gemm_fusion_dot_general.1" in lines[0] and "block_n=24" in lines[0] and str(path) in lines[0]


def test_the_gpu_timer_writes_xlas_key_string_from_the_drivers_attributes():
    """An H100 SXM as the CUDA driver describes it (clock and memory clock in kHz, bus width in
    bits) gives the string XLA derives from its spec; no GPU needed, the driver is a stand-in."""
    from types import SimpleNamespace

    from hlo_codegen.triton_gemm.autotune_gpu import GpuTimer

    values = {"MULTIPROCESSOR_COUNT": 132, "CLOCK_RATE": 1980000, "L2_CACHE_SIZE": 52428800,
              "MEMORY_CLOCK_RATE": 2619000, "GLOBAL_MEMORY_BUS_WIDTH": 5120,
              "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0}
    attributes = SimpleNamespace(**{f"CU_DEVICE_ATTRIBUTE_{k}": k for k in values})
    driver = SimpleNamespace(CUdevice_attribute=attributes,
                             cuDeviceGetAttribute=lambda name, device: (0, values[name]))
    timer = object.__new__(GpuTimer)
    timer.gpu = SimpleNamespace(d=driver, device=0)
    key = timer.device_key("sm_90")
    assert key.rsplit(", DNN version: ", 1)[0] == xla_device_key(H100).rsplit(", DNN version: ", 1)[0]
