"""Triton kernels for the GEMM fusions (hlo_codegen.triton_gemm): every fusion hlo-opt makes of the
testdata/triton modules that the source writer takes compiles with `triton` (the `.[triton]`
extra) for sm_90 and sm_80 without a GPU; on sm_90 the 16-bit float GEMMs use `wgmma` with a
config of whole warpgroups and block_m >= 64 (as autotuning picks on Hopper; XLA's deviceless
default of 2 warps gives `mma.sync`), on sm_80 `mma.sync`; the launch grid covers the result
with the config's tiles, one program per tile on x as XLA launches them; prologues with
broadcasts, slices and transposes under bitcasts compile; the fusions it does not take are
refused with the reason (test_triton_gemm_tiling)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hlo_common.gpu.device import A100, H100
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_opt.pipelines import build_gpu_pipeline

from hlo_codegen.triton_gemm.compile import compile_kernel, compile_kernels, triton_available
from hlo_codegen.triton_gemm.source import Unsupported, kernel_source

# triton is not imported here: only the compiling child loads it (compile.py says why)
NO_TRITON = "the Triton GEMM emitter needs the .[triton] extra"
pytestmark = pytest.mark.skipif(not triton_available(), reason=NO_TRITON)

TRITON = Path(__file__).resolve().parents[3] / "testdata" / "triton"
CONFIG = {"block_m": 64, "block_n": 64, "block_k": 32, "num_warps": 4, "num_stages": 3}
# the last three: a broadcast, a transpose under a bitcast and a slice in the prologue
COMPILED = ["int8_bf16", "f8_bf16", "attention_bf16", "mlp_bf16", "matmul_f32", "transposed_rhs_bf16",
            "broadcast_lhs_bf16", "matmul_s8", "sliced_bf16"]


def _fusions(name: str, device=H100):
    module = parse_module((TRITON / f"{name}.hlo").read_text(), f"{name}.hlo")
    build_gpu_pipeline().run_with(module, RunOptions(device=device))
    return [i for i in module.entry.instructions if i.opcode == "fusion" and i.name.startswith("gemm_fusion")]


@pytest.mark.parametrize("name", COMPILED)
@pytest.mark.parametrize("arch,device,mma", [("sm_90", H100, "wgmma"), ("sm_80", A100, "mma.sync")])
def test_kernels_compile_for_hopper_and_ampere(name, arch, device, mma):
    for fusion in _fusions(name, device):  # fusions hlo-opt makes for that device
        source = kernel_source(fusion, CONFIG)
        sixteen_bit = any(o.shape.element_type.name in ("bf16", "f16") for o in fusion.operands)
        kernel = compile_kernel(source, arch)
        assert f".target {arch}" in kernel.ptx
        eight_bit = any(o.shape.element_type.name == "s8" for o in fusion.operands)
        assert (mma in kernel.ptx) == (sixteen_bit or eight_bit), fusion.name  # tensor cores; f32: ieee FMA
        assert kernel.num_warps == 4 and kernel.shared_bytes > 0 and kernel.cubin[:4] == b"\x7fELF"
        m, n = fusion.shape.dims[-2:]
        batch = math.prod(fusion.shape.dims[:-2])
        assert source.grid == (-(-m // 64) * -(-n // 64) * batch, 1, 1)  # XLA's: one program per tile


# (block_m, block_n, block_k, num_stages, num_warps) -> wgmma on sm_90 (docs/tools.md): Triton 3.9
# takes Hopper's warpgroup MMA when the warps make whole warpgroups (4, 8) and block_m is 64 or more
WGMMA_RULE = [((16, 8, 16, 1, 2), False),  # XLA 0.10's deviceless default, also for sm_90
              ((64, 64, 32, 3, 2), False), ((32, 32, 32, 3, 4), False), ((32, 128, 32, 3, 8), False),
              ((64, 16, 32, 3, 4), True), ((64, 32, 32, 3, 4), True), ((128, 128, 64, 3, 8), True)]


@pytest.mark.parametrize("name", ["matmul_bf16", "matmul_f16"])
def test_which_configs_take_wgmma_on_hopper(name):
    (fusion,) = _fusions(name)
    keys = ("block_m", "block_n", "block_k", "num_stages", "num_warps")
    sources = [kernel_source(fusion, dict(zip(keys, c)), f"k{i}") for i, (c, _) in enumerate(WGMMA_RULE)]
    hopper, ampere = compile_kernels(sources, "sm_90"), compile_kernels(sources, "sm_80")
    assert [("wgmma" in k.ptx) for k in hopper] == [want for _, want in WGMMA_RULE]
    assert all(("mma.sync" in k.ptx) != want for k, (_, want) in zip(hopper, WGMMA_RULE))
    assert all("mma.sync" in k.ptx and "wgmma" not in k.ptx for k in ampere)


def test_f8e4m3fn_stays_out_of_ampere_fusions():
    # XLA's Triton takes f8e4m3fn from sm_89 on: on an A100 the convert is left outside the GEMM
    (hopper,), (ampere,) = _fusions("f8_bf16", H100), _fusions("f8_bf16", A100)
    assert "f8e4m3fn" in [o.shape.element_type.name for o in hopper.operands]
    assert [o.shape.element_type.name for o in ampere.operands] == ["bf16", "bf16"]


def test_the_kernel_reads_through_converts_and_writes_the_epilogue():
    (fusion,) = _fusions("int8_bf16")
    text = kernel_source(fusion, CONFIG).text
    assert text.count("tl.load(") == 2 and ".to(tl.bfloat16)" in text and "tl.dot(a, x" in text
    first, _ = sorted(_fusions("mlp_bf16"), key=lambda f: f.shape.dims[-1], reverse=True)
    text = kernel_source(first, CONFIG).text
    assert text.count("tl.load(") == 3 and "+ " in text.split("v = acc")[1]  # the bias add after the dot


def _c_level_handlers() -> dict[int, int]:
    """The process's sigaction handler address for SIGINT, SIGTERM and SIGHUP (Linux x86-64:
    sa_handler is the first field of struct sigaction)."""
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    out = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        buf = (ctypes.c_ulong * 40)()
        assert libc.sigaction(sig, None, buf) == 0
        out[sig] = buf[0]
    return out


def test_a_compile_leaves_the_signal_handlers_as_they_were(tmp_path, monkeypatch):
    # libtriton's LLVM installs C-level SIGINT/SIGTERM/SIGHUP handlers when it compiles; they must
    # not reach this process (hlo-codegen's Ctrl-C handling, the CLI's stop signals): the compile
    # runs in a child
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # a cold cache: the compiler really runs
    before = _c_level_handlers()
    (fusion,) = _fusions("small_bf16")
    compile_kernel(kernel_source(fusion, {"block_m": 16, "block_n": 16, "block_k": 16, "num_warps": 2,
                                          "num_stages": 1}))
    assert _c_level_handlers() == before
