"""Bounds on a run: `--max-while-iterations` on every platform (a loop that would run for ever ends
with one line naming the while and its place), sane maxima for counts, finite error bounds, and
`hlo-codegen --arch` checked before LLVM sees it (sm_60 aborted inside LLVM with exit 134)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter.control_flow import WhileLimitReached
from hlo_common.interpreter.evaluator import Evaluator
from hlo_run.cli import cli

BIN = Path(sys.executable).parent

COUNTED = """HloModule counted

cond {
  s = s32[] parameter(0)
  n = s32[] constant(10)
  ROOT lt = pred[] compare(s, n), direction=LT
}

body {
  s = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT next = s32[] add(s, one)
}

ENTRY e {
  z = s32[] constant(0)
  ROOT loop = s32[] while(z), condition=cond, body=body
}
"""
FOREVER = COUNTED.replace("ROOT lt = pred[] compare(s, n), direction=LT", "ROOT lt = pred[] constant(true)")


def _tool(name: str, *args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=timeout, **kwargs)


def test_the_interpreter_stops_a_loop_at_the_limit_and_names_its_place():
    module = parse_module(FOREVER, "forever.hlo")
    with pytest.raises(WhileLimitReached) as info:
        Evaluator(max_while_iterations=1000).evaluate(module, [])
    assert str(info.value) == ("forever.hlo:17:8: while %loop reached --max-while-iterations=1000 and its "
                               "condition still holds")


@pytest.mark.parametrize("limit, ok", [(10, True), (9, False), (0, False)])
def test_a_loop_of_exactly_the_limit_runs(limit: int, ok: bool):
    module = parse_module(COUNTED, "counted.hlo")
    if ok:
        assert int(Evaluator(max_while_iterations=limit).evaluate(module, [])) == 10
    else:
        with pytest.raises(WhileLimitReached, match=rf"counted.hlo:17:8: while %loop reached "
                                                    rf"--max-while-iterations={limit}"):
            Evaluator(max_while_iterations=limit).evaluate(module, [])


@pytest.mark.parametrize("platform", ["interpreter", "host"])
def test_hlo_run_stops_an_endless_loop_on_every_platform(tmp_path: Path, platform: str):
    src = tmp_path / "forever.hlo"
    src.write_text(FOREVER)
    proc = _tool("hlo-run", "--platform", platform, "--max-while-iterations", "200", str(src))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1] == (f"hlo-run: error: {src}:17:8: while %loop reached "
                                            "--max-while-iterations=200 and its condition still holds")


def test_a_manifest_names_the_loop_in_its_own_module(tmp_path: Path):
    src = tmp_path / "forever.hlo"
    src.write_text(FOREVER)
    manifest = tmp_path / "forever.json"
    opt = _tool("hlo-opt", str(src))
    assert opt.returncode == 0, opt.stderr
    assert _tool("hlo-codegen", "--target", "host", "-o", str(manifest), input=opt.stdout).returncode == 0
    proc = _tool("hlo-run", "--platform", "host", "--reference-platform", "none", "--max-while-iterations",
                 "3", str(manifest))
    line = proc.stderr.splitlines()[-1]
    assert proc.returncode == 1
    assert line.startswith(f"hlo-run: error: {manifest} (module counted):")
    assert line.endswith(": while %loop reached --max-while-iterations=3 and its condition still holds")


@pytest.mark.parametrize("args, message", [
    (["--iterations", "99999999999999999999"], "Invalid value for '--iterations'"),
    (["--iterations", "0"], "Invalid value for '--iterations'"),
    (["--max-while-iterations", "-1"], "Invalid value for '--max-while-iterations'"),
    (["--seed", str(1 << 70)], "Invalid value for '--seed'"),
    (["--abs-error-bound", "nan"], "nan is not a finite number >= 0"),
    (["--rel-error-bound", "inf"], "inf is not a finite number >= 0"),
    (["--abs-error-bound", "-1"], "-1 is not a finite number >= 0"),
    (["--abs-error-bound", "abc"], "'abc' is not a number"),
])
def test_counts_and_bounds_out_of_range_are_usage_errors(tmp_path: Path, args: list[str], message: str):
    src = tmp_path / "m.hlo"
    src.write_text(COUNTED)
    result = CliRunner().invoke(cli, [*args, str(src)])
    assert result.exit_code == 2 and message in result.output


def test_usage_errors_of_the_console_scripts_are_one_line(tmp_path: Path):
    src = tmp_path / "m.hlo"
    src.write_text(COUNTED)
    proc = _tool("hlo-run", "--abs-error-bound", "nan", str(src))
    assert proc.returncode == 2
    assert proc.stderr == ("hlo-run: error: Invalid value for '--abs-error-bound': nan is not a finite "
                           "number >= 0\n")


@pytest.mark.parametrize("arch", ["sm_35", "sm_60", "sm_9999", "sm_70", "compute_90"])
def test_hlo_codegen_refuses_an_unsupported_arch_before_llvm(tmp_path: Path, arch: str):
    src = tmp_path / "m.hlo"
    src.write_text(COUNTED)
    proc = _tool("hlo-codegen", "--target", "cuda", "--arch", arch, str(src))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"hlo-codegen: error: Invalid value for '--arch': ")
    assert f"'{arch}'" in line and "LLVM ERROR" not in proc.stderr


def test_a_changed_while_limit_takes_effect_between_runs_of_one_interpreter_executable():
    """The interpreter platform keeps its evaluator between runs (plans made once); a limit set
    after the first run still applies to the next, and lifting it lets the loop finish."""
    from hlo_run.backends import Program
    from hlo_run.backends.interpreter import InterpreterBackend

    executable = InterpreterBackend().load(Program(name="counted.hlo", module=parse_module(COUNTED)))
    executable.max_while_iterations = None
    assert int(executable.run([])) == 10
    executable.max_while_iterations = 5
    with pytest.raises(WhileLimitReached):
        executable.run([])
    executable.max_while_iterations = None
    assert int(executable.run([])) == 10
