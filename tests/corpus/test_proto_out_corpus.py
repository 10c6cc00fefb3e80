"""Corpus tier `proto-out`: every corpus module our parser reads, written as an HloModuleProto by
hlo_common.proto.hlo_to_proto and read back, prints as it did (tests/helpers/proto_lib.py says
what a proto cannot hold and is set aside), in binary and text form. A second check hands the
proto to XLA itself (jaxlib, test-only), which must load every one whose text it parses: the
writer writes protos XLA's HloModule::CreateFromProto accepts. Modules that cannot are listed in
expected_failures.txt as `proto-out <module id> <reason>`; a listed one that passes fails."""

from __future__ import annotations

import corpus_lib
import proto_lib
import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.proto.hlo_to_proto import serialize

TIER = "proto-out"
_TEXT_PROTO_ELEMENTS = 1 << 20


def _problem(mid: str, text: str, fmt: str) -> str | None:
    try:
        expected, got = proto_lib.written_and_read(text, mid, fmt)
    except Exception as exc:  # noqa: BLE001 - reported as this module's failure
        return f"error: {str(exc).splitlines()[0][:200]}"
    return None if got == expected else proto_lib.first_difference(expected, got)


@pytest.mark.parametrize("fmt", ["pb", "pbtxt"])
def test_every_corpus_module_reads_back_from_its_proto(fmt) -> None:
    """About 10 s for the whole corpus in one form on 2 cores. The text form leaves out the modules
    with an array of more than a million elements (a 100M-element constant is gigabytes of text), and reads every third module."""
    corpus_lib.require_corpus()
    expected = corpus_lib.expected_failures(TIER)
    failures, fixed, checked = [], [], 0
    modules = corpus_lib.corpus_modules()
    for mid, text in (modules if fmt == "pb" else modules[::3]):
        try:
            parse_module(text, mid)
        except Exception:  # noqa: BLE001 - the parse tier reports these
            continue
        if fmt == "pbtxt" and corpus_lib.largest_array_elements(text) > _TEXT_PROTO_ELEMENTS:
            continue
        checked += 1
        problem = _problem(mid, text, fmt)
        if problem and mid not in expected:
            failures.append(f"{mid}: {problem}")
        elif not problem and mid in expected:
            fixed.append(mid)
    assert checked >= (900 if fmt == "pb" else 280)
    assert not failures, f"{len(failures)} of {checked} modules:\n" + "\n".join(failures[:20])
    assert not fixed, f"listed in expected_failures.txt as `{TIER}` but now read back the same: {fixed}"


def _xla_loads(modules) -> None:
    corpus_lib.require_corpus()
    xc = proto_lib.xla_client()
    expected = corpus_lib.expected_failures(TIER)
    loaded, failures = 0, []
    for mid, text in modules:
        try:
            xc.hlo.hlo_module_from_text(text)
            data = serialize(parse_module(text, mid), "pb")
        except Exception:  # noqa: BLE001 - XLA or our parser rejects the text, or it is listed above
            continue
        try:
            xc.XlaComputation(data).as_hlo_text()
            loaded += 1
        except Exception as exc:  # noqa: BLE001 - XLA's refusal is this module's failure
            if mid not in expected:
                failures.append(f"{mid}: {str(exc).splitlines()[0][:200]}")
    assert loaded >= len(modules) // 2
    assert not failures, f"XLA refuses {len(failures)} of our protos:\n" + "\n".join(failures[:20])


def test_xla_loads_our_protos_of_a_corpus_sample() -> None:
    _xla_loads(corpus_lib.corpus_modules()[::12])


@pytest.mark.slow
def test_xla_loads_our_protos_of_the_whole_corpus() -> None:
    _xla_loads(corpus_lib.corpus_modules())
