"""The in-place dynamic-update-slice emitter (only the update region is written when the output
aliases the updated parameter; the loop emitter otherwise) and the concatenate emitter (a loop
per operand) - XLA's dynamic_update_slice and concatenate emitter tests on the host against the
interpreter, PTX linked for sm_90."""

from __future__ import annotations


import numpy as np
import pytest

from corpus_lib import CORPUS_DIR as CORPUS
from emitter_testlib import check, fusion_of, index_aware_args, run_on_host
from hlo_codegen.emitters import emit_kernel, emitter_kind, get_fusion_emitter
from hlo_common.gpu.ir_emission_utils import strip_bitcasts
from hlo_codegen.emitters.base import fusion_roots
from hlo_codegen.kernel_ir import print_kernel


DUS = """f { p = f32[10,20] parameter(0) u = f32[3,4] parameter(1)
  i = s32[] parameter(2) j = s32[] parameter(3)
  e = f32[3,4] exponential(u)
  ROOT d = f32[10,20] dynamic-update-slice(p, e, i, j) }"""


def _in_place_ids(fusion) -> list[int]:
    ids = list(range(len(fusion.operands)))
    for root in fusion_roots(fusion):
        src = strip_bitcasts(strip_bitcasts(root).operands[0])
        ids.append(src.parameter_number if src.opcode == "parameter" else len(ids))
    return ids


def test_in_place_dus_writes_only_the_update() -> None:
    fusion = fusion_of(DUS)
    assert emitter_kind(fusion)[0] == "in_place_dynamic_update_slice"
    kernel = emit_kernel(fusion, argument_ids=[0, 1, 2, 3, 0])
    assert kernel.grid == (1, 1, 1) and kernel.block == (12, 1, 1)  # one thread per update element
    assert len(kernel.params) == 4
    p = np.full((10, 20), 7.0, np.float32)
    u = np.zeros((3, 4), np.float32)
    for i, j, corner in [(2, 5, (2, 5)), (9, -3, (7, 0)), (-1, 30, (0, 16))]:  # starts are clamped
        args = [p.copy(), u, np.int32(i), np.int32(j)]
        (got,) = run_on_host(fusion, args, kernel, argument_ids=[0, 1, 2, 3, 0])
        want = p.copy()
        want[corner[0]:corner[0] + 3, corner[1]:corner[1] + 4] = 1.0
        np.testing.assert_array_equal(got, want)


def test_dus_without_aliasing_falls_back_to_the_loop_emitter() -> None:
    kernel = check(DUS, "in_place_dynamic_update_slice")
    assert kernel.block[0] * kernel.grid[0] >= 200  # every output element
    check(DUS, argument_ids=[0, 1, 2, 3, 0])


def test_dus_whose_operand_is_read_elsewhere_is_not_in_place() -> None:
    fusion = fusion_of("""f { p = f32[16] parameter(0) i = s32[] parameter(1)
        s = f32[4] slice(p), slice={[0:4]} n = f32[4] negate(s)
        ROOT d = f32[16] dynamic-update-slice(p, n, i) }""")
    assert not get_fusion_emitter(fusion).can_emit_in_place([0, 1, 0])
    check(fusion, argument_ids=[0, 1, 0])


def test_concatenate_emitter_loops_over_operands() -> None:
    kernel = check("""f { a = f32[100,3] parameter(0) b = f32[100,5] parameter(1) c = f32[100,1] parameter(2)
        k = f32[100,9] concatenate(a, b, c), dimensions={1}
        ROOT e = f32[100,9] exponential(k) }""", "concatenate")
    assert kernel.grid[0] * kernel.block[0] == 512  # sized for the largest operand (500 elements)
    assert print_kernel(kernel).count(" loop ") >= 3


def test_many_operand_concatenate_stays_elemental() -> None:
    operands = " ".join(f"a{i} = f32[4] parameter({i})" for i in range(5))
    check(f"f {{ {operands} ROOT c = f32[20] concatenate(a0, a1, a2, a3, a4), dimensions={{0}} }}", "loop")


