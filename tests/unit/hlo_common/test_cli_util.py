"""hlo_common.cli_util and hlo_common.source: what the three CLIs share.

A tiny click command stands in for a tool: errors give exit status 1 and one `tool: error:` line
(plus the caret excerpt for parse errors), never a traceback unless --debug; usage errors stay
click's (exit 2). Inputs are read with clean errors; outputs are written whole or not at all.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from hlo_common.cli_util import cli_errors, error_lines, run_command, write_file_atomically, write_output
from hlo_common.errors import HloError, HloParseError, InputError, OutputError
from hlo_common.hlo.parser import parse_module
from hlo_common.source import read_source


@click.command()
@click.argument("what")
@click.option("--debug", is_flag=True)
@cli_errors("toy")
def toy(what: str, debug: bool) -> None:
    if what == "parse":
        parse_module("HloModule m\nENTRY e {\n  ROOT x = f32[] addd(y)\n}", "m.hlo")
    elif what == "user":
        raise InputError("inputs.npz: no array named arg0")
    elif what == "bug":
        raise ZeroDivisionError("division by zero")
    click.echo("fine")


def _run(*args: str):
    return CliRunner().invoke(toy, list(args))


def test_success_exits_zero():
    result = _run("ok")
    assert result.exit_code == 0
    assert result.output == "fine\n"


def test_parse_error_is_one_line_with_location_and_caret():
    result = _run("parse")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "toy: error: m.hlo:3:18: unknown opcode 'addd'"
    assert lines[1] == "    ROOT x = f32[] addd(y)"
    assert lines[2] == "  " + " " * 17 + "^"
    assert "Traceback" not in result.stderr


def test_user_error_exits_one_without_traceback():
    result = _run("user")
    assert result.exit_code == 1
    assert result.stderr == "toy: error: inputs.npz: no array named arg0\n"


def test_unexpected_exception_is_one_line_internal_error():
    result = _run("bug")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "toy: error: internal error: ZeroDivisionError: division by zero (run with --debug for the traceback)"]
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback():
    result = _run("bug", "--debug")
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.rstrip().endswith("toy: error: internal error: ZeroDivisionError: division by zero")


def test_usage_error_stays_clicks_exit_two():
    result = CliRunner().invoke(toy, ["ok", "--no-such-flag"])
    assert result.exit_code == 2
    assert "No such option" in result.stderr


def test_run_command_returns_the_body_value_and_passes_system_exit():
    assert run_command("toy", lambda: 7) == 7
    with pytest.raises(SystemExit) as info:
        run_command("toy", lambda: (_ for _ in ()).throw(SystemExit(3)))
    assert info.value.code == 3


def test_error_lines_clip_long_messages():
    (line,) = error_lines("toy", HloError("x" * 5000))
    assert line.startswith("toy: error: xxx") and line.endswith("...") and len(line) < 500


# -- atomic output --------------------------------------------------------------------------------
def test_atomic_write_replaces_whole_file_and_keeps_its_mode(tmp_path: Path):
    target = tmp_path / "out.hlo"
    target.write_text("old")
    target.chmod(0o640)
    write_file_atomically(target, "new text")
    assert target.read_text() == "new text"
    assert target.stat().st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path) == ["out.hlo"]


def test_atomic_write_failure_leaves_old_file_and_no_temporary(tmp_path: Path, monkeypatch):
    target = tmp_path / "out.hlo"
    target.write_text("old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OutputError, match="cannot write .*No space left on device"):
        write_file_atomically(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.hlo"]


def test_atomic_write_into_missing_directory_is_an_output_error(tmp_path: Path):
    with pytest.raises(OutputError, match="no such directory"):
        write_file_atomically(tmp_path / "nope" / "out.hlo", "x")


def test_write_output_dash_goes_to_stdout(capsys):
    write_output("-", "HloModule m\n")
    assert capsys.readouterr().out == "HloModule m\n"


# -- reading sources ------------------------------------------------------------------------------
def test_read_source_file_and_stdin(tmp_path: Path):
    p = tmp_path / "m.hlo"
    p.write_bytes("\ufeffHloModule m\n".encode())
    text, name = read_source(p)
    assert (text, name) == ("HloModule m\n", str(p))
    src = read_source("-", stdin=io.BytesIO(b"ENTRY e {}\n"))
    assert (src.text, src.name) == ("ENTRY e {}\n", "<stdin>")


@pytest.mark.parametrize("content, message", [
    (b"", r"empty input"),
    (b"  \n\t\n", r"empty input"),
    (b"HloModule m\x00\x01", r"bad.hlo:1:12: binary input \(NUL byte at byte offset 11\)"),
    (b"HloModule \xff m", r"bad.hlo:1:11: not UTF-8 text: byte 0xff \(invalid start byte; byte offset 10\)"),
])
def test_read_source_refuses_unusable_input(tmp_path: Path, content: bytes, message: str):
    p = tmp_path / "bad.hlo"
    p.write_bytes(content)
    with pytest.raises(InputError, match=message) as info:
        read_source(p)
    assert str(info.value).startswith(f"{p}:")


def test_read_source_missing_and_directory(tmp_path: Path):
    with pytest.raises(InputError, match=r"cannot read '.*nope.hlo': no such file"):
        read_source(tmp_path / "nope.hlo")
    with pytest.raises(InputError, match=r"it is a directory"):
        read_source(tmp_path)


def test_parse_error_excerpt_aligns_caret_under_tabs():
    with pytest.raises(HloParseError) as info:
        parse_module("ENTRY e {\n\tROOT x = f32[] bogus()\n}", "t.hlo")
    err = info.value
    assert (err.line, err.col) == (2, 17)
    assert err.excerpt() == "  \tROOT x = f32[] bogus()\n  \t" + " " * 15 + "^"


# -- targets that are not regular files: written through or followed, never replaced -------------------
def _mknod_char(path: Path, major: int, minor: int) -> None:
    import stat

    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD, which this user lacks")


def test_a_null_device_of_our_own_stays_a_device(tmp_path: Path):
    import stat

    null = tmp_path / "null"
    _mknod_char(null, 1, 3)  # Linux's /dev/null numbers
    write_file_atomically(null, "HloModule m\n")
    assert stat.S_ISCHR(null.stat().st_mode)
    assert list(tmp_path.iterdir()) == [null]  # no temporary file left beside it


def test_a_full_device_is_a_one_line_no_space_error(tmp_path: Path):
    full = tmp_path / "full"
    _mknod_char(full, 1, 7)  # Linux's /dev/full
    with pytest.raises(OutputError, match=r"cannot write '.*full': No space left on device"):
        write_file_atomically(full, "x" * 10000)
    import stat

    assert stat.S_ISCHR(full.stat().st_mode)


def test_a_fifo_is_written_through(tmp_path: Path):
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_file_atomically(fifo, "x" * 200_000)  # more than a pipe buffer
    reader.join(10)
    assert got == [b"x" * 200_000] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_symlink_is_followed_and_its_target_replaced_whole(tmp_path: Path):
    target = tmp_path / "real.hlo"
    target.write_text("old")
    link = tmp_path / "link.hlo"
    link.symlink_to(target)
    write_file_atomically(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "made.hlo")
    write_file_atomically(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "made.hlo").read_text() == "made"


def test_a_socket_or_directory_target_is_refused(tmp_path: Path):
    import socket

    sock_path = tmp_path / "s"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        with pytest.raises(OutputError, match="it is a socket"):
            write_file_atomically(sock_path, "x")
    finally:
        sock.close()
    with pytest.raises(OutputError, match="it is a directory"):
        write_file_atomically(tmp_path, "x")


def test_hlo_opt_to_a_device_of_our_own_keeps_it_a_device(tmp_path: Path):
    import stat
    import subprocess
    import sys

    null, full = tmp_path / "null", tmp_path / "full"
    _mknod_char(null, 1, 3)
    _mknod_char(full, 1, 7)
    src = tmp_path / "m.hlo"
    src.write_text("ENTRY e { p = f32[4] parameter(0) ROOT n = f32[4] negate(p) }")
    opt = str(Path(sys.executable).parent / "hlo-opt")
    ok = subprocess.run([opt, str(src), "-o", str(null)], capture_output=True, text=True)
    assert ok.returncode == 0 and stat.S_ISCHR(null.stat().st_mode), ok.stderr
    bad = subprocess.run([opt, str(src), "-o", str(full)], capture_output=True, text=True)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == f"hlo-opt: error: cannot write '{full}': No space left on device"


# -- stop signals and standard output ---------------------------------------------------------------
def test_sigterm_during_a_write_removes_the_temporary_file(tmp_path: Path, monkeypatch):
    import signal

    from hlo_common.cli_stdio import SignalExit, stop_signals_raise

    target = tmp_path / "out.hlo"
    target.write_text("old")
    real_fsync = os.fsync

    def fsync_then_signal(fd):  # the signal lands while the temporary file is complete but not renamed
        real_fsync(fd)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(os, "fsync", fsync_then_signal)
    with pytest.raises(SignalExit) as info, stop_signals_raise():
        write_file_atomically(target, "x" * 1_000_000)
    assert info.value.signum == signal.SIGTERM
    assert os.listdir(tmp_path) == ["out.hlo"] and target.read_text() == "old"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # given back after the body


@pytest.mark.parametrize("name, code", [("SIGTERM", 143), ("SIGHUP", 129)])
def test_run_command_turns_a_stop_signal_into_its_exit_status(name: str, code: int, capsys):
    import signal

    sig = getattr(signal, name)
    with pytest.raises(SystemExit) as info:
        run_command("toy", lambda: os.kill(os.getpid(), sig) or sum(range(10)))
    assert info.value.code == code
    assert capsys.readouterr().err == f"toy: stopped by {name}\n"


def test_an_ignored_hangup_stays_ignored(capsys):
    import signal

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        assert run_command("toy", lambda: os.kill(os.getpid(), signal.SIGHUP) or 5) == 5
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def _big_module(path: Path, ops: int = 3000) -> Path:
    lines = ["HloModule big", "ENTRY e {", "  p = f32[8] parameter(0)"]
    lines += [f"  a{i} = f32[8] add({'p' if i == 0 else f'a{i - 1}'}, p)" for i in range(ops)]
    lines += [f"  ROOT r = f32[8] negate(a{ops - 1})", "}"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_a_reader_that_closes_early_is_an_error_whatever_the_buffering(tmp_path: Path, unbuffered: str):
    import subprocess
    import sys

    src = _big_module(tmp_path / "big.hlo")
    opt = str(Path(sys.executable).parent / "hlo-opt")
    env = dict(os.environ, PYTHONUNBUFFERED=unbuffered)
    proc = subprocess.Popen([opt, str(src), "--pipeline", "none"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdout.read(100).startswith(b"HloModule big")
    proc.stdout.close()  # as `| head -c 100` does
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 1
    assert err == "hlo-opt: error: cannot write to standard output: the reader closed the pipe\n"


def test_stdout_on_a_full_device_of_our_own_is_one_line(tmp_path: Path):
    import subprocess
    import sys

    full = tmp_path / "full"
    _mknod_char(full, 1, 7)
    src = tmp_path / "m.hlo"
    src.write_text("ENTRY e { p = f32[4] parameter(0) ROOT n = f32[4] negate(p) }")
    for tool, args in (("hlo-opt", []), ("hlo-codegen", ["--target", "host"])):
        with open(full, "wb") as out:
            proc = subprocess.run([str(Path(sys.executable).parent / tool), str(src), *args], stdout=out,
                                  stderr=subprocess.PIPE, text=True)
        assert proc.returncode == 1
        assert proc.stderr == f"{tool}: error: cannot write to standard output: No space left on device\n"


RELEASE_CHILD = """
import atexit, os, sys
import click
from hlo_common.cli_util import click_main, write_output

@click.command()
def cmd():
    write_output(None, b"output")

atexit.register(lambda: os.write(1, b" written at exit"))
sys.argv = ["tool"]
click_main(cmd, "tool")
"""


def test_a_tool_run_releases_stdout_when_its_command_is_done():
    """A reader of the pipe sees the end of the output when the command is done, not after the
    interpreter's teardown: what the process writes to descriptor 1 later goes to stderr."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", RELEASE_CHILD], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"output"
    assert proc.stderr.endswith(b" written at exit")
