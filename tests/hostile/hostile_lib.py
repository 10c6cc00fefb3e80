"""Running the three tools in-process on hostile input, and the checks every hostile case makes
(issue 22 item 10): the exit code; standard error one line `<tool>: error: ...` naming the place
(a FILE:LINE:COL, a file, an array, a flag); no traceback; no partial, stray or replaced file in
the case's folder; bounded time (an alarm) and memory (the process's peak grows by less than
`MAX_RSS_GROWTH`)."""

from __future__ import annotations

import io
import re
import resource
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

TIME_LIMIT_S = 120  # generous: a case that hangs fails here instead of stalling the run
MAX_RSS_GROWTH = 1 << 30

GOOD = """HloModule m, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

add_f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  p = f32[4]{0} parameter(0)
  q = f32[4]{0} parameter(1)
  c = pred[4]{0} compare(p, q), direction=LT
  m = f32[4]{0} select(c, p, q)
  z = f32[] constant(0)
  r = f32[] reduce(m, z), dimensions={0}, to_apply=add_f
  b = f32[4]{0} broadcast(r), dimensions={}
  ROOT o = f32[4]{0} add(m, b)
}
"""

TOOLS = ("hlo-opt", "hlo-codegen", "hlo-run")
BASE_ARGS = {"hlo-opt": [], "hlo-codegen": ["--target", "host"], "hlo-run": ["--platform", "interpreter"]}


def _main(tool: str):
    if tool == "hlo-opt":
        from hlo_opt.cli import main
    elif tool == "hlo-codegen":
        from hlo_codegen.cli import main
    else:
        from hlo_run.cli import main
    return main


@dataclass
class Result:
    code: int
    out: str
    err: str


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout(f"the case ran past {TIME_LIMIT_S} s")


def invoke(tool: str, args: list[str], capsys, monkeypatch, stdin: bytes | None = None,
           base: bool = True) -> Result:
    """`tool args` through its console entry point (`main`), in this process."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    argv = (BASE_ARGS[tool] if base else []) + list(args)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT_S)
    try:
        _main(tool)(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert grown < MAX_RSS_GROWTH, f"the case grew the process by {grown >> 20} MiB"
    out, err = capsys.readouterr()
    return Result(code, out, err)


def folder_state(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder` with its bytes (or its kind), to see that nothing appeared,
    vanished or changed."""
    state: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        if p.is_symlink():
            state[key] = f"link->{p.readlink()}"
        elif p.is_file():
            state[key] = p.read_bytes()
        elif p.is_dir():
            state[key] = "dir"
        else:
            state[key] = f"mode {p.lstat().st_mode:o}"
    return state


def assert_refused(result: Result, tool: str, place: str, code: int = 1, progress: str = "") -> None:
    """Exit `code`, one line `<tool>: error: ...` matching the regex `place`, no traceback. A
    parse error may add the offending line and a caret under it (indented); other lines of
    standard error must match the regex `progress` (hlo-run's "Running ..." lines)."""
    assert "Traceback" not in result.err + result.out, result.err
    assert result.code == code, (result.code, result.err)
    lines = [line for line in result.err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(f"{tool}: error: ")]
    assert len(errors) == 1, result.err
    extra = [line for line in lines if line not in errors and not line.startswith("  ")]
    assert all(progress and re.match(progress, line) for line in extra), result.err
    assert re.search(place, errors[0]), (place, errors[0])
