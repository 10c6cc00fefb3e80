"""`hlo-codegen --arch` selects the device the emitters size launches for (sm_90: H100, 132 SMs;
sm_80: A100, 108 SMs), so launches change exactly where XLA's depend on the device.

Which of XLA's launch rules read the device: the loop unroll factor (ComputeLoopFusionConfig
unrolls only when the loop has at least threads_per_core_limit x core_count elements: 2048 x 132
= 270,336 on the H100, 2048 x 108 = 221,184 on the A100) and the multi-row reduction's vector
size (halved while the reduction would launch fewer blocks of 256 threads than the device has
SMs). A loop below both thresholds and an ordinary row reduction launch the same on both. Every
expected figure below is worked out by hand from those rules.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hlo_codegen.cli import cli
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.gpu.device import A100, H100, device_for_arch
from hlo_common.hlo.parser import parse_module
from hlo_common.manifest.manifest import load_manifest

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"


def _loop(n: int) -> str:
    return f"HloModule loop\nENTRY e {{ p = f32[{n}] parameter(0) ROOT x = f32[{n}] exponential(p) }}"


def _reduce(rows: int, cols: int) -> str:
    return (f"HloModule red\n{ADD}ENTRY e {{ p = f32[{rows},{cols}] parameter(0) c = f32[] constant(0)\n"
            f"  ROOT r = f32[{rows}] reduce(p, c), dimensions={{1}}, to_apply=add }}")


def _launch(text: str, arch: str, target: str = "host") -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(grid, block) of the module's one kernel, compiled by hlo-codegen for `arch`."""
    result = compile_module(parse_module(text), CompileOptions(target=target, arch=arch))
    (kernel,) = result.manifest.kernels.values()
    return tuple(kernel.grid), tuple(kernel.block)


def test_arch_names_the_device_of_its_compute_capability():
    assert device_for_arch("sm_90") is H100 and device_for_arch("sm_90a") is H100
    assert device_for_arch("sm_80") is A100
    # no built-in description: the default device, as hlo-opt without --device
    assert device_for_arch("sm_86") is H100 and device_for_arch("sm_100") is H100


def test_a_loop_between_the_two_unroll_thresholds_unrolls_on_the_a100_only():
    # 256,000 elements: under 270,336 (H100: unroll 1, 2000 blocks of 128 threads), over 221,184
    # (A100: unroll 4 as 4 divides it, 64,000 threads, 500 blocks of 128). On the cuda target: the
    # host runs f32 loops one element a thread whatever the device (LoopFusion.for_host)
    assert _launch(_loop(256_000), "sm_90", "cuda") == ((2000, 1, 1), (128, 1, 1))
    assert _launch(_loop(256_000), "sm_80", "cuda") == ((500, 1, 1), (128, 1, 1))
    assert _launch(_loop(256_000), "sm_80") == ((2000, 1, 1), (128, 1, 1))


@pytest.mark.parametrize("n, blocks", [(1024, 8), (200_000, 1563), (300_000, 586)])
def test_a_loop_on_the_same_side_of_both_thresholds_launches_the_same(n, blocks):
    # 1024 and 200,000 elements: no unroll anywhere (ceil(n / 128) blocks); 300,000: unroll 4 on
    # both (75,000 threads, ceil(75,000 / 128) = 586 blocks)
    assert _launch(_loop(n), "sm_90", "cuda") == _launch(_loop(n), "sm_80", "cuda") \
        == ((blocks, 1, 1), (128, 1, 1))


@pytest.mark.parametrize("ty, blocks", [("f32", 2344), ("bf16", 586)])
def test_the_host_runs_32_bit_loops_one_element_a_thread(ty, blocks):
    # 300,000 elements, unroll 4 on the GPU (586 blocks); on the host f32 one element a thread
    # (ceil(300,000 / 128) = 2344 blocks), bf16 keeps XLA's unroll
    text = _loop(300_000).replace("f32", ty)
    assert _launch(text, "sm_90") == ((blocks, 1, 1), (128, 1, 1))
    assert _launch(text, "sm_90", "cuda") == ((586, 1, 1), (128, 1, 1))


def test_a_multi_row_reduction_keeps_its_vectors_on_the_a100_only():
    # f32[15000,4] reduced over 4 elements per row: the multi-row emitter, vector 2 (64 bits /
    # 32), which would launch ceil(15000 * 2 / 256) = 118 blocks: fewer than the H100's 132 SMs,
    # so there the vector halves to 1 (4 threads per row, 64 rows per block of 256: 235 blocks);
    # not fewer than the A100's 108 (2 threads per row, 128 rows per block: 118 blocks)
    assert _launch(_reduce(15000, 4), "sm_90") == ((235, 1, 1), (256, 1, 1))
    assert _launch(_reduce(15000, 4), "sm_80") == ((118, 1, 1), (256, 1, 1))


def test_a_row_reduction_launches_the_same_on_both():
    # f32[128,1024] over 1024: 1024 / 16 = 64 threads along the row (a multiple of the warp), 4
    # rows per block of 256 threads; vector 2 (f32), tile 8 covers the row: 128 / 4 = 32 blocks
    assert _launch(_reduce(128, 1024), "sm_90") == _launch(_reduce(128, 1024), "sm_80") \
        == ((32, 1, 1), (256, 1, 1))


def test_the_cli_compiles_ptx_for_the_a100_with_its_launches(tmp_path):
    out = tmp_path / "m.json"
    result = CliRunner().invoke(cli, ["--target", "cuda", "--arch", "sm_80", "-o", str(out)],
                                input=_loop(256_000), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    manifest = load_manifest(out.read_bytes(), str(out))
    (kernel,) = manifest.kernels.values()
    assert manifest.arch == "sm_80" and ".target sm_80" in kernel.ptx
    assert (tuple(kernel.grid), tuple(kernel.block)) == ((500, 1, 1), (128, 1, 1))
