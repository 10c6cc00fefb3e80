"""hlo-run optimizes HLO text with hlo-opt, then compiles it with hlo-codegen (both as subprocesses),
like run_hlo_module; dumps of both stages land in --dump-to / --xla_dump_to; the verifier checks the
input first on every platform, with hlo-opt's message."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from hlo_run.cli import cli

# algsimp removes `add(x, 0)`: whether hlo-opt ran shows in the module hlo-codegen compiled.
ADD_ZERO = """HloModule add_zero
ENTRY e {
  p = f32[8] parameter(0)
  z = f32[] constant(0)
  b = f32[8] broadcast(z), dimensions={}
  a = f32[8] add(p, b)
  ROOT n = f32[8] negate(a)
}
"""
INVALID = """HloModule bad
ENTRY e {
  p = f32[4,8] parameter(0)
  ROOT r = f32[5,7] reshape(p)
}
"""


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.fixture
def add_zero(tmp_path):
    path = tmp_path / "add_zero.hlo"
    path.write_text(ADD_ZERO)
    return path


def _compiled_module(dump_dir) -> str:
    (path,) = dump_dir.glob("module_0000.add_zero.cpu_after_optimizations.txt")
    return path.read_text()


def test_hlo_text_is_optimized_then_compiled_and_both_dump(add_zero, tmp_path):
    dumps = tmp_path / "dumps"
    result = run(["--platform=cpu", f"--xla_dump_to={dumps}", str(add_zero)])
    assert result.exit_code == 0, result.stderr
    assert "hlo-opt | hlo-codegen --target host" in result.stderr
    names = sorted(p.name for p in dumps.iterdir())
    # hlo-opt's dumps and hlo-codegen's, under the names each tool gives them
    for name in ("module_0000.add_zero.before_optimizations.txt",
                 "module_0000.add_zero.after_optimizations.txt",
                 "module_0000.add_zero.cpu_after_optimizations.txt",
                 "module_0000.add_zero.cpu_after_optimizations-buffer-assignment.txt",
                 "module_0000.add_zero.thunk_sequence.txt"):
        assert name in names
    assert any(n.endswith(".ll") for n in names) and any(n.endswith(".kernel_ir.txt") for n in names)
    compiled = _compiled_module(dumps)
    assert " add(" not in compiled and " negate(" in compiled  # algsimp ran before hlo-codegen


@pytest.mark.parametrize("flag", ["--no-hlo-passes", "--run_test_hlo_passes=false"])
def test_no_hlo_passes_compiles_the_text_as_given(add_zero, tmp_path, flag):
    dumps = tmp_path / "dumps"
    result = run(["--platform", "host", flag, "--dump-to", str(dumps), str(add_zero)])
    assert result.exit_code == 0, result.stderr
    assert "HLO passes skipped: --no-hlo-passes" in result.stderr
    assert not list(dumps.glob("*before_optimizations*"))
    assert " add(" in _compiled_module(dumps)


def test_a_scheduled_module_is_not_optimized_again(tmp_path):
    path = tmp_path / "s.hlo"
    path.write_text(ADD_ZERO.replace("HloModule add_zero", "HloModule add_zero, is_scheduled=true"))
    dumps = tmp_path / "dumps"
    result = run(["--platform", "host", "--dump-to", str(dumps), str(path)])
    assert result.exit_code == 0, result.stderr
    assert "HLO passes skipped: the module is already scheduled" in result.stderr
    assert " add(" in _compiled_module(dumps)


def test_hlo_run_imports_neither_hlo_opt_nor_hlo_codegen():
    code = ("import sys, hlo_run.cli, hlo_run.compile_hook, hlo_run.bisect, hlo_run.backends.host\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('hlo_opt', 'hlo_codegen'))\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("platform", ["interpreter", "host"])
def test_invalid_hlo_gets_the_verifier_error_on_every_platform(tmp_path, platform):
    path = tmp_path / "bad.hlo"
    path.write_text(INVALID)
    result = run(["--platform", platform, str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0] == (f"hlo-run: error: {path}:4:8: verification failed in the input: in computation e, "
                        "instruction %r: reshape: operand f32[4,8] has 32 elements, result f32[5,7] has 35; "
                        "expected equal counts")


def test_the_verifier_message_is_hlo_opts(tmp_path):
    from hlo_opt.cli import hlo_opt_command

    path = tmp_path / "bad.hlo"
    path.write_text(INVALID)
    opt = CliRunner().invoke(hlo_opt_command, ["--pipeline", "none", str(path)])
    ours = run(["--platform", "interpreter", str(path)])
    assert opt.exit_code == ours.exit_code == 1
    assert opt.stderr.replace("hlo-opt:", "hlo-run:") == ours.stderr


# -- --dump-to: every stage it runs, each module under its own number, or refused (issue 22 item 6) --
def test_split_input_file_dumps_each_module_under_its_own_number(tmp_path):
    path = tmp_path / "two.hlo"
    path.write_text(ADD_ZERO + "// -----\n" + ADD_ZERO.replace("add_zero", "second"))
    dumps = tmp_path / "dumps"
    result = run(["--platform", "host", "--split-input-file", "--dump-to", str(dumps), str(path)])
    assert result.exit_code == 0, result.stderr
    names = {p.name for p in dumps.iterdir()}
    # the second module's hlo-opt and hlo-codegen dumps used to be module_0000 as well, overwriting
    # the first's when the names matched
    for k, name in ((0, "add_zero"), (1, "second")):
        for stage in ("before_optimizations.txt", "after_optimizations.txt",
                      "cpu_after_optimizations.txt", "thunk_sequence.txt"):
            assert f"module_{k:04d}.{name}.{stage}" in names, sorted(names)
    assert not any(n.startswith("module_0001.add_zero") or n.startswith("module_0000.second") for n in names)


def test_dump_module_id_numbers_the_tools_own_dumps(add_zero, tmp_path):
    from hlo_codegen.cli import cli as codegen
    from hlo_opt.cli import hlo_opt_command

    dumps = tmp_path / "d"
    opt_args = [str(add_zero), "--dump-to", str(dumps), "--dump-module-id", "7",
                "-o", str(tmp_path / "o.hlo")]
    assert CliRunner().invoke(hlo_opt_command, opt_args).exit_code == 0
    codegen_args = ["--target", "host", str(tmp_path / "o.hlo"), "--dump-to", str(dumps),
                    "--dump-module-id", "7", "-o", str(tmp_path / "m.json")]
    assert CliRunner().invoke(codegen, codegen_args).exit_code == 0
    names = {p.name for p in dumps.iterdir()}
    assert "module_0007.add_zero.before_optimizations.txt" in names
    assert "module_0007.add_zero.thunk_sequence.txt" in names
    assert not any(n.startswith("module_0000") for n in names)


def _usage_error(argv, capsys) -> str:
    from hlo_run.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_dump_to_is_refused_where_nothing_is_compiled(add_zero, tmp_path, capsys):
    dumps = tmp_path / "dumps"
    err = _usage_error(["--platform", "interpreter", "--dump-to", str(dumps), str(add_zero)], capsys)
    assert err.startswith("hlo-run: error: --dump-to: --platform interpreter compiles nothing")
    assert not dumps.exists()


def test_dump_to_a_file_is_refused(add_zero, tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    err = _usage_error(["--platform", "host", "--dump-to", str(target), str(add_zero)], capsys)
    assert err == f"hlo-run: error: --dump-to '{target}': not a directory\n"
    assert target.read_text() == "mine"


def test_dump_to_with_a_manifest_is_refused(add_zero, tmp_path, capsys):
    from hlo_codegen.cli import cli as codegen

    manifest = tmp_path / "m.json"
    compiled = CliRunner().invoke(codegen, ["--target", "host", str(add_zero), "-o", str(manifest)])
    assert compiled.exit_code == 0
    err = _usage_error(["--platform", "host", "--dump-to", str(tmp_path / "d"), str(manifest)], capsys)
    assert err.startswith("hlo-run: error: --dump-to: the input is a manifest, compiled already")
