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


def read_capped(stream: BinaryIO, name: str, limit: int | None, *, stop_at_nul: bool = False,
                already: int = 0) -> bytes:
    """Read `stream` to its end, refusing more than `limit` bytes (default MAX_INPUT_BYTES) with the
    `already` read before from it. A regular file's size is checked first; anything else is read
    a chunk at a time."""
    limit = MAX_INPUT_BYTES if limit is None else limit
    try:
        fileno = stream.fileno()
        st = os.fstat(fileno)
    except (OSError, AttributeError, ValueError):
        st = None  # an in-memory stream
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise _too_large(name, limit)
    chunks, total = [], already
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


# -- every input form: HLO text, HloModuleProto (binary / text), HloSnapshot ----------------------
INPUT_FORMATS = ("hlo", "pb", "pbtxt", "snapshot", "stablehlo", "mhlo")
_SUFFIX_FORMATS = {".hlo": "hlo", ".txt": "hlo", ".pb": None, ".pbtxt": "pbtxt",
                   ".textproto": "pbtxt", ".mlir": "stablehlo", ".mlirbc": "stablehlo"}


@dataclass(frozen=True)
class Input:
    """One tool input as HLO text, whatever its form; `snapshot` is the hlo_common.proto.loader
    ProtoInput of a snapshot (its arguments and result), else None."""

    text: str
    name: str
    format: str
    snapshot: object | None = None

    def __getitem__(self, k):  # `text, name = read_input(path)[:2]`
        return (self.text, self.name, self.format, self.snapshot)[k]


_SNIFF_BYTES = 4096


def _sniff_and_read(stream: BinaryIO, name: str, fmt: str | None) -> tuple[bytes, str | None]:
    """The input's bytes and its format: the first block decides it when `fmt` is None, and text
    is read only to its first NUL byte (decode_source refuses it there)."""
    try:
        head = stream.read(_SNIFF_BYTES) if fmt is None else b""
    except OSError as exc:
        raise _read_error(name, exc) from None
    if fmt is None:
        fmt = "hlo" if head[:1] == b"\0" else detect_format(name, head)
    text = fmt == "hlo"
    if text and b"\0" in head:
        return head, fmt
    rest = read_capped(stream, name, None, stop_at_nul=text, already=len(head))
    return head + rest, fmt


def detect_format(name: str, data: bytes) -> str | None:
    """The format a file's name or first bytes say (None: some binary proto, told by parsing)."""
    suffix = Path(name).suffix.lower()
    if suffix == ".txt":  # XLA's text dumps, or `jax.jit(f).lower(x).as_text()` saved as .txt
        from hlo_common.proto.mlir_input import looks_like_mlir

        return "stablehlo" if looks_like_mlir(data[:4096].lstrip()) else "hlo"
    if suffix in _SUFFIX_FORMATS:
        return _SUFFIX_FORMATS[suffix]
    head = data[:4096].lstrip()
    from hlo_common.proto.mlir_input import looks_like_mlir

    if looks_like_mlir(head):
        return "stablehlo"  # the converter reads MHLO as well
    if b"\0" in head or not _is_utf8(head):
        return None
    if head.startswith((b"HloModule", b"//", b"ENTRY", b"%", b"{", b"FileNames")):
        return "hlo"
    if head.startswith((b"name:", b"computations", b"hlo_module", b"hlo {", b"hlo{", b"#")):
        return "pbtxt"
    return "hlo"


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(data) - 4  # a character cut at the end of the sniffed block
    return True


def read_input(path: str | os.PathLike | None, fmt: str | None = None, *,
               stdin: BinaryIO | None = None) -> Input:
    """Read `path` (`-` or None: stdin) in format `fmt` (one of INPUT_FORMATS; None: from the file
    name and first bytes) and give it as HLO text; the proto forms go through
    hlo_common.proto (their module printed, so the tools' usual parsing and checks follow). Input
    that starts with a NUL byte is no proto (no field has number 0) and is refused as binary
    text at once, as read_source refuses it, without reading a device such as /dev/zero to the cap."""
    if fmt == "hlo":
        text, name = read_source(path, stdin=stdin)
        return Input(text, name, "hlo")
    if path is None or str(path) == "-":
        stream, name = (stdin if stdin is not None else sys.stdin.buffer), STDIN_NAME
        data, fmt = _sniff_and_read(stream, name, fmt)
    else:
        name = str(path)
        with open_input(name) as stream:
            data, fmt = _sniff_and_read(stream, name, fmt)
    if fmt == "hlo":
        text, name = decode_source(data, name)
        return Input(text, name, "hlo")
    if not data:
        raise InputError(f"{name}: empty input")
    from hlo_common.hlo.printer import print_module
    from hlo_common.proto.loader import read_proto_input

    loaded = read_proto_input(data, name, fmt)
    snapshot = loaded if loaded.format == "snapshot" else None
    return Input(print_module(loaded.module), name, loaded.format, snapshot)


class _FilePlace:
    """Where an instruction of a module read from a proto or from StableHLO sits: its file. The text
    the tools parse for such a module is the reader's own, so a line:col of it would point at
    nothing the user wrote; the verifier's errors then name the file, computation and instruction."""

    def __init__(self, name: str):
        self.name = name

    def place(self, pos: int) -> str:
        return self.name


def place_in_input(module, inp: Input):
    """`module`, parsed from `inp.text`, with its instructions placed in `inp`'s file rather than at a
    line of `inp.text` when that text was made from another form (see _FilePlace)."""
    if inp.format != "hlo":
        where = (_FilePlace(inp.name), 0)
        for comp in module.computations:
            for instr in comp.instructions:
                instr.source = where
    return module
