"""The facts hlo-opt's fusion passes decide with, against the kernels hlo-codegen emits for the
same fusions: every fusion of every testdata module, optimized for the H100 and for the A100 and
compiled for the matching arch (sm_90, sm_80) with the buffer assignment's real arguments.

- shared memory: the fusion budget's count (gpu_fusible.shared_memory_usage, XLA's
  SharedMemoryUsage) is what a loop, transpose, concatenate, scatter or in-place DUS kernel
  allocates, and an upper bound for reduction and normalization kernels (XLA budgets a column
  reduction's tile at the widest vector, a row reduction one slot per warp);
- launch dimensions: the cost model's (FusionAnalysis.launch_dimensions, what
  GpuPerformanceModel times) are the kernel's grid and block, blocks and threads as products.

Sort fusions are left out of both, as in XLA: they are kCustom, never fused further, so no
budget counts them, and XLA's cost model gives them its fallback launch (ceil(n / 128) blocks of
128) because no fusion emitter of its own launches them; our sort kernel launches one block per
row. Triton GEMM fusions (emitter kind "custom") are left out of the budget for the same reason:
kCustom, never fused further; their kernel's shared memory is the GEMM emitter's own.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hlo_codegen.buffer_assignment import assign_buffers
from hlo_codegen.compiler import prepare_module
from hlo_codegen.kernel_backend import EmitterBackend
from hlo_codegen.thunk_emitter import CompiledKernel, ThunkEmitter
from hlo_common.gpu.device import A100, H100
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_common.manifest.manifest import ManifestKernel
from hlo_opt.fusion.gpu_fusible import shared_memory_usage
from hlo_opt.pipelines import build_gpu_pipeline

ROOT = Path(__file__).resolve().parents[4]
MODULES = sorted(ROOT.glob("testdata/*.hlo")) + sorted(ROOT.glob("testdata/fusion/*.hlo"))
ARCHS = {"sm_90": H100, "sm_80": A100}
EXACT_SHARED = ("loop", "transpose", "concatenate", "scatter", "in_place_dynamic_update_slice")
BOUNDED_SHARED = ("reduction", "normalization")


class _RecordingBackend(EmitterBackend):
    """The emitters as hlo-codegen runs them for the GPU, keeping (fusion, kernel IR) instead of
    lowering (the host target sizes loops of 32-bit elements its own way: LoopFusion.for_host)."""

    def __init__(self, arch: str):
        super().__init__("cuda", arch)
        self.kernels: list = []
        self._fusion = None

    def compile(self, fusion, args, unique_name):
        self._fusion = fusion
        return super().compile(fusion, args, unique_name)

    def _lower(self, kernel, num_args: int):
        self.kernels.append((self._fusion, kernel))
        record = ManifestKernel(kernel.name, tuple(kernel.grid), tuple(kernel.block),
                                kernel.shared_memory_bytes, num_args)
        return CompiledKernel(record, tuple(range(num_args))), None  # nothing left compiling


def _fusions_and_kernels(path: Path, arch: str) -> list:
    """(fusion, its emitted kernel, its analysis) of every kernel launch of `path`, optimized by
    hlo-opt's gpu pipeline for the arch's device, then prepared and emitted as hlo-codegen does."""
    device = ARCHS[arch]
    module = parse_module(path.read_text(), str(path))
    build_gpu_pipeline().run_with(module, RunOptions(device=device))
    prepare_module(module)
    backend = _RecordingBackend(arch)
    ThunkEmitter(module, assign_buffers(module), backend).emit_entry()
    assert backend.device is device
    return [(f, k, FusionAnalysis.of_fusion(f, device)) for f, k in backend.kernels]


CASES = [pytest.param(path, arch, id=f"{path.stem}-{arch}") for path in MODULES for arch in ARCHS]


@pytest.mark.parametrize("path,arch", CASES)
def test_the_shared_memory_budget_covers_the_emitted_kernel(path, arch):
    for fusion, kernel, analysis in _fusions_and_kernels(path, arch):
        kind, budget = analysis.emitter_kind, shared_memory_usage(fusion, ARCHS[arch])
        used = kernel.shared_memory_bytes
        if kind in EXACT_SHARED:
            assert used == budget, (fusion.name, kind, used, budget)
        elif kind in BOUNDED_SHARED:
            assert used <= budget, (fusion.name, kind, used, budget)
        else:
            assert kind == "sort" or (kind == "custom" and fusion.name.startswith("gemm_fusion")), \
                (fusion.name, kind)


@pytest.mark.parametrize("path,arch", CASES)
def test_the_cost_model_launches_as_the_emitted_kernel(path, arch):
    for fusion, kernel, analysis in _fusions_and_kernels(path, arch):
        if analysis.emitter_kind == "sort":
            continue
        emitted = (math.prod(kernel.grid), math.prod(kernel.block))
        assert analysis.launch_dimensions() == emitted, (fusion.name, analysis.emitter_kind)


def test_every_emitter_kind_of_the_testdata_is_compared():
    # the sweep above reaches each kind it has a rule for (else a rule would hold vacuously)
    kinds = {a.emitter_kind for path in MODULES for _, _, a in _fusions_and_kernels(path, "sm_90")}
    assert kinds == set(EXACT_SHARED) | set(BOUNDED_SHARED) | {"sort", "custom"}


def test_the_budget_counts_tiles_in_nested_fusions_and_transposing_copies():
    m = parse_module("""
HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
fc { p = f32[64,256] parameter(0) z = f32[] constant(0)
  ROOT col = f32[256] reduce(p, z), dimensions={0}, to_apply=add }
nest { r = f32[64,256] parameter(0) ROOT inner = f32[256] fusion(r), kind=kInput, calls=fc }
fcopy { q = f32[256,64]{1,0} parameter(0) ROOT c = f32[256,64]{0,1} copy(q) }
ENTRY e { x = f32[64,256] parameter(0) y = f32[256,64] parameter(1)
  col = f32[256] fusion(x), kind=kInput, calls=fc
  outer = f32[256] fusion(x), kind=kInput, calls=nest
  c = f32[256,64]{0,1} fusion(y), kind=kInput, calls=fcopy
  ROOT r = (f32[256], f32[256], f32[256,64]{0,1}) tuple(col, outer, c) }""")
    col, outer, c = (m.entry.instruction(k) for k in ("col", "outer", "c"))
    assert shared_memory_usage(col) == 4 * 32 * 33 * 4  # a column reduction's widest tile
    assert shared_memory_usage(outer) == shared_memory_usage(col)  # XLA counts nested fusions
    assert shared_memory_usage(c) == 32 * 33 * 4  # a layout-changing copy is a tiled transpose
    assert shared_memory_usage(m.entry.root) == 0
