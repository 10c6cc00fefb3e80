"""Fuzzing the HLO parser with seeded mutations of corpus texts.

Every case is a small corpus module mutated by a seeded random edit (delete / duplicate / swap /
insert tokens or bytes, truncate, inject random bytes). The parser must either return modules or
raise one of the project's error types (never another exception, never hang); and whatever it
accepts must print to text that parses again and prints identically (the round-trip contract).
The seed is fixed, so a failure reproduces; its message names the case number and the edit.
"""

from __future__ import annotations

import random
import re
import signal
import time

import pytest

import corpus_lib
from hlo_common.errors import HloError
from hlo_common.hlo.parser import parse_modules
from hlo_common.hlo.printer import print_module

SEED = 20240611
CASES = 2400
MAX_SOURCE_CHARS = 2500
CASE_SECONDS = 5

_TOKEN_RE = re.compile(r"\s+|[A-Za-z_%][\w.\-]*|-?\d+(?:\.\d+)?|\"(?:[^\"\\]|\\.)*\"|.", re.S)
_VOCABULARY = [
    "{", "}", "(", ")", "[", "]", ",", "=", "%", "#", ":", "->", "<=", "...", "ROOT", "ENTRY",
    "HloModule", "f32[2]", "f32[]", "(f32[], s32[])", "{1,0}", "{:T(8,128)}", "b(f32[2])", "add",
    "constant", "parameter(0)", "tuple", "get-tuple-element", "fusion", "while", "custom-call-start",
    "to_apply=", "calls=", "metadata={op_name=\"x\"}", "backend_config={\"a\":1}", "sharding={replicated}",
    "replica_groups=[2,2]<=[4]", "nan", "-inf", "0x1F", "1e999", "99999999999999999999999", "\"",
    "\\", "/*", "*/", "//", "// -----", "t#0", "{...}", "s4", "f8e4m3fn[3]", "pred[]", "token[]",
]


def _seed_texts() -> list[str]:
    texts = [t for _mid, t in corpus_lib.corpus_modules() if len(t) <= MAX_SOURCE_CHARS]
    rng = random.Random(SEED)
    rng.shuffle(texts)
    return texts[:120]


def _mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One or a few random edits; returns (text, description)."""
    edits = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.choice(("del_tok", "dup_tok", "swap_tok", "ins_tok", "del_byte", "ins_byte",
                           "truncate", "garbage", "replace_tok", "number", "type", "number", "type"))
        edits.append(kind)
        text = _EDITS[kind](text, rng)
    return text, "+".join(edits)


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def _edit_tokens(text: str, rng: random.Random, op) -> str:
    toks = _tokens(text)
    if len(toks) < 2:
        return text
    i = rng.randrange(len(toks))
    op(toks, i, rng)
    return "".join(toks)


def _swap(toks: list[str], i: int, rng: random.Random) -> None:
    j = rng.randrange(len(toks))
    toks[i], toks[j] = toks[j], toks[i]


_NUMBER_RE = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_TYPE_RE = re.compile(r"\b(?:pred|s(?:4|8|16|32|64)|u(?:8|32|64)|f(?:16|32|64)|bf16|c64|f8e4m3fn)(?=\[)")
_NUMBERS = ["0", "1", "-1", "2", "3", "7", "100", "2147483648", "9223372036854775807",
            "18446744073709551615", "1e30", "0.5", "-0", "99999999999"]
_TYPES = ["pred", "s4", "s8", "s32", "s64", "u8", "u32", "u64", "f16", "bf16", "f32", "f64", "c64",
          "f8e4m3fn", "token", "opaque"]


def _replace_match(text: str, rng: random.Random, pattern: re.Pattern, choices: list[str]) -> str:
    matches = list(pattern.finditer(text))
    if not matches:
        return text
    m = rng.choice(matches)
    return text[:m.start()] + rng.choice(choices) + text[m.end():]


def _garbage(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text) + 1)
    junk = "".join(chr(rng.choice((rng.randrange(0, 32), rng.randrange(32, 127), rng.randrange(128, 0x3000))))
                   for _ in range(rng.randrange(1, 12)))
    return text[:i] + junk + text[i:]


_EDITS = {
    "del_tok": lambda t, r: _edit_tokens(t, r, lambda ts, i, _r: ts.pop(i)),
    "dup_tok": lambda t, r: _edit_tokens(t, r, lambda ts, i, _r: ts.insert(i, ts[i])),
    "swap_tok": lambda t, r: _edit_tokens(t, r, _swap),
    "ins_tok": lambda t, r: _edit_tokens(t, r, lambda ts, i, rr: ts.insert(i, rr.choice(_VOCABULARY))),
    "replace_tok": lambda t, r: _edit_tokens(t, r, lambda ts, i, rr: ts.__setitem__(i, rr.choice(_VOCABULARY))),
    "del_byte": lambda t, r: (lambda i: t[:i] + t[i + 1:])(r.randrange(max(len(t), 1))),
    "ins_byte": lambda t, r: (lambda i: t[:i] + r.choice("{}()[],=%#:\"\\ \n0x-.") + t[i:])(r.randrange(len(t) + 1)),
    "truncate": lambda t, r: t[:r.randrange(len(t) + 1)],
    "garbage": _garbage,
    "number": lambda t, r: _replace_match(t, r, _NUMBER_RE, _NUMBERS),
    "type": lambda t, r: _replace_match(t, r, _TYPE_RE, _TYPES),
}


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout


def _check_case(text: str) -> bool:
    """True when the parser accepted the text; raises AssertionError on a contract violation."""
    try:
        modules = parse_modules(text, "fuzz.hlo")
    except HloError:
        return False
    for m in modules:
        printed = print_module(m)
        again = parse_modules(printed, "printed.hlo", split=False)[0]
        assert print_module(again) == printed, "printing is not stable for an accepted input"
    return True


def test_fuzzed_corpus_texts_raise_only_project_errors():
    seeds = _seed_texts()
    if not seeds:
        pytest.skip(f"corpus not found at {corpus_lib.CORPUS_DIR}")
    rng = random.Random(SEED)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    accepted = 0
    start = time.perf_counter()
    try:
        for case in range(CASES):
            source = seeds[case % len(seeds)]
            text, how = _mutate(source, rng)
            signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
            try:
                accepted += _check_case(text)
            except _Timeout:
                pytest.fail(f"case {case} ({how}) took more than {CASE_SECONDS} s:\n{text[:2000]}")
            except Exception as exc:  # noqa: BLE001 - the point of the test
                pytest.fail(f"case {case} ({how}) raised {type(exc).__name__}: {exc}\n--- input ---\n{text[:3000]}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)
    elapsed = time.perf_counter() - start
    print(f"{CASES} fuzz cases, {accepted} accepted, {elapsed:.1f} s")
    assert 0 < accepted < CASES  # the mutations both break and keep inputs valid
