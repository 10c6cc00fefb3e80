"""Launch dimensions of our kernels against XLA:GPU's for the same fusions (issue 10 item 5):
blocks, threads per block and shared-memory bytes, compared with XLA's figures committed in
`tests/data/launch_dims_xla.tsv` (made by `bench/launch_dims_vs_xla.py regenerate` from XLA's
`thunk_sequence.txt` and PTX, without a GPU). Every kernel that differs or cannot be compared is
listed with its reason in `tests/data/launch_dims_differences.txt`; a listed kernel that matches
fails the test, so the list stays true as the emitters learn XLA's launch rules."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
import launch_dims_vs_xla as ld  # noqa: E402
from corpus_lib import corpus_available  # noqa: E402


def test_launch_dims_match_xla_or_are_listed():
    if not corpus_available():
        pytest.skip("corpus not found (set HLO_CORPUS_DIR)")
    assert ld.REFERENCE.exists(), "run bench/launch_dims_vs_xla.py regenerate"
    rows = ld.compare()
    assert len(rows) > 150
    listed = ld.load_differences()
    unlisted = [f"{r.module} {r.kernel}: {r.detail}" for r in rows
                if r.status != "same" and (r.module, r.kernel) not in listed]
    now_same = [f"{r.module} {r.kernel}" for r in rows
                if r.status == "same" and (r.module, r.kernel) in listed]
    seen = {(r.module, r.kernel) for r in rows}
    stale = [f"{m} {k}" for m, k in listed if (m, k) not in seen]
    assert not unlisted, ("launch dimensions differ from XLA's (list them with a reason):\n"
                          + "\n".join(unlisted))
    assert not now_same, "now equal to XLA's, remove from the differences file:\n" + "\n".join(now_same)
    assert not stale, "listed but no longer in the reference:\n" + "\n".join(stale)


def test_every_corpus_emitter_test_and_fusion_module_has_reference_lines():
    ref = ld.load_reference()
    corpus = {f"corpus/{p.name}" for p in ld.corpus_files()} if corpus_available() else set()
    fusion = {f"fusion/{n}" for n in ld.fusion_names()}
    missing = sorted((corpus | fusion) - set(ref))
    assert not missing, f"no XLA reference for {missing[:5]} (run `regenerate -k ...`)"


THUNKS = """\
001: kCustomKernel input_reduce_fusion grid: [4, 1, 1] threads: [256, 1, 1]  shared_memory: 0 bytes
002: kWhile
  003: kKernel loop_add_fusion grid: [1056, 2, 1] threads: [128, 1, 1]  shared_memory: 64 bytes
"""

PTX = """\
.visible .entry input_reduce_fusion(
	.param .u64 input_reduce_fusion_param_0
)
{
	.shared .align 4 .b8 shared_0[32];
	.shared .align 16 .f32 tile[32][33];
	ret;
}
.visible .entry loop_add_fusion(
)
{
	ret;
}
"""


def test_parse_xla_dump_files():
    assert ld.parse_thunk_sequence(THUNKS) == [
        ("input_reduce_fusion", (4, 1, 1), (256, 1, 1), 0),
        ("loop_add_fusion", (1056, 2, 1), (128, 1, 1), 64)]
    assert ld.ptx_static_shared(PTX) == {"input_reduce_fusion": 32 + 4 * 32 * 33, "loop_add_fusion": 0}


def test_launch_compares_products_and_shared_bytes():
    a = ld.Launch((4, 1, 1), (256, 1, 1), 32)
    assert a.key() == ld.Launch((2, 2, 1), (32, 8, 1), 32).key()
    assert a.key() != ld.Launch((4, 1, 1), (256, 1, 1), 0).key()
