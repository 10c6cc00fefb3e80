"""FileCheck in-process (the `filecheck` package from PyPI, no LLVM binaries): text in, patterns out.

    check_text(output, '''
    // CHECK:      ENTRY
    // CHECK-NEXT:   %p = f32[4]{0} parameter(0)
    ''')

Check lines may be interleaved with the HLO input itself (XLA's lit style): only lines with a
`CHECK` prefix are read. A mismatch fails the test with FileCheck's report and the output.
"""

from __future__ import annotations

import contextlib
import io

import pytest
from filecheck.finput import FInput
from filecheck.matcher import Matcher
from filecheck.options import Options
from filecheck.parser import Parser, pattern_for_opts


def run_filecheck(output: str, checks: str, prefixes: tuple[str, ...] = ("CHECK",),
                  name: str = "<checks>") -> tuple[int, str]:
    """(exit code, FileCheck's report) of matching `output` against the check lines in `checks`."""
    opts = Options(match_filename=name, check_prefixes=list(prefixes))
    report = io.StringIO()
    with contextlib.redirect_stderr(report), contextlib.redirect_stdout(report):
        parser = Parser(opts, io.StringIO(checks), *pattern_for_opts(opts))
        matcher = Matcher(opts, FInput("<output>", FInput.canonicalize_line_ends(output)), parser)
        code = matcher.run()
    return code, report.getvalue()


def check_text(output: str, checks: str, prefixes: tuple[str, ...] = ("CHECK",)) -> None:
    code, report = run_filecheck(output, checks, prefixes)
    if code != 0:
        pytest.fail(f"FileCheck failed (exit {code}):\n{report}\n--- output ---\n{output}", pytrace=False)
