"""GEMM fusions in the cuda manifest as Triton kernels (issue 18 items 3 and 5, without a GPU).

XLA:GPU's own optimized modules (testdata/triton/NAME.xla_gpu.hlo: XLA's fusions and tile
configs) compiled by hlo-codegen for sm_90: every GEMM fusion is one kernel thunk of a Triton
kernel whose name, grid and threads per block equal what XLA's `thunk_sequence.txt` for the same
module says (NAME.xla_thunks.txt, dumped by testdata/xla_gpu_compile.py --thunks); the manifest
carries Triton's PTX, cubin, warps, shared memory and cluster dims, reads back equal, and is byte
for byte the same whatever PYTHONHASHSEED is, with a cold Triton cache; the PTX links for sm_90a
(and the sm_80 compile for sm_80) with nvJitLink and ptxas reports no spills. A config that
cannot be built is a one-line error naming the fusion; without `triton` the fusions fall back to
cuBLAS plus kernels and hlo-codegen says so once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.manifest.manifest import load_manifest
from hlo_common.manifest.thunks import GemmThunk, KernelThunk, walk

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_codegen.triton_gemm.compile import triton_available
from hlo_run.kernel_check import check_manifest_kernels

ROOT = Path(__file__).resolve().parents[3]
TRITON = ROOT / "testdata" / "triton"
NO_TRITON = "the Triton GEMM emitter needs the .[triton] extra"
needs_triton = pytest.mark.skipif(not triton_available(), reason=NO_TRITON)
XLA_LINE = re.compile(r"\] (\S+) grid: \[(\d+), (\d+), (\d+)\] threads: \[(\d+), (\d+), (\d+)\]")
MODULES = sorted(p.name[:-len(".xla_thunks.txt")] for p in TRITON.glob("*.xla_thunks.txt"))


def _compile(name: str, arch: str = "sm_90", **options):
    module = parse_module((TRITON / f"{name}.xla_gpu.hlo").read_text(), f"{name}.xla_gpu.hlo")
    return compile_module(module, CompileOptions(target="cuda", arch=arch, jobs=1, **options))


def _xla_gemm_launches(name: str) -> dict[str, tuple]:
    text = (TRITON / f"{name}.xla_thunks.txt").read_text()
    return {m.group(1): (tuple(map(int, m.group(2, 3, 4))), tuple(map(int, m.group(5, 6, 7))))
            for m in XLA_LINE.finditer(text) if m.group(1).startswith("gemm_fusion")}


def test_xlas_thunk_sequences_name_25_gemm_kernels():
    assert len(MODULES) == 24 and sum(len(_xla_gemm_launches(n)) for n in MODULES) == 25


@needs_triton
@pytest.mark.parametrize("name", MODULES)
def test_gemm_fusions_launch_as_xla_launches_them(name):
    manifest = _compile(name).manifest
    want = _xla_gemm_launches(name)
    ours = {t.kernel: (t.grid, t.block) for t in walk(manifest.thunks) if isinstance(t, KernelThunk)
            and manifest.kernels[t.kernel].num_warps is not None}
    assert ours == want  # every GEMM fusion a Triton kernel, named and launched as XLA's
    check_manifest_kernels(manifest, name)  # what hlo-run checks before it loads a kernel


def _xla_launches(name: str) -> list[tuple]:
    text = (TRITON / f"{name}.xla_thunks.txt").read_text()
    return sorted((tuple(map(int, m.group(2, 3, 4))), tuple(map(int, m.group(5, 6, 7))))
                  for m in XLA_LINE.finditer(text))


SWAPPED_OR_REDUCED = ("f8_bf16", "int8_bf16", "skinny_bf16", "matvec_bf16")


@needs_triton
@pytest.mark.parametrize("name", [n if n in SWAPPED_OR_REDUCED else pytest.param(n, marks=pytest.mark.slow)
                                  for n in MODULES])
def test_hlo_opts_own_modules_launch_as_xla(name):
    """hlo-opt's own output compiled for sm_90: every GEMM kernel's grid and block as in XLA's
    thunk sequence, and every kernel for the modules whose operands gemm-fusion-swap-operands
    swaps or whose dot dot-strength-reduction makes a kInput reduce (skinny_bf16's grid was 4096
    before the swap, XLA's 2048). The other modules run with -m slow."""
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    module = parse_module((TRITON / f"{name}.hlo").read_text(), f"{name}.hlo")
    build_gpu_pipeline().run_with(module, RunOptions())
    manifest = compile_module(module, CompileOptions(target="cuda", arch="sm_90", jobs=1)).manifest
    kernels = [t for t in walk(manifest.thunks) if isinstance(t, KernelThunk)]
    gemm = sorted((t.grid, t.block) for t in kernels if manifest.kernels[t.kernel].num_warps is not None)
    assert gemm == sorted(_xla_gemm_launches(name).values())
    if name in SWAPPED_OR_REDUCED:
        assert sorted((t.grid, t.block) for t in kernels) == _xla_launches(name)
    check_manifest_kernels(manifest, name)


@needs_triton
def test_the_manifest_carries_tritons_kernel_and_reads_back():
    result = _compile("mlp_bf16")
    manifest = result.manifest
    triton = {k: v for k, v in manifest.kernels.items() if v.num_warps is not None}
    assert len(triton) == 2
    for kernel in triton.values():
        # XLA's default 16 x 8 tiles on 2 warps: mma.sync (wgmma needs a warp group of 4)
        assert kernel.cubin[:4] == b"\x7fELF" and ".target sm_90a" in kernel.ptx and "mma.sync" in kernel.ptx
        assert ".debug" not in kernel.ptx and "/tmp" not in kernel.ptx  # nothing of this machine
        assert kernel.block == (32 * kernel.num_warps, 1, 1) and kernel.cluster_dims == (1, 1, 1)
        assert kernel.shared_bytes > 0 and kernel.scratch_params == 2  # Triton 3.x: global, profile scratch
        entry = re.search(r"\.entry \w+\((.*?)\)", kernel.ptx, re.S).group(1)
        assert entry.count(".param") == kernel.num_params + kernel.scratch_params
        assert set(result.kernels[kernel.name].artifacts) == {"triton.py", "ptx"}
    again = load_manifest(manifest.to_bytes(), "m.json")
    assert again.kernels == manifest.kernels and again.to_bytes() == manifest.to_bytes()


@needs_triton
@pytest.mark.parametrize("arch,link", [("sm_90", "sm_90a"), ("sm_80", "sm_80")])
def test_the_ptx_links_with_nvjitlink_and_does_not_spill(arch, link):
    from hlo_codegen.ptx import ptx_to_cubin

    sys.path.insert(0, str(ROOT / "bench"))
    import ptxas_report as pr

    ptxas = pr.find_ptxas()
    for name in ("int8_bf16", "attention_bf16", "matmul_f32", "sliced_bf16"):
        for kernel in _compile(name, arch).manifest.kernels.values():
            if kernel.num_warps is None:
                continue
            assert ptx_to_cubin(kernel.ptx, link)[:4] == b"\x7fELF"
            if ptxas is not None:
                figures, error = pr.run_ptxas(ptxas, kernel.ptx, link)
                assert not error and figures, kernel.name
                for k, f in figures.items():
                    assert f.get("spill_stores", 0) == f.get("spill_loads", 0) == 0, (name, k, f)


@needs_triton
def test_the_manifest_is_byte_deterministic_across_hash_seeds(tmp_path):
    outs = []
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed, TRITON_CACHE_DIR=str(tmp_path / f"cache{seed}"))
        out = tmp_path / f"m{seed}.json"
        subprocess.run([sys.executable, "-m", "hlo_codegen.cli", "--no-cache", "-o", str(out),
                        str(TRITON / "int8_bf16.xla_gpu.hlo")], env=env, check=True)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and b'"triton"' in outs[0]


