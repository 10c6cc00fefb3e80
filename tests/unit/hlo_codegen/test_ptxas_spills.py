"""No kernel spills registers or uses local memory (issue 10 item 5): `ptxas -arch=sm_90 -v` (from
the `nvidia-cuda-nvcc` wheel of the test extra) on the PTX of our kernels, through
`bench/ptxas_report.py`. The default run covers testdata/*.hlo (hlo-opt | hlo-codegen) and a few
corpus emitter tests of every kind; the slow run covers testdata/fusion/ and every emitter test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import ptxas_report as pr  # noqa: E402

PTXAS = pr.find_ptxas()
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas not found: install the test extra "
                                 "(nvidia-cuda-nvcc) or set PTXAS")
DEFAULT_CORPUS = ("reduce_row__mof_epilogue", "reduce_column__odd_sizes", "transpose__epilogue",
                  "scatter__add.hlo", "loop__vectorize_x4", "concatenate__concat_1d",
                  "dynamic_update_slice__simple")


def _assert_clean(reports):
    assert reports
    bad = [f"{r.module} {r.kernel}: " + (r.error or f"{r.spill_stores}B spill st, {r.spill_loads}B spill ld, "
                                                   f"{r.local_memory}B lmem") for r in reports if r.bad]
    assert not bad, "kernels that spill, use local memory or fail to compile:\n" + "\n".join(bad)


@needs_ptxas
def test_testdata_modules_do_not_spill():
    paths = pr.module_paths(("testdata",))
    _assert_clean([r for kind, p in paths for r in pr.report_module(PTXAS, kind, p, "sm_90")])


@needs_ptxas
@pytest.mark.parametrize("name", DEFAULT_CORPUS)
def test_corpus_emitter_kernels_do_not_spill(name):
    paths = pr.module_paths(("corpus",), name)
    if not paths:
        pytest.skip("corpus not found (set HLO_CORPUS_DIR)")
    _assert_clean([r for kind, p in paths for r in pr.report_module(PTXAS, kind, p, "sm_90")])


@needs_ptxas
@pytest.mark.slow
def test_every_module_does_not_spill():
    paths = pr.module_paths(pr.SETS)
    _assert_clean([r for kind, p in paths for r in pr.report_module(PTXAS, kind, p, "sm_90")])


VERBOSE = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'loop_add_fusion' for 'sm_90'
ptxas info    : Function properties for loop_add_fusion
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 0 barriers, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'reduction_big' for 'sm_90'
ptxas info    : Function properties for reduction_big
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 48 bytes lmem, 368 bytes cmem[0]
"""


def test_parse_ptxas_verbose_output():
    got = pr.parse_ptxas_output(VERBOSE)
    assert got["loop_add_fusion"] == dict(registers=16, spill_stores=0, spill_loads=0, stack_frame=0,
                                          local_memory=0)
    assert got["reduction_big"] == dict(registers=255, spill_stores=40, spill_loads=36, stack_frame=48,
                                        local_memory=48)
    assert pr.KernelReport("m", "k", **got["reduction_big"]).bad
    assert not pr.KernelReport("m", "k", **got["loop_add_fusion"]).bad
