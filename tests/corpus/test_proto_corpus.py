"""Corpus tier `proto`: XLA's own HloModuleProto of every corpus module that jaxlib's XLA parses
(955 of 956 with jaxlib 0.10) reads to the module our parser gives from XLA's text of it
(computation and instruction order aside, and the wrapped computations of async ops, which XLA's
text leaves out: tests/helpers/proto_lib.py). Modules that cannot are listed in expected_failures.txt as
`proto <module id> <reason>`; a listed module that reads the same makes the test fail."""

from __future__ import annotations

import corpus_lib
import proto_lib
import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.proto.messages import HloModuleProto
from hlo_common.proto.proto_to_hlo import module_from_proto

TIER = "proto"
_NO_REFERENCE = "no reference"


def _compare(mid: str, text: str) -> str | None:
    """None when XLA's proto of `text` reads as XLA's text of it parses; else what differs."""
    try:
        data, xla_text = proto_lib.xla_proto_and_text(text)
    except Exception:  # noqa: BLE001 - XLA rejects the text: no reference to compare
        return _NO_REFERENCE
    try:
        expected = proto_lib.canonical(print_module(parse_module(xla_text, mid)))
        got = proto_lib.canonical(proto_lib.async_sugar(
            print_module(module_from_proto(HloModuleProto.FromString(data), mid)), mid))
    except Exception as exc:  # noqa: BLE001 - reported as this module's failure
        return f"error: {str(exc).splitlines()[0][:200]}"
    if got == expected:
        return None
    a, b = expected.splitlines(), got.splitlines()
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"differs:\n    XLA text: {a[k:k + 1]}\n    proto:    {b[k:k + 1]}"


# The default run reads every SAMPLE-th module (about 40 s on 2 cores); `-m slow` reads them all.
SAMPLE = 12


@pytest.mark.slow
def test_xla_protos_of_the_whole_corpus_read_as_their_text() -> None:
    _check(corpus_lib.corpus_modules(), minimum=955)  # all but the one jaxlib 0.10 rejects (topk is_stable)


def test_xla_protos_of_a_corpus_sample_read_as_their_text() -> None:
    _check(corpus_lib.corpus_modules()[::SAMPLE], minimum=700 // SAMPLE)


def _check(modules, minimum: int) -> None:
    corpus_lib.require_corpus()
    proto_lib.xla_client()
    expected = corpus_lib.expected_failures(TIER)
    compared, failures, fixed = 0, [], []
    for mid, text in modules:
        problem = _compare(mid, text)
        if problem == _NO_REFERENCE:
            continue
        compared += 1
        if problem and mid not in expected:
            failures.append(f"{mid}: {problem}")
        elif not problem and mid in expected:
            fixed.append(mid)
    assert compared >= minimum
    assert not failures, f"{len(failures)} of {compared} modules:\n" + "\n".join(failures[:20])
    assert not fixed, f"listed in expected_failures.txt as `{TIER}` but now read the same: {fixed}"
