"""AlgebraicSimplifier over the shared XLA corpus: every module that parses and verifies is run to a
fixed point (at most 25 runs, XLA's HloPassFix limit), must still verify, and a sample of the
modules it changed must compute the same results in the reference interpreter (all of them in the
`slow` tier, and the layout-sensitive sweep too)."""

from __future__ import annotations

import functools
import signal

import pytest
from algsimp_cases import assert_same_results
from pass_testlib import random_arguments

from corpus_lib import corpus_modules, require_corpus  # noqa: E402
from hlo_common.errors import HloError  # noqa: E402
from hlo_common.interpreter import evaluate  # noqa: E402
from hlo_common.hlo.parser import parse_module  # noqa: E402
from hlo_common.hlo.verifier import verify_module  # noqa: E402
from hlo_opt.passes.algebraic_simplifier import AlgebraicSimplifier  # noqa: E402

FIX_LIMIT = 25
SAMPLE = 30  # changed modules checked numerically in the default tier
MAX_ELEMENTS = 1 << 16  # ... whose largest array is small enough to interpret quickly


@functools.lru_cache(maxsize=None)
def verified_texts() -> tuple[tuple[str, str], ...]:
    out = []
    for mid, text in corpus_modules():
        try:
            verify_module(parse_module(text, mid))
        except HloError:
            continue  # the parse / verify tiers own these
        out.append((mid, text))
    return tuple(out)


def sweep(sensitive: bool) -> tuple[dict[str, object], list[str]]:
    """{module id: simplified module} for the modules algsimp changed; failures as messages."""
    p = AlgebraicSimplifier(is_layout_sensitive=sensitive)
    changed, failures = {}, []
    for mid, text in verified_texts():
        module = parse_module(text, mid)
        runs = 0
        while runs < FIX_LIMIT and p.run(module):
            runs += 1
        if runs == FIX_LIMIT:
            failures.append(f"{mid}: no fixed point after {FIX_LIMIT} runs")
            continue
        try:
            verify_module(module)
        except HloError as exc:
            failures.append(f"{mid}: {exc}")
            continue
        if runs:
            changed[mid] = module
    return changed, failures


@functools.lru_cache(maxsize=None)
def sweep_cached(sensitive: bool):
    return sweep(sensitive)


def _largest_array(module) -> int:
    return max((i.shape.num_elements for c in module.computations for i in c.instructions
                if i.shape.is_array), default=0)


class _Timeout(Exception):
    pass


def _check_numbers(mids: list[str], changed: dict[str, object], budget_s: int) -> list[str]:
    texts = dict(verified_texts())
    failures = []

    def on_alarm(*_args):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        for mid in mids:
            signal.alarm(budget_s)
            try:
                module = parse_module(texts[mid], mid)
                evaluate(module, random_arguments(module))
            except Exception:  # noqa: BLE001 - the interpreter tier owns modules it cannot run
                continue
            finally:
                signal.alarm(0)
            signal.alarm(2 * budget_s)
            try:
                assert_same_results(texts[mid], changed[mid])
            except _Timeout:
                failures.append(f"{mid}: the simplified module is much slower to interpret")
            except Exception as exc:  # noqa: BLE001 - any difference is a failure of algsimp
                failures.append(f"{mid}: {type(exc).__name__}: {str(exc)[:300]}")
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    return failures


def test_corpus_modules_verify_after_algsimp_to_a_fixed_point():
    require_corpus()
    changed, failures = sweep_cached(False)
    assert not failures, "\n".join(failures)
    assert len(changed) > 50, f"algsimp changed only {len(changed)} corpus modules"


def test_sample_of_simplified_corpus_modules_computes_the_same_results():
    require_corpus()
    changed, _ = sweep_cached(False)
    small = sorted(mid for mid, m in changed.items() if _largest_array(m) <= MAX_ELEMENTS)
    step = max(1, len(small) // SAMPLE)
    failures = _check_numbers(small[::step][:SAMPLE], changed, budget_s=5)
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_all_simplified_corpus_modules_compute_the_same_results():
    require_corpus()
    changed, _ = sweep_cached(False)
    mids = sorted(mid for mid, m in changed.items() if _largest_array(m) <= 1 << 22)
    failures = _check_numbers(mids, changed, budget_s=20)
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_layout_sensitive_algsimp_keeps_corpus_modules_valid_and_their_results():
    require_corpus()
    changed, failures = sweep_cached(True)
    assert not failures, "\n".join(failures)
    mids = sorted(mid for mid, m in changed.items() if _largest_array(m) <= 1 << 22)
    failures = _check_numbers(mids, changed, budget_s=20)
    assert not failures, "\n".join(failures)
