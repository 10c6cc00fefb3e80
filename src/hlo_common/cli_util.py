"""What the three CLIs share: error reporting with exit codes, and whole-or-nothing output files.

The contract (design/cli.md): a user error prints one line `<tool>: error: <message>` (plus the
excerpt with a caret for parse errors) to stderr and exits 1; an unexpected exception is a
one-line internal error, also exit 1; a usage error is click's business (exit 2); the Python
traceback appears only with `--debug`. Output files are written to a temporary file in the same
directory and renamed into place, so a failure never leaves a half-written file; an existing
device or FIFO (`-o /dev/null`) is written through instead, never replaced. Standard output is
written whole or the command fails, and SIGTERM / SIGHUP unwind like ^C, removing temporary files
on the way (`hlo_common.cli_stdio`).

    @click.command()
    @click.option("--debug", is_flag=True)
    @cli_errors("hlo-opt")
    def main(debug: bool) -> None:
        ...
"""

from __future__ import annotations

import functools
import os
import stat
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, NoReturn, TextIO

from hlo_common.cli_stdio import SignalExit, StdoutError, flush_stdout, guarded_stdout, stop_signals_raise, \
    write_stdout
from hlo_common.errors import HloError, OutputError

_MAX_MESSAGE = 400


def error_lines(tool: str, exc: BaseException, debug: bool = False) -> list[str]:
    """The lines to print for `exc`: `<tool>: error: ...` and, for parse errors, the excerpt."""
    if isinstance(exc, HloError):
        lines = [f"{tool}: error: {_clip(exc.one_line())}"]
        excerpt = exc.excerpt()
        if excerpt:
            lines.append(excerpt)
        return lines
    text = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {_clip(text[0])}" if text else type(exc).__name__
    hint = "" if debug else " (run with --debug for the traceback)"
    return [f"{tool}: error: internal error: {detail}{hint}"]


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."


def report_error(tool: str, exc: BaseException, debug: bool = False, stream: TextIO | None = None) -> None:
    """Print `exc` for the user on stderr: the traceback first when debugging, then one line."""
    stream = stream if stream is not None else sys.stderr
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=stream)
    for line in error_lines(tool, exc, debug):
        print(line, file=stream)
    stream.flush()


def run_command(tool: str, body: Callable[[], Any], debug: bool = False) -> Any:
    """Run a command body; turn every failure into a message and exit status 1 (130 for ^C, 128 + n
    for SIGTERM and SIGHUP, after the body's cleanups ran).

    Standard output is flushed before the body counts as done, so a closed pipe or a full device
    is the command's one-line error whatever the buffering (`hlo_common.cli_stdio`). Click's own
    exceptions (usage errors, `--help`) and SystemExit pass through untouched."""
    try:
        with stop_signals_raise(), guarded_stdout():
            result = body()
            flush_stdout()
            return result
    except SystemExit:
        raise
    except KeyboardInterrupt:
        print(f"{tool}: interrupted", file=sys.stderr)
        sys.exit(130)
    except SignalExit as exc:
        print(f"{tool}: stopped by {exc.name}", file=sys.stderr)
        sys.exit(128 + exc.signum)
    except BrokenPipeError:
        report_error(tool, StdoutError("cannot write to standard output: the reader closed the pipe"))
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - nothing but one line may reach the user
        if _is_click_exception(exc):
            raise
        report_error(tool, exc, debug)
        sys.exit(1)


