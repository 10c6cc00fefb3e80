"""Corpus tier `buffer-assignment`: every corpus module that parses gets a sound buffer assignment.

For each module (fused or not, scheduled or not): copy insertion (`insert_copies`), then
`assign_buffers`, then the independent checker (`check_buffer_assignment`) must report nothing,
and the dump must be the same on a second run (determinism). Modules the assigner refuses are
listed under `buffer-assignment` in `tests/corpus/expected_failures.txt` with the reason; a listed
module that starts passing fails, so the list stays true.

Modules with control flow or in-place ops that the interpreter runs quickly are also *executed
inside their assignment* (`ba_memory_sim`): every value lives only in its slice of garbage-filled
memory, and the result must equal the interpreter's.
"""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path

import pytest
from corpus_lib import corpus_modules, expected_failures, largest_array_elements, require_corpus

from hlo_common.errors import HloError, HloParseError, InterpreterError
from hlo_common.hlo.parser import parse_module
from hlo_codegen.buffer_assignment import assign_buffers, check_buffer_assignment, insert_copies

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from ba_memory_sim import run_and_compare  # noqa: E402

TIER = "buffer-assignment"
_TEXT = dict(corpus_modules())
MODULE_IDS = list(_TEXT)

# Execution in memory: modules small enough for the interpreter, with something worth checking.
_INTERESTING = re.compile(r"\b(while|conditional|call|dynamic-update-slice|scatter|custom-call)\(")
_NOT_SIMULATED = re.compile(
    r"\b(custom-call|send|recv|infeed|outfeed|all-gather|all-reduce|all-to-all|collective-permute|"
    r"reduce-scatter|collective-broadcast|ragged-all-to-all|async-start|copy-start|rng|"
    r"rng-get-and-update-state)[\-(]|\b[su][24]\[|E\(4\)|<=|\?")
SIM_MAX_CHARS = 12_000
SIM_MAX_ELEMENTS = 1 << 16
SIM_TIME_LIMIT_S = 2


SIM_IDS = [mid for mid, text in _TEXT.items()
           if len(text) <= SIM_MAX_CHARS and _INTERESTING.search(text) and not _NOT_SIMULATED.search(text)
           and largest_array_elements(text) <= SIM_MAX_ELEMENTS]


def _parse(module_id: str):
    try:
        return parse_module(_TEXT[module_id], module_id)
    except HloParseError:
        pytest.skip("does not parse (see the parse tier)")


@pytest.mark.parametrize("module_id", MODULE_IDS or ["<no corpus>"])
def test_buffer_assignment_corpus_module(module_id: str) -> None:
    require_corpus()
    expected = expected_failures(TIER).get(module_id)
    module = _parse(module_id)
    try:
        insert_copies(module)
        assignment = assign_buffers(module)
    except HloError as exc:
        if expected is None:
            raise
        return  # listed, and still failing
    problems = check_buffer_assignment(assignment)
    if expected is not None:
        pytest.fail(f"{module_id} is listed under {TIER} ({expected}) but now assigns "
                    f"{'soundly' if not problems else 'unsoundly'}; update expected_failures.txt")
    assert problems == []
    assert assign_buffers(module).to_string() == assignment.to_string()


class _SimTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _SimTimeout()


@pytest.mark.parametrize("module_id", SIM_IDS or ["<no corpus>"])
def test_corpus_module_runs_in_its_assignment(module_id: str) -> None:
    require_corpus()
    if expected_failures(TIER).get(module_id) is not None:
        pytest.skip("listed under buffer-assignment")
    module = _parse(module_id)
    insert_copies(module)
    assignment = assign_buffers(module)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SIM_TIME_LIMIT_S)
    try:
        assert run_and_compare(module, assignment)
    except _SimTimeout:
        pytest.skip(f"the interpreter needs more than {SIM_TIME_LIMIT_S}s for this module")
    except InterpreterError as exc:
        pytest.skip(f"the interpreter cannot run it: {exc}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
