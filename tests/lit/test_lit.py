"""A small lit: every `*.hlo` file under tests/lit is one test, run by its `// RUN:` lines.

    // RUN: hlo-opt --passes=cse,dce %s | filecheck %s
    // RUN: not hlo-opt --passes=bogus %s 2>&1 | filecheck --check-prefix=ERR %s

`%s` is the test file. A RUN line is a pipeline of commands joined by `|`; `2>&1` sends a command's
stderr down the pipe too; `not` inverts an exit status; every command of the line must succeed
(lit's pipefail). `hlo-opt` and `filecheck` run in-process (no interpreter start-up per line), any
other command from the virtual environment's bin directory. A line ending in `\\` continues on
the next RUN line.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))  # filecheck_util

from filecheck_util import run_filecheck  # noqa: E402

LIT_DIR = Path(__file__).resolve().parent
BIN_DIR = Path(sys.executable).parent
_RUN = re.compile(r"^\s*//\s*RUN:\s?(.*)$")


def run_lines(path: Path) -> list[str]:
    lines, pending = [], ""
    for line in path.read_text().splitlines():
        m = _RUN.match(line)
        if not m:
            continue
        text = pending + m.group(1).rstrip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        lines.append(text.replace("%s", shlex.quote(str(path))))
        pending = ""
    return lines


def _hlo_opt(args: list[str], stdin: str) -> tuple[int, str, str]:
    from hlo_opt.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(args)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def _filecheck(args: list[str], stdin: str) -> tuple[int, str, str]:
    prefixes, files = ["CHECK"], []
    for arg in args:
        if arg.startswith(("--check-prefix=", "--check-prefixes=")):
            prefixes = arg.split("=", 1)[1].split(",")
        else:
            files.append(arg)
    code, report = run_filecheck(stdin, Path(files[0]).read_text(), tuple(prefixes), name=files[0])
    return code, "", report


def run_command(argv: list[str], stdin: str) -> tuple[int, str, str]:
    invert = argv[0] == "not"
    if invert:
        argv = argv[1:]
    tool, args = argv[0], argv[1:]
    if tool == "hlo-opt":
        code, out, err = _hlo_opt(args, stdin)
    elif tool == "filecheck":
        code, out, err = _filecheck(args, stdin)
    else:
        proc = subprocess.run([str(BIN_DIR / tool), *args], input=stdin, capture_output=True, text=True)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    if invert:
        code = 0 if code != 0 else 1
    return code, out, err


def run_pipeline(line: str) -> None:
    data = ""
    for stage in line.split(" | "):
        argv = shlex.split(stage)
        merge = "2>&1" in argv
        argv = [a for a in argv if a != "2>&1"]
        code, out, err = run_command(argv, data)
        if code != 0:
            pytest.fail(f"RUN: {line}\ncommand failed ({code}): {stage}\n{err}\n{out}", pytrace=False)
        data = out + err if merge else out


LIT_FILES = sorted(LIT_DIR.rglob("*.hlo"))


@pytest.mark.parametrize("path", LIT_FILES, ids=[str(p.relative_to(LIT_DIR)) for p in LIT_FILES])
def test_lit(path: Path) -> None:
    lines = run_lines(path)
    assert lines, f"{path} has no RUN lines"
    for line in lines:
        run_pipeline(line)
