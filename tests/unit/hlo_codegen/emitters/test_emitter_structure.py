"""One test per XLA emitter test of the shared corpus: its CHECK lines, translated to our kernel IR
(`emitter_structure.py`), hold for the kernel our emitter writes for the same fusion, or the file is
listed with a reason in `emitter_structure_failures.txt` (a listed file that passes fails the test,
so the list shrinks as the emitters learn XLA's structure: shared-memory tiles, warp shuffles,
barriers, vector loads, epilogue order)."""

from __future__ import annotations

import pytest

from corpus_lib import CORPUS_DIR, corpus_available  # noqa: E402
from emitter_structure import Pattern, check_kernel, listed_failures, patterns_of, run_file  # noqa: E402

FILES = sorted(p.name for p in CORPUS_DIR.glob("*emitters_tests_*.hlo")) if corpus_available() else []


@pytest.mark.skipif(not FILES, reason=f"corpus not found at {CORPUS_DIR} (set HLO_CORPUS_DIR)")
@pytest.mark.parametrize("name", FILES)
def test_emitter_structure(name):
    result = run_file(CORPUS_DIR / name)
    listed = listed_failures()
    if name in listed:
        assert not result.passed, f"{name} now matches XLA's structure: remove its line from the list"
        return
    assert not result.error, result.error
    assert not result.failures, "missing in our kernel IR:\n" + "\n".join(result.failures)


def test_listed_files_exist():
    if not FILES:
        pytest.skip("corpus not found")
    stale = sorted(set(listed_failures()) - set(FILES))
    assert not stale, f"listed files not in the corpus: {stale}"


# -- the translation itself, on hand-written kernels ---------------------------------------------

ROW_REDUCTION_LIKE_XLA = """
kernel @k grid = [1, 1, 1] block = [64, 1, 1] {
  param @arg0 : f32[64]
  param @arg1 : f32[1] written
  shared @shmem : f32[2]
  func @add(%a: f32, %b: f32) -> (f32) {
    %0 = addf %a, %b : f32
    return %0
  }
  %th_x = thread_id {dim = x, range = [0, 63]} : index
  %1 = load @arg0 %th_x : f32
  %2 = shuffle_reduce @add %1 {max_distance = 16} : f32
  %3 = constant {value = 0} : index
  store @shmem %2, %3
  sync_threads
  %4 = load @shmem %3 : f32
  %5 = shuffle_reduce @add %4 {max_distance = 16} : f32
  %6 = log %5 : f32
  %7 = constant {value = 0} : index
  %8 = cmpi %th_x, %7 {predicate = eq} : i1
  if %8 {
    store @arg1 %6, %7
    yield
  } else {
    yield
  }
}
"""

EPILOGUE_CHECKS = """
// CHECK:      shuffle_reduce
// CHECK:      allocate_shared
// CHECK:      sync_threads
// CHECK:      shuffle_reduce
// CHECK-NEXT: %[[OUT:.*]] = math.log
// CHECK:      predicated_insert %[[OUT]]
"""


def _kernel(text: str):
    from hlo_codegen.kernel_ir import parse_kernel

    return parse_kernel(text.strip() + "\n")


def test_translation_accepts_xla_structure():
    pats, total = patterns_of(EPILOGUE_CHECKS)
    assert total == 6 and len(pats) == 6
    assert check_kernel(_kernel(ROW_REDUCTION_LIKE_XLA), pats) == []


def test_translation_rejects_wrong_order_and_missing_constructs():
    # The epilogue (log) before the second shuffle: the ordered CHECK-NEXT must fail.
    text = ROW_REDUCTION_LIKE_XLA.replace("%6 = log %5 : f32", "%6 = negf %5 : f32")
    failures = check_kernel(_kernel(text), patterns_of(EPILOGUE_CHECKS)[0])
    assert len(failures) == 1 and failures[0].startswith("log")
    pats, _ = patterns_of("// CHECK-NOT: allocate_shared\n// CHECK: shuffle_reduce(%{{.*}}) to 2\n"
                          "// CHECK: vector.transfer_read {{.*}} vector<4xf32>\n")
    failures = check_kernel(_kernel(ROW_REDUCTION_LIKE_XLA), pats)
    assert [f.split(" [")[0] for f in failures] == [
        "no shared buffer", "shuffle_reduce max_distance=2", "load of vector<4xf32>"]


def test_untranslatable_lines_are_skipped():
    pats, total = patterns_of("// CHECK: xla.pure_call @fusion_exp\n// CHECK-SAME: tensor<4xf32>\n"
                              "// CHECK: %[[X:.*]] = tensor.extract %arg0\n")
    assert total == 3 and pats == []
    assert isinstance(patterns_of("// CHECK: sync_threads")[0][0], Pattern)


def test_check_not_holds_between_its_neighbouring_matches():
    # FileCheck's rule: CHECK-NOT covers the stretch from the previous match to the next one.
    one_then_none = patterns_of("// CHECK: xla_gpu.allocate_shared\n"
                                "// CHECK-NOT: xla_gpu.allocate_shared\n")[0]
    assert check_kernel(_kernel(ROW_REDUCTION_LIKE_XLA), one_then_none) == []
    two_tiles = ROW_REDUCTION_LIKE_XLA.replace(
        "  shared @shmem : f32[2]\n", "  shared @shmem : f32[2]\n  shared @other : f32[2]\n").replace(
        "  %4 = load @shmem %3 : f32\n", "  %4 = load @shmem %3 : f32\n  store @other %4, %3\n")
    failures = check_kernel(_kernel(two_tiles), one_then_none)
    assert [f.split(" [")[0] for f in failures] == ["no shared buffer"]
    # a vector load before the first match is not in the range of a CHECK-NOT after it
    pats = patterns_of("// CHECK: sync_threads\n// CHECK-NOT: vector<\n// CHECK: %[[OUT:.*]] = math.log\n")[0]
    vector_first = ROW_REDUCTION_LIKE_XLA.replace(
        "%1 = load @arg0 %th_x : f32", "%1 = load @arg0 %th_x : f32\n  %v = load @arg0 %th_x : vector<2xf32>")
    assert check_kernel(_kernel(vector_first), pats) == []
    vector_between = ROW_REDUCTION_LIKE_XLA.replace(
        "%5 = shuffle_reduce", "%v = load @arg0 %th_x : vector<2xf32>\n  %5 = shuffle_reduce")
    failures = check_kernel(_kernel(vector_between), pats)
    assert [f.split(" [")[0] for f in failures] == ["no vector load or store"]
    assert len(pats) == 3
    vector_after = ROW_REDUCTION_LIKE_XLA.replace("%7 = constant {value = 0} : index",
                                                  "%7 = constant {value = 0} : index\n"
                                                  "  %v = load @arg0 %th_x : vector<2xf32>")
    assert check_kernel(_kernel(vector_after), pats) == []
