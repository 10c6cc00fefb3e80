"""The shared-memory tiled transpose emitter (the "transpose" emitter kind) on the fusions XLA's
transpose emitter takes: prologues and epilogues, 021 / 210 / 1302 permutations, layout-changing
copies, several heroes, side outputs (in place too), partial tiles, 8/16-bit types; plus every
`transpose__*` emitter test of XLA in the corpus. On the host against the interpreter (the host
runs the phases split at the barrier, so a missing `sync_threads` shows) and linked for sm_90.
"""

from __future__ import annotations

import pytest

from corpus_lib import CORPUS_DIR as CORPUS
from emitter_testlib import (
    assert_close, fusion_of, index_aware_args, link_ptx, nvjitlink_available, output_shapes, reference,
    run_on_host,
)
from hlo_codegen.emitters import EMITTERS
from hlo_codegen.emitters.transpose import TransposeFusion
from hlo_codegen.kernel_ir import parse_kernel, print_kernel


def run_transpose_emitter(text_or_fusion, argument_ids=None) -> TransposeFusion:
    """TransposeFusion on the fusion, run on the host and compared with the interpreter."""
    fusion = fusion_of(text_or_fusion) if isinstance(text_or_fusion, str) else text_or_fusion
    emitter = TransposeFusion(fusion)
    kernel = emitter.emit(argument_ids)
    text = print_kernel(kernel)
    assert print_kernel(parse_kernel(text)) == text
    args = index_aware_args(fusion, 0)
    want = reference(fusion, args)
    got = run_on_host(fusion, [a.copy() for a in args], kernel, argument_ids=argument_ids)
    for k, (g, w, s) in enumerate(zip(got, want, output_shapes(fusion))):
        assert_close(g, w, s, None, f"output {k} of %{fusion.name}")
    if nvjitlink_available():
        link_ptx(kernel)
    emitter.kernel_text = text
    return emitter


def test_the_transpose_kind_has_the_tiled_emitter() -> None:
    assert EMITTERS["transpose"] is TransposeFusion


TILED = {
    "021_with_prologue_and_epilogue": """f { p = f32[8,200,300] parameter(0) q = f32[8,300,200] parameter(1)
        e = f32[8,200,300] exponential(p) t = f32[8,300,200] transpose(e), dimensions={0,2,1}
        ROOT a = f32[8,300,200] add(t, q) }""",
    "210": """f { p = f32[64,32,100] parameter(0) ROOT t = f32[100,32,64] transpose(p),
        dimensions={2,1,0} }""",
    "1302_bf16": """f { p = bf16[6,40,50,24] parameter(0)
        ROOT t = bf16[40,24,6,50] transpose(p), dimensions={1,3,0,2} }""",
    "layout_changing_copy": """f { p = f32[100,130]{1,0} parameter(0) n = f32[100,130]{1,0} negate(p)
        ROOT c = f32[100,130]{0,1} copy(n) }""",
    "two_heroes_and_a_side_output": """f { p = f32[96,70] parameter(0) q = s8[96,70] parameter(1)
        t1 = f32[70,96] transpose(p), dimensions={1,0} t2 = s8[70,96] transpose(q), dimensions={1,0}
        n = f32[96,70] negate(p) ROOT r = (f32[70,96], s8[70,96], f32[96,70]) tuple(t1, t2, n) }""",
    "bitcast_epilogue_and_partial_tiles": """f { p = f16[33,65] parameter(0) t = f16[65,33]
        transpose(p), dimensions={1,0}
        c = f32[65,33] convert(t) ROOT b = f32[5,13,33] bitcast(c) }""",
}


@pytest.mark.parametrize("name", sorted(TILED))
def test_tiled_transpose(name: str) -> None:
    emitter = run_transpose_emitter(TILED[name])
    assert emitter.fallback is None
    assert "sync_threads" in emitter.kernel_text and emitter.kernel_text.count("shared") >= 1


def test_binary_epilogue_keeps_the_transpose_hero() -> None:
    fusion = fusion_of("""f { p = f32[64,96] parameter(0) q = f32[96,64] parameter(1)
        t = f32[96,64] transpose(p), dimensions={1,0} ROOT m = f32[96,64] multiply(q, t) }""")
    emitter = run_transpose_emitter(fusion)
    assert emitter.fallback is None and [h.name for h in emitter.heroes] == ["t"]


