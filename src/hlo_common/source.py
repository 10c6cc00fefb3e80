"""Reading a tool's input: a file path or `-` (stdin), as text, with clean errors.

All three CLIs start here. Every failure is an `InputError` (an `HloError`) naming the file:
a missing or unreadable path, a directory, empty input, binary input (a NUL byte) and text that
is not UTF-8, the last two at `name:line:col` of the first bad byte (the column counts the
characters before it on its line). A UTF-8 byte-order mark is dropped.

    >>> src = read_source("model.hlo")          # doctest: +SKIP
    >>> src.text, src.name                       # doctest: +SKIP
    ('HloModule m ...', 'model.hlo')
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hlo_common.errors import InputError

STDIN_NAME = "<stdin>"


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
        try:
            data = stream.read()
        except OSError as exc:
            raise InputError(f"cannot read {STDIN_NAME}: {exc.strerror or exc}") from None
        return decode_source(data, STDIN_NAME, allow_empty=allow_empty)
    name = str(path)
    return decode_source(read_bytes(name), name, allow_empty=allow_empty)


def read_bytes(name: str) -> bytes:
    """The bytes of a file, or an InputError that says why they cannot be had."""
    p = Path(name)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"cannot read '{name}': no such file") from None
    except IsADirectoryError:
        raise InputError(f"cannot read '{name}': it is a directory") from None
    except PermissionError:
        raise InputError(f"cannot read '{name}': permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot read '{name}': {exc.strerror or exc}") from None


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