def cli_errors(tool: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a click command callback that has a `debug` parameter: `run_command` around it."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return run_command(tool, lambda: fn(*args, **kwargs), bool(kwargs.get("debug", False)))

        return wrapper

    return decorate


def tune_gc_for_one_shot_run() -> None:
    """A tool run builds one large graph of objects that live until it ends: Python's default
    collector thresholds rescan it thousands of times (a fifth of hlo-opt's time on a 20,000-op
    module). Young collections are made rarer and old ones much rarer; cycles are still freed.
    A young generation of 500,000 objects: at 100,000 a compile of a module of a few thousand ops
    (linx, inlined) paid one collection of 10-15 ms that freed nothing, a 10,000-op stack one of
    100 ms; peak memory the same there, 61 -> 68 MB on linx."""
    import gc

    gc.set_threshold(500_000, 50, 1000)


def skip_exit_collection() -> None:
    """At the end of a tool run nothing is left to free: the interpreter's collection at exit
    would walk the whole graph once more only to drop the process (a tenth of hlo-opt's time on a
    20,000-op module). Frozen objects are left to the exit; atexit handlers still run."""
    import gc

    gc.disable()
    gc.freeze()


def click_main(command: Any, tool: str, argv: list[str] | None = None) -> NoReturn:
    """A tool's console entry point: run the click `command`; a usage error (a bad flag value, an
    unknown option) is one line `<tool>: error: ...` and exit status 2, as every other error is
    one line; `--help` and the command's own exit status pass through."""
    import click

    if argv is None:
        tune_gc_for_one_shot_run()
    try:
        status = command.main(args=argv, prog_name=tool, standalone_mode=False)
    except click.UsageError as exc:
        print(f"{tool}: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(2)
    except click.Abort:
        print(f"{tool}: error: aborted", file=sys.stderr)
        sys.exit(1)
    if argv is None:
        release_stdout()
        skip_exit_collection()
    sys.exit(status if isinstance(status, int) else 0)


def release_stdout() -> None:
    """The command is done and its output flushed: descriptor 1 becomes a copy of descriptor 2, so
    a reader of the pipe (`hlo-opt m.hlo | hlo-codegen`) sees the end of the output at once rather
    than after the interpreter's teardown (10-13 ms after hlo-opt's last byte on a module that
    inlines to a few thousand ops, time the next tool waited). Anything written to standard output
    after that goes to standard error, not lost, and no file can take descriptor 1's place."""
    try:
        sys.stdout.flush()
        os.dup2(2, 1)
    except (OSError, ValueError):  # a closed or unusual stdout: the exit closes it anyway
        pass


def fail(tool: str, message: str) -> NoReturn:
    """Print `<tool>: error: <message>` and exit 1 (for checks made by the CLI itself)."""
    print(f"{tool}: error: {message}", file=sys.stderr)
    sys.exit(1)


def _is_click_exception(exc: BaseException) -> bool:
    try:
        import click
    except ImportError:  # pragma: no cover - click is a dependency
        return False
    return isinstance(exc, (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort))


# -- output ---------------------------------------------------------------------------------------
def write_file_atomically(path: str | os.PathLike, data: str | bytes, encoding: str = "utf-8") -> None:
    """Write `data` to `path` whole or not at all, without replacing what is not a regular file.

    A symlink is followed to its target. A regular file (or a new path) gets a temporary file in
    the same directory, flushed to disk, then renamed over it; on any failure the temporary file
    is removed, the target is left as it was, and an OutputError says why. Any other existing
    target (a character or block device such as /dev/null or /dev/full, a FIFO) is opened and
    written through, so it stays what it is; a socket or a directory is refused."""
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else bytes(data)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"cannot write '{path}': {_reason(exc)}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_through(path, target, st, payload)
        return
    _replace_whole(path, target, payload)


def _replace_whole(path, target: Path, payload: bytes) -> None:
    """The regular-file rule: a temporary file beside the target, synced, renamed over it. Its
    name is chosen before it exists, so that whatever interrupts the write (an error, ^C, SIGTERM
    turned into SignalExit) finds it and removes it."""
    directory = target.parent if str(target.parent) else Path(".")
    tmp = directory / f".{target.name}.{os.urandom(6).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException as exc:
        if not isinstance(exc, FileExistsError):  # else the name is someone else's (48 random bits)
            _remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write '{path}': {_reason(exc)}") from None
        raise


def _remove_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_through(path, target: Path, st: os.stat_result, payload: bytes) -> None:
    """Write into an existing device or FIFO in place (never rename over it)."""
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"cannot write '{path}': it is a directory")
    if stat.S_ISSOCK(st.st_mode):
        raise OutputError(f"cannot write '{path}': it is a socket")
    try:
        with open(target, "wb", buffering=0) as f:
            view = memoryview(payload)
            while view:
                view = view[f.write(view):]
    except OSError as exc:
        raise OutputError(f"cannot write '{path}': {_reason(exc)}") from None


def write_output(path: str | os.PathLike | None, data: str | bytes) -> None:
    """Write `data` to stdout (`path` None or `-`) whole, or atomically to the file `path`."""
    if path is None or str(path) == "-":
        write_stdout(data)
        return
    write_file_atomically(path, data)


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "it is a directory"
    return exc.strerror or str(exc)


NOTES_LOGGER = "hlo_notes"  # what passes say for --verbose (a decision a user may want to know)


class pass_notes:  # noqa: N801 - a context manager used like a function
    """`--verbose`: the notes of the passes (the `hlo_notes` logger, e.g. a convolution cuDNN
    cannot take that stays ours) go to stderr, one line each, as `TOOL: note: ...`; without it
    they are dropped."""

    def __init__(self, tool: str, enabled: bool = True):
        self.tool, self.enabled = tool, enabled

    def __enter__(self) -> pass_notes:
        import logging

        tool = self.tool

        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:  # sys.stderr of the moment
                print(f"{tool}: note: {record.getMessage()}", file=sys.stderr)

        self.logger, self.handler = logging.getLogger(NOTES_LOGGER), Handler()
        self.level = self.logger.level
        if self.enabled:
            self.logger.addHandler(self.handler)
            self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.logger.removeHandler(self.handler)
            self.logger.setLevel(self.level)