def test_in_place_side_output_uses_the_loop_emitter() -> None:
    # output 0 shares parameter 0's buffer: blocks still reading tiles must not see it change
    text = """f { p0 = f32[256,128] parameter(0) p1 = f32[256,128] parameter(1) a = f32[256,128] add(p0, p1)
        t = f32[128,256] transpose(p1), dimensions={1,0}
        ROOT r = (f32[256,128], f32[128,256]) tuple(a, t) }"""
    emitter = run_transpose_emitter(text, argument_ids=[0, 1, 0, 2])
    assert "sync_threads" not in emitter.kernel_text
    assert "sync_threads" in run_transpose_emitter(text).kernel_text


@pytest.mark.parametrize("text", [
    # the minor dimension stays minor: nothing to tile
    """f { p = f32[20,30,64] parameter(0) ROOT t = f32[30,20,64] transpose(p), dimensions={1,0,2} }""",
    # packed 4-bit elements
    """f { p = s4[64,32]{1,0:E(4)} parameter(0) ROOT t = s4[32,64]{1,0:E(4)} transpose(p),
        dimensions={1,0} }""",
    # no transpose at all
    """f { p = f32[20,30] parameter(0) ROOT n = f32[20,30] negate(p) }""",
])
def test_what_cannot_be_tiled_runs_as_a_loop(text: str) -> None:
    assert run_transpose_emitter(text).fallback is not None


SLOW = {"transpose_021_vectorized", "multiple_roots_one_shmem_transpose", "transpose_210_vectorized"}
XLA_FILES = sorted(p.name for p in CORPUS.glob("backends_gpu_codegen_emitters_tests_transpose__*.hlo"))


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n.split("__")[1][:-4] in SLOW
                                  else n for n in XLA_FILES])
def test_xla_transpose_emitter_files(name: str) -> None:
    run_transpose_emitter((CORPUS / name).read_text())


def test_packed_transpose_for_small_types() -> None:
    # bf16: v = 2, a 64 x 64 shared tile without padding; the tile is T2 (the dim that becomes
    # the output's minor one) rows by A x T1 (the input's minor dim and the one before it)
    # columns, as XLA's PackedTranspose: s16[2,4,64,10,6] -> 64 x (10 x 6) tiles, 8 blocks
    emitter = run_transpose_emitter("""f { p = s16[2,4,64,10,6] parameter(0)
        ROOT t = s16[4,2,6,10,64] transpose(p), dimensions={1,0,4,3,2} }""")
    assert emitter.fallback is None and emitter.geometry.alloc == 64 and emitter.geometry.padding == 0
    assert emitter.launch_dimensions().blocks_xyz() == (8, 1, 1)
    assert "shared @tile0 : s16[4096]" in emitter.kernel_text
    # each thread reads and writes one 32-bit word of two elements
    assert "load @arg0" in emitter.kernel_text and ": vector<2xi16>" in emitter.kernel_text
    assert "store @arg1 %vec" in emitter.kernel_text


def test_launch_and_shared_memory_are_the_fusion_analysis_figures() -> None:
    from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
    from hlo_opt.fusion.gpu_fusible import shared_memory_usage

    for text in TILED.values():
        fusion = fusion_of(text)
        analysis = FusionAnalysis.of_fusion(fusion)
        kernel = TransposeFusion(fusion).emit()
        assert (kernel.grid[0], kernel.block[0]) == analysis.launch_dimensions()
        assert kernel.shared_memory_bytes == shared_memory_usage(fusion)  # the fusion budget's count


def test_small_type_with_too_few_packed_columns_is_tiled() -> None:
    # bf16[2048,16]: the packed tile would have 16 populated columns (< 10 v = 20, XLA's
    # GetPackedTransposeTileSizes refuses), so XLA's 32 x 33 tiled emitter takes it
    emitter = run_transpose_emitter("""f { p = bf16[2048,16] parameter(0)
        ROOT t = bf16[16,2048] transpose(p), dimensions={1,0} }""")
    assert emitter.fallback is None and emitter.geometry.padding == 1
    assert "shared @tile0 : bf16[1056]" in emitter.kernel_text
    assert emitter.launch_dimensions().blocks_xyz() == (64, 1, 1)
