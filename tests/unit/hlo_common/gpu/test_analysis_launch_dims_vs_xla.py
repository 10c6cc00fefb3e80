"""Launch dimensions of hlo_common.gpu.hlo_fusion_analysis against XLA's for the fusions XLA:GPU itself
formed for an H100 (xla_h100/*.after_optimizations.hlo: XLA's optimized HLO, metadata and backend
configs dropped; the figures are the grid and block sizes of its thunk_sequence.txt). Covers loop,
row / multi-row / column / small-column reductions, multi-output reductions, tiled and packed
transposes (f32, f16, 3-D, minor dim kept), concatenate, scatter and in-place DUS fusions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hlo_common.gpu.device import H100
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis, fusion_kind_for_emitter
from hlo_common.hlo.ir import parse_module

DATA = Path(__file__).parent / "xla_h100"

# module -> (kernel name in XLA's thunk sequence, blocks, threads per block)
XLA_LAUNCHES = {
    "m2": [
        ("input_reduce_fusion", 512, 256),
        ("loop_multiply_fusion", 4096, 128),
        ("input_reduce_fusion_1", 8, 1024),
        ("loop_exponential_fusion", 2048, 128),
        ("input_transpose_fusion", 2048, 128),
    ],
    "m3": [
        ("input_reduce_fusion", 256, 1024),
        ("loop_negate_fusion", 256, 128),
        ("input_concatenate_fusion", 1000, 128),
        ("wrapped_exponential", 4096, 128),
        ("input_reduce_fusion_1", 16, 1024),
        ("wrapped_divide", 8, 128),
    ],
    "m4": [
        ("input_reduce_fusion_1", 2048, 256),
        ("loop_negate_fusion", 32, 128),
        ("input_reduce_fusion", 128, 1024),
        ("loop_sqrt_fusion", 520, 128),
        ("loop_abs_add_convert_negate_sine_fusion", 2048, 128),
    ],
    "m6": [
        ("input_reduce_fusion_3", 1, 128),
        ("input_reduce_fusion_1", 128, 256),
        ("input_reduce_fusion_5", 128, 256),
        ("input_reduce_fusion_2", 256, 256),
        ("input_reduce_fusion", 1000, 256),
        ("input_reduce_fusion_4", 4, 256),
        ("input_scatter_fusion", 150, 128),
        ("wrapped_transpose_1", 256, 128),
        ("wrapped_dynamic_update_slice", 8, 128),
        ("wrapped_transpose", 512, 128),
        ("input_transpose_fusion", 2048, 128),
    ],
    "m7": [
        ("input_reduce_fusion", 8, 1024),
        ("loop_exponential_fusion", 2048, 128),
        ("loop_sqrt_fusion", 651, 128),
        ("input_transpose_fusion", 256, 128),
        ("loop_transpose_fusion", 4096, 128),
        ("loop_add_fusion", 4096, 128),
    ],
}

CASES = [(m, name, blocks, threads) for m, rows in XLA_LAUNCHES.items() for name, blocks, threads in rows]
_MODULES: dict = {}


def fusions_of(module: str) -> dict:
    if module not in _MODULES:
        m = parse_module((DATA / f"{module}.after_optimizations.hlo").read_text())
        _MODULES[module] = {i.name.replace(".", "_").replace("-", "_"): i
                            for c in m.computations for i in c.instructions if i.opcode == "fusion"}
    return _MODULES[module]


@pytest.mark.parametrize("module,name,blocks,threads", CASES, ids=[f"{m}-{n}" for m, n, _, _ in CASES])
def test_launch_dimensions_match_xla(module, name, blocks, threads):
    fusion = fusions_of(module)[name]
    assert FusionAnalysis.of_fusion(fusion, H100).launch_dimensions() == (blocks, threads)


def test_kinds_of_xla_fusions():
    f = fusions_of("m6")
    names = ("input_reduce_fusion_5", "input_scatter_fusion", "wrapped_transpose",
             "wrapped_dynamic_update_slice")
    kinds = [FusionAnalysis.of_fusion(f[n]).emitter_kind for n in names]
    assert kinds == ["reduction", "scatter", "transpose", "in_place_dynamic_update_slice"]
    assert FusionAnalysis.of_fusion(f["wrapped_transpose"]).transpose.packed  # f16: packed emitter


def test_fusion_kinds_match_xla():
    """fusion_kind_for_emitter of the analysis equals the kind XLA gave each of its 33 fusions."""
    checked = 0
    for path in sorted(DATA.glob("*.after_optimizations.hlo")):
        for c in parse_module(path.read_text()).computations:
            for i in c.instructions:
                if i.opcode == "fusion":
                    assert fusion_kind_for_emitter(FusionAnalysis.of_fusion(i)) == str(i.attrs["kind"]), i.name
                    checked += 1
    assert checked == 33
