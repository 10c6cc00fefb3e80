"""Corpus tier `proto-out`: every corpus module our parser reads, written as an HloModuleProto by
hlo_common.proto.hlo_to_proto and read back, prints as it did, in binary and text form: byte for
byte, except for what a proto cannot hold (tests/helpers/proto_lib.py: the module config's header
fields, unique names) and the spellings a proto cannot tell apart, each named in
tests/helpers/proto_normalise.py, where the trip gives XLA's spelling. The binary form's run checks
those against XLA itself (jaxlib): on every corpus module a normalisation changes, XLA's own
text -> proto -> text prints each changed instruction line (and header attribute) as ours does, and
every listed normalisation is needed by some module. A second check hands the proto to XLA, which
must load every one whose text it parses: the writer writes protos XLA's
HloModule::CreateFromProto accepts. Modules that cannot are listed in expected_failures.txt as
`proto-out <module id> <reason>`; a listed one that passes fails."""

from __future__ import annotations

import corpus_lib
import proto_lib
import pytest

from proto_normalise import NORMALISATIONS

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.proto.hlo_to_proto import serialize

TIER = "proto-out"
_TEXT_PROTO_ELEMENTS = 1 << 20


def _problem(mid: str, text: str, fmt: str, fired: dict) -> str | None:
    try:
        written, expected, got, names = proto_lib.trip(text, mid, fmt)
    except Exception as exc:  # noqa: BLE001 - reported as this module's failure
        return f"error: {str(exc).splitlines()[0][:200]}"
    if got != expected:
        return proto_lib.first_difference(expected, got)
    if names and fmt == "pb":
        for name in names:
            fired.setdefault(name, []).append(mid)
        return _xla_differs(mid, text, written, expected)
    return None


def _xla_differs(mid: str, text: str, written: str, expected: str) -> str | None:
    """None when XLA's own text -> proto -> text of `text` prints every line the normalisations
    changed as `expected` has it (in the same computation; names, operands and layouts aside)."""
    xc = proto_lib.xla_client()
    try:
        data = xc.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    except Exception as exc:  # noqa: BLE001 - a normalised module XLA rejects is a failure: no reference
        return f"XLA rejects the text, so its normalisations are unchecked: {str(exc).splitlines()[0][:150]}"
    theirs: dict = {}
    xla_text = print_module(parse_module(xc.XlaComputation(data).get_hlo_module().to_string(), mid))
    for (comp, _), (bare, _) in proto_lib.keyed_lines(xla_text).items():
        theirs.setdefault(comp, set()).add(bare)
    header = {k[1]: v for k, (v, _) in proto_lib.keyed_lines(xla_text).items() if not k[0]}
    for (comp, name), ours in proto_lib.changed_lines(written, expected).items():
        if (header.get(name) if not comp else ours if ours in theirs.get(comp, ()) else None) != ours:
            return f"normalised to what XLA's own trip does not print:\n    ours: {ours}"
    return None


@pytest.mark.parametrize("fmt", ["pb", "pbtxt"])
def test_every_corpus_module_reads_back_from_its_proto(fmt) -> None:
    """About 10 s for the whole corpus in one form on 2 cores. The text form leaves out the modules
    with an array of more than a million elements (a 100M-element constant is gigabytes of text),
    and reads every third module."""
    corpus_lib.require_corpus()
    expected = corpus_lib.expected_failures(TIER)
    failures, fixed, checked, fired = [], [], 0, {}
    modules = corpus_lib.corpus_modules()
    for mid, text in (modules if fmt == "pb" else modules[::3]):
        try:
            parse_module(text, mid)
        except Exception:  # noqa: BLE001 - the parse tier reports these
            continue
        if fmt == "pbtxt" and corpus_lib.largest_array_elements(text) > _TEXT_PROTO_ELEMENTS:
            continue
        checked += 1
        problem = _problem(mid, text, fmt, fired)
        if problem and mid not in expected:
            failures.append(f"{mid}: {problem}")
        elif not problem and mid in expected:
            fixed.append(mid)
    assert checked >= (900 if fmt == "pb" else 280)
    assert not failures, f"{len(failures)} of {checked} modules:\n" + "\n".join(failures[:20])
    assert not fixed, f"listed in expected_failures.txt as `{TIER}` but now read back the same: {fixed}"
    if fmt == "pb":
        unused = [n.name for n in NORMALISATIONS if n.name not in fired]
        assert not unused, f"normalisations no corpus module needs any more: {unused}"


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
