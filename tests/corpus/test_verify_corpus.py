"""Corpus tier `verify`: every corpus module that parses must pass the HLO verifier.

The declared shapes in the corpus were written by XLA (or by people checked by XLA), so this tier
also checks shape inference against XLA's own results for ~24k instructions. Modules that XLA
itself would reject are listed, with the reason, under `verify` in expected_failures.txt; such a
module must still fail verification (the list stays true).
"""

from __future__ import annotations

import time

import pytest
from corpus_lib import corpus_modules, expected_failures, require_corpus

from hlo_common.errors import HloError, HloParseError, VerificationError
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.verifier import verify_module

MODULE_IDS = [mid for mid, _text in corpus_modules()]
_TEXT = dict(corpus_modules())


@pytest.mark.parametrize("module_id", MODULE_IDS or ["<no corpus>"])
def test_verify_corpus_module(module_id: str) -> None:
    require_corpus()
    expected = expected_failures("verify").get(module_id)
    try:
        module = parse_module(_TEXT[module_id], module_id)
    except HloParseError:
        if expected is not None:
            pytest.fail(f"{module_id} is listed under verify but no longer parses")
        pytest.skip("does not parse (see the parse tier)")
    start = time.perf_counter()
    try:
        verify_module(module)
    except VerificationError as exc:
        if expected is None:
            raise
        assert exc.computation is not None, f"error does not name a computation: {exc}"
        return
    except HloError as exc:  # any other project error is a verifier bug
        pytest.fail(f"verifier raised {type(exc).__name__} instead of VerificationError: {exc}")
    elapsed = time.perf_counter() - start
    if expected is not None:
        pytest.fail(f"{module_id} verifies but is listed as an expected failure: {expected}")
    # Only pathological (superlinear) slowness fails: ~0.03 ms per instruction is typical, and a loaded
    # CI core may be several times slower; one re-timing absorbs a scheduler or GC pause.
    bound = 0.2 + 1e-3 * module.instruction_count()
    if elapsed >= bound:
        start = time.perf_counter()
        verify_module(module)
        elapsed = min(elapsed, time.perf_counter() - start)
    assert elapsed < bound, f"verification took {elapsed:.3f}s"


def test_expected_verify_failures_name_corpus_modules() -> None:
    require_corpus()
    unknown = sorted(set(expected_failures("verify")) - set(MODULE_IDS))
    assert not unknown, f"verify tier lists modules that are not in the corpus: {unknown}"