CONCAT_FILES = sorted(p.name for p in CORPUS.glob("codegen_emitters_tests_concatenate__*.hlo"))
DUS_FILES = sorted(p.name for p in CORPUS.glob("codegen_emitters_tests_dynamic_update_slice__*.hlo"))


@pytest.mark.parametrize("name", CONCAT_FILES)
def test_xla_concatenate_emitter_files(name: str) -> None:
    check((CORPUS / name).read_text(), ptx=False)


@pytest.mark.parametrize("name", DUS_FILES)
def test_xla_dynamic_update_slice_emitter_files(name: str) -> None:
    fusion = fusion_of((CORPUS / name).read_text())
    args = index_aware_args(fusion)
    ids = _in_place_ids(fusion)
    assert get_fusion_emitter(fusion).can_emit_in_place(ids)
    check(fusion, "in_place_dynamic_update_slice", args=args, argument_ids=ids, ptx=False)


def _analysis_launch(fusion) -> tuple[int, int]:
    from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis

    return FusionAnalysis.of_fusion(fusion).launch_dimensions()


def test_large_concatenate_unrolls_as_xla_on_the_largest_operand() -> None:
    # 300 x 1024 = 307200 elements in the largest operand >= 2048 threads x 132 SMs: unroll 4,
    # so 600 blocks of 128 threads (XLA's ComputeLoopFusionConfig), and every operand's loop reads
    # and writes four contiguous elements per thread as one vector
    fusion = fusion_of("""f { a = f32[300,1024] parameter(0) b = f32[300,512] parameter(1)
        k = f32[300,1536] concatenate(a, b), dimensions={1} ROOT e = f32[300,1536] negate(k) }""")
    kernel = check(fusion, "concatenate", ptx=False)
    assert kernel.grid[0] * kernel.grid[1] == 600 and kernel.block == (128, 1, 1)
    assert (kernel.grid[0] * kernel.grid[1], kernel.block[0]) == _analysis_launch(fusion)
    text = print_kernel(kernel)
    assert text.count("load @arg0") == 1 and text.count(": vector<4xf32>") >= 4


def test_large_in_place_dus_unrolls_over_the_update() -> None:
    fusion = fusion_of("""f { p = f32[600,1024] parameter(0) u = f32[300,1024] parameter(1)
        i = s32[] parameter(2) z = s32[] constant(0) n = f32[300,1024] negate(u)
        ROOT d = f32[600,1024] dynamic-update-slice(p, n, i, z) }""")
    ids = [0, 1, 2, 0]
    kernel = emit_kernel(fusion, argument_ids=ids)
    assert (kernel.grid[0] * kernel.grid[1], kernel.block[0]) == (600, 128) == _analysis_launch(fusion)
    assert "vector<4xf32>" in print_kernel(kernel)  # the update is read four elements at a time
    p = np.full((600, 1024), 7.0, np.float32)
    u = np.arange(300 * 1024, dtype=np.float32).reshape(300, 1024)
    (got,) = run_on_host(fusion, [p.copy(), u, np.int32(400)], kernel, argument_ids=ids)
    want = p.copy()
    want[300:600] = -u  # the start is clamped to 600 - 300
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sizes,one_loop_per_operand", [
    ((200, 400, 300), True),  # even offsets: a thread's two unrolled s4 elements fill one byte
    ((201, 399, 300), False),  # an odd offset would split bytes between threads: the loop emitter
])
def test_sub_byte_concatenate(sizes, one_loop_per_operand: bool) -> None:
    params = " ".join(f"p{i} = s4[{n}]{{0:E(4)}} parameter({i})" for i, n in enumerate(sizes))
    names = ", ".join(f"p{i}" for i in range(len(sizes)))
    fusion = fusion_of(f"f {{ {params} ROOT c = s4[{sum(sizes)}]{{0:E(4)}} concatenate({names}), "
                       "dimensions={0} }")
    emitter = get_fusion_emitter(fusion)
    assert (emitter.fallback is None) == one_loop_per_operand
    check(fusion, "concatenate")
