"""Reading a tool's input: a file path or `-` (stdin), as text, with clean errors.

All three CLIs start here. Every failure is an `InputError` (an `HloError`) naming the file:
a missing or unreadable path, a directory, empty input, binary input (a NUL byte) and text that
is not UTF-8, the last two at `name:line:col` of the first bad byte (the column counts the
characters before it on its line), and input longer than `MAX_INPUT_BYTES` (a device such as
/dev/zero or a pipe that never ends is an error, not an out-of-memory: a regular file's size is
checked before it is read, anything else is read a chunk at a time up to the cap, and text stops
at its first NUL byte). A UTF-8 byte-order mark is dropped.

    >>> src = read_source("model.hlo")          # doctest: +SKIP
    >>> src.text, src.name                       # doctest: +SKIP
    ('HloModule m ...', 'model.hlo')
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hlo_common.errors import InputError

STDIN_NAME = "<stdin>"
MAX_INPUT_BYTES = 1 << 30  # HLO text, a manifest: XLA's own test modules are far below 1 MB
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Source:
    """The text of one input and the name to use for it in messages (`file:line:col`)."""

    text: str
    name: str

    def __iter__(self):  # so that `text, name = read_source(path)` works
        return iter((self.text, self.name))


def read_source(path: str | os.PathLike | None, *, stdin: BinaryIO | None = None,
                allow_empty: bool = False) -> Source:
    """Read `path` (`-` or None: stdin) as UTF-8 text; raise InputError when it cannot be used."""
    if path is None or str(path) == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        data = read_capped(stream, STDIN_NAME, None, stop_at_nul=True)
        return decode_source(data, STDIN_NAME, allow_empty=allow_empty)
    name = str(path)
    return decode_source(read_bytes(name, stop_at_nul=True), name, allow_empty=allow_empty)


def read_bytes(name: str, limit: int | None = None, *, stop_at_nul: bool = False) -> bytes:
    """The bytes of a file, at most `limit` (default MAX_INPUT_BYTES), or an InputError that says
    why they cannot be had. With `stop_at_nul`, reading ends after the chunk holding the first NUL
    byte (the caller refuses binary input anyway)."""
    with open_input(name) as f:
        return read_capped(f, name, limit, stop_at_nul=stop_at_nul)


def open_input(name: str) -> BinaryIO:
    """`name` opened for reading in binary, or an InputError that says why it cannot be."""
    try:
        f = open(name, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise _read_error(name, exc) from None
    if stat.S_ISDIR(os.fstat(f.fileno()).st_mode):
        f.close()
        raise InputError(f"cannot read '{name}': it is a directory")
    return f


def read_capped(stream: BinaryIO, name: str, limit: int | None, *, stop_at_nul: bool = False) -> bytes:
    """Read `stream` to its end, refusing more than `limit` bytes (default MAX_INPUT_BYTES). A
    regular file's size is checked first; anything else is read a chunk at a time."""
    limit = MAX_INPUT_BYTES if limit is None else limit
    try:
        fileno = stream.fileno()
        st = os.fstat(fileno)
    except (OSError, AttributeError, ValueError):
        st = None  # an in-memory stream
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise _too_large(name, limit)
    chunks, total = [], 0
    try:
        while chunk := stream.read(CHUNK_BYTES):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _too_large(name, limit)
            if stop_at_nul and b"\0" in chunk:
                break
    except OSError as exc:
        raise _read_error(name, exc) from None
    return b"".join(chunks)


def _too_large(name: str, limit: int) -> InputError:
    return InputError(f"cannot read '{name}': more than {limit} bytes, the most read from one input "
                      "(a device or a pipe that does not end?)")


def _read_error(name: str, exc: OSError) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(f"cannot read '{name}': no such file")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"cannot read '{name}': it is a directory")
    if isinstance(exc, PermissionError):
        return InputError(f"cannot read '{name}': permission denied")
    return InputError(f"cannot read '{name}': {exc.strerror or exc}")


def decode_source(data: bytes, name: str, *, allow_empty: bool = False) -> Source:
    """Check and decode raw input bytes (see the module docstring for what is refused)."""
    nul = data.find(b"\0")
    if nul >= 0:
        line, col = byte_position(data, nul)
        raise InputError(f"{name}:{line}:{col}: binary input (NUL byte at byte offset {nul}); "
                         "expected HLO text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = byte_position(data, exc.start)
        raise InputError(f"{name}:{line}:{col}: not UTF-8 text: byte 0x{data[exc.start]:02x} "
                         f"({exc.reason}; byte offset {exc.start})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if not allow_empty and not text.strip():
        raise InputError(f"{name}: empty input")
    return Source(text, name)


def byte_position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column) of byte `offset`; the column counts the characters before it on its
    line (bytes that do not decode count one each)."""
    start = data.rfind(b"\n", 0, offset) + 1
    line = data.count(b"\n", 0, offset) + 1
    col = len(data[start:offset].decode("utf-8", "replace")) + 1
    return line, col
