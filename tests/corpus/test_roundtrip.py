"""Corpus tier `parse`: every corpus module parses, and print(parse(print(m))) == print(m).

Modules that cannot are listed in tests/corpus/expected_failures.txt as `parse <module id> <reason>`;
a listed module that round-trips makes its test fail, so the list stays true. A second check feeds
our printed text to XLA's own parser (jaxlib), which must accept every module it accepts in the
original form: the canonical text is valid XLA, not only valid for us.
"""

from __future__ import annotations

import pytest

import corpus_lib
from hlo_common.errors import HloError
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module

TIER = "parse"
MODULES = corpus_lib.corpus_modules()
IDS = [mid for mid, _ in MODULES]


def _round_trip(mid: str, text: str) -> str:
    first = print_module(parse_module(text, mid))
    second = print_module(parse_module(first, f"{mid} (printed)"))
    if second != first:
        a, b = first.splitlines(), second.splitlines()
        diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        raise AssertionError(f"printing is not stable at line {diff + 1}:\n  {a[diff:diff + 1]}\n  {b[diff:diff + 1]}")
    return first


@pytest.mark.parametrize("mid", IDS or ["<no corpus>"])
def test_corpus_module_round_trips(mid: str) -> None:
    corpus_lib.require_corpus()
    text = dict(MODULES)[mid]
    reason = corpus_lib.expected_failures(TIER).get(mid)
    if reason is None:
        _round_trip(mid, text)
        return
    try:
        _round_trip(mid, text)
    except (HloError, AssertionError):
        pytest.xfail(reason)
    pytest.fail(f"{mid} is listed as an expected parse failure ({reason}) but now round-trips: "
                "remove its line from tests/corpus/expected_failures.txt")


def test_expected_parse_failures_name_corpus_modules() -> None:
    corpus_lib.require_corpus()
    unknown = sorted(set(corpus_lib.expected_failures(TIER)) - set(IDS))
    assert not unknown, f"expected_failures.txt lists modules that are not in the corpus: {unknown}"


def test_expected_parse_failures_stay_under_one_percent() -> None:
    corpus_lib.require_corpus()
    files = {mid.split("#")[0] for mid in corpus_lib.expected_failures(TIER)}
    assert len(files) * 100 < len(corpus_lib.corpus_files())


def test_xla_parses_our_canonical_text() -> None:
    """XLA (jaxlib) reads our printed text wherever it reads the original text."""
    corpus_lib.require_corpus()
    pytest.importorskip("jax", reason="jaxlib is needed to run XLA's parser")
    from jax._src.lib import xla_client as xc
    rejected = []
    for mid, text in MODULES:
        if mid in corpus_lib.expected_failures(TIER):
            continue
        try:
            xc.hlo.hlo_module_from_text(text)
        except Exception:  # noqa: BLE001 - XLA of this jaxlib cannot read the original: nothing to compare
            continue
        printed = print_module(parse_module(text, mid))
        try:
            xc.hlo.hlo_module_from_text(printed)
        except Exception as exc:  # noqa: BLE001
            rejected.append(f"{mid}: {str(exc).splitlines()[0][:200]}")
    assert not rejected, "XLA rejects our printed text of:\n" + "\n".join(rejected)