def _codegen(args, tmp_path, prelude: str = ""):
    code = f"{prelude}from hlo_codegen.cli import main; main({args!r})"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)


def test_without_triton_gemm_fusions_fall_back_to_cublas_plus_kernels(tmp_path):
    # `sys.modules["triton"] = None` is how Python spells a package that cannot be imported
    out = tmp_path / "m.json"
    done = _codegen(["--no-cache", "-o", str(out), str(TRITON / "mlp_bf16.xla_gpu.hlo")], tmp_path,
                    "import sys; sys.modules['triton'] = None; ")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "triton" in line]
    assert len(notes) == 1 and "fall back to cuBLAS plus kernels" in notes[0]  # two fusions, one note
    manifest = load_manifest(out.read_bytes(), "m.json")
    assert all(k.num_warps is None for k in manifest.kernels.values())
    assert sum(isinstance(t, GemmThunk) for t in walk(manifest.thunks)) == 2


def test_fallback_on_request_keeps_the_numbers_path_of_cublas():
    result = _compile("int8_bf16", triton=False)
    kinds = [type(t).__name__ for t in walk(result.manifest.thunks)][1:]
    assert "GemmThunk" in kinds and not any(k.num_warps for k in result.manifest.kernels.values())
    assert not any(i.opcode == "fusion" and "__triton" in str(i.backend_config_data)
                   for i in result.module.entry.instructions)


BAD = {
    "block_m": ('"sizes":["16","8"]', '"sizes":["24","8"]', "block_m=24 is not a power of two"),
    "num_warps": ('"num_warps":"2"', '"num_warps":"3"', "num_warps=3 is not a power of two"),
    "shared": ('"sizes":["16"]}', '"sizes":["8192"]}', "needs 524288 bytes of shared memory"),  # block_k
    "registers": ('"sizes":["16","8"]', '"sizes":["512","512"]', "4096 accumulator elements per thread"),
}


@pytest.mark.parametrize("what", sorted(BAD))
def test_a_config_that_cannot_be_built_is_a_one_line_error(tmp_path, what):
    old, new, message = BAD[what]
    text = (TRITON / "small_bf16.xla_gpu.hlo").read_text()
    assert old in text
    src = tmp_path / "bad.hlo"
    src.write_text(text.replace(old, new))
    out = tmp_path / "m.json"
    done = _codegen(["--no-cache", "-o", str(out), str(src)], tmp_path)
    assert done.returncode == 1 and not out.exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "%gemm_fusion_dot_general.1" in lines[0] and message in lines[0], lines


@needs_triton
def test_a_kernel_triton_refuses_is_said_and_its_fusion_keeps_the_loop_emitter(monkeypatch, capsys):
    from hlo_codegen.triton_gemm import emitter

    render = emitter.render

    def broken(program, config, name):  # Triton's front end refuses an unknown tl function
        return render(program, config, name).replace("tl.dot(", "tl.no_such_dot(")

    monkeypatch.setattr(emitter, "render", broken)
    manifest = _compile("int8_bf16").manifest
    assert all(k.num_warps is None for k in manifest.kernels.values())  # loop kernels only
    assert any(t.profile_annotation == "gemm_fusion_dot" for t in walk(manifest.thunks)
               if isinstance(t, KernelThunk))
    err = capsys.readouterr().err
    assert "Triton could not compile gemm_fusion_dot" in err and "runs as a loop kernel" in err
