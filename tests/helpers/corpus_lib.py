"""The shared XLA corpus (`../shared/corpus/xla/`), read at test time and never copied here.

Every corpus tier (round trip, interpreter vs XLA:CPU, the pipeline, codegen) names a module by
its *module id*: the file name, plus `#k` for the k-th module (0-based) of a `// -----` file.
The expected failures of every tier live in one file, `tests/corpus/expected_failures.txt`,
one line per module: `<tier> <module id> <reason>`.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIR = Path(os.environ.get("HLO_CORPUS_DIR", ROOT.parent / "shared" / "corpus" / "xla"))
EXPECTED_FAILURES = ROOT / "tests" / "corpus" / "expected_failures.txt"


def corpus_available() -> bool:
    return CORPUS_DIR.is_dir() and any(CORPUS_DIR.glob("*.hlo"))


def require_corpus() -> None:
    if not corpus_available():
        pytest.skip(f"corpus not found at {CORPUS_DIR} (set HLO_CORPUS_DIR)")


@functools.lru_cache(maxsize=None)
def corpus_files() -> tuple[Path, ...]:
    if not corpus_available():
        return ()
    return tuple(sorted(CORPUS_DIR.glob("*.hlo")))


@functools.lru_cache(maxsize=None)
def corpus_modules() -> tuple[tuple[str, str], ...]:
    """(module id, module text) for every module of every corpus file, split on `// -----`."""
    from hlo_common.hlo.parser import split_module_texts

    out = []
    for path in corpus_files():
        chunks = split_module_texts(path.read_text(encoding="utf-8"))
        if len(chunks) == 1:
            out.append((path.name, chunks[0]))
        else:
            out.extend((f"{path.name}#{k}", text) for k, text in enumerate(chunks))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def expected_failures(tier: str) -> dict[str, str]:
    """module id -> reason, for one tier of the expected-failures file."""
    out: dict[str, str] = {}
    if not EXPECTED_FAILURES.exists():
        return out
    for line in EXPECTED_FAILURES.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        t, mid, reason = (line.split(None, 2) + ["", ""])[:3]
        if t == tier:
            out[mid] = reason
    return out


# Array shapes written in module text (`f32[4,<=8]`); a `?` dimension counts as 1.
SHAPE_RE = re.compile(r"\b(?:pred|[suf]\d+|bf16|c64|c128|f8e\w+|f4e2m1fn|f6e\w+)\[([0-9, <=?]*)\]")


def largest_array_elements(text: str) -> int:
    """The element count of the largest array shape written in the module text (bounded dynamic
    dimensions at their bounds), judged without parsing."""
    best = 0
    for m in SHAPE_RE.finditer(text):
        n = 1
        for d in m.group(1).replace("<=", "").split(","):
            d = d.strip()
            if d and d != "?":
                n *= int(d)
        best = max(best, n)
    return best


@functools.lru_cache(maxsize=None)
def slow_notes(path: Path) -> frozenset[str]:
    """The module ids of a notes file's `slow <module id> <seconds>` lines (empty when absent)."""
    if not path.exists():
        return frozenset()
    return frozenset(line.split()[1] for line in path.read_text().splitlines()
                     if line.startswith("slow ") and len(line.split()) > 1)
