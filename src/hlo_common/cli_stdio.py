"""Standard output and stop signals for the three CLIs (used by `hlo_common.cli_util.run_command`).

Where it sits: `run_command` wraps every command body in `guarded_stdout()` and
`stop_signals_raise()`.

- Standard output goes through a buffered writer of our own on file descriptor 1, whatever
  `PYTHONUNBUFFERED` says: Python's unbuffered stdout (a raw FileIO under a write-through text
  layer) drops the rest of a short write without a word, so `hlo-opt big.hlo | head -c 100`
  exited 0 after writing part of its output. The buffered writer retries short writes, and a
  failed write (closed pipe, full device) raises `StdoutError`, one line naming the reason; after
  that, stdout discards what is left so that Python's exit-time flush has nothing to complain
  about.
- SIGTERM and SIGHUP raise `SignalExit` in the main thread (SIGINT already raises
  KeyboardInterrupt), so every `finally` runs on the way out: a half-written temporary file is
  removed, a child process is stopped. A signal that was ignored when the tool started (`nohup`)
  stays ignored; a second signal of the same kind has its default effect.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import signal
import sys
import threading
from typing import Iterator

from hlo_common.errors import OutputError

STOP_SIGNALS = ("SIGTERM", "SIGHUP")


class StdoutError(OutputError):
    """Standard output cannot take what the tool writes (its reader went away, the device is full)."""


class SignalExit(BaseException):
    """A stop signal arrived; unwinding runs every cleanup, then the tool exits 128 + signum."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"


def stdout_reason(exc: OSError) -> str:
    if exc.errno == errno.EPIPE:
        return "the reader closed the pipe"
    return exc.strerror or str(exc)


class _StdoutRaw(io.RawIOBase):
    """File descriptor 1 as a raw stream that turns write failures into StdoutError and, once
    one happened, discards everything (the fd itself is never closed here)."""

    def __init__(self, fd: int):
        super().__init__()
        self._fd = fd
        self.failed = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int:
        if self.failed:
            return len(data)
        try:
            return os.write(self._fd, data)
        except InterruptedError:
            return 0  # the buffered writer above retries
        except OSError as exc:
            self.failed = True
            raise StdoutError(f"cannot write to standard output: {stdout_reason(exc)}") from None


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """Run the body with sys.stdout on `_StdoutRaw` (only when sys.stdout is the process's own;
    a test's captured stream is left alone); flush it on the way out."""
    original = sys.stdout
    try:
        fd = original.fileno() if original is sys.__stdout__ and original is not None else None
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        fd = None
    if fd is None:
        yield
        return
    original.flush()
    raw = _StdoutRaw(fd)
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding=original.encoding,
                                  errors=original.errors, line_buffering=original.line_buffering)
    try:
        yield
        sys.stdout.flush()
    finally:
        replacement, sys.stdout = sys.stdout, original
        try:  # what a failing body printed before it failed still goes out
            replacement.flush()
        except (OSError, StdoutError):
            raw.failed = True
        replacement.detach()  # the fd stays open: it is the process's stdout


def flush_stdout() -> None:
    """Flush sys.stdout now, so a failure is an error of the command rather than of Python's exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise StdoutError("cannot write to standard output: the reader closed the pipe") from None
    except OSError as exc:
        raise StdoutError(f"cannot write to standard output: {stdout_reason(exc)}") from None


def write_stdout(data: str | bytes, encoding: str = "utf-8") -> None:
    """Write `data` to standard output whole (a short write is retried), or raise StdoutError."""
    payload = data.encode(encoding) if isinstance(data, str) else bytes(data)
    flush_stdout()
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:  # a text-only stream (a test's capture)
        sys.stdout.write(payload.decode(encoding))
    else:
        try:
            stream.write(payload)
        except StdoutError:
            raise
        except OSError as exc:
            raise StdoutError(f"cannot write to standard output: {stdout_reason(exc)}") from None
    flush_stdout()


@contextlib.contextmanager
def stop_signals_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SignalExit while the body runs (main thread only; a signal
    someone ignored or handles is left as it is); the previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed: dict[int, object] = {}

    def handler(signum, _frame):
        signal.signal(signum, signal.SIG_DFL)  # a second one stops the process outright
        raise SignalExit(signum)

    for name in STOP_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is None or signal.getsignal(sig) != signal.SIG_DFL:
            continue
        installed[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, previous in installed.items():
            signal.signal(sig, previous)
