"""Large LiteralProto value fields moved as bytes, not Python lists: protobuf's Python API fills and
reads a `repeated float` one element at a time, which for a 100M-element constant (XLA's corpus
has one) takes minutes and gigabytes. The packed wire form of a fixed-width field (f32s, f64s,
c64s, c128s) is the little-endian array itself, and that of `preds` one byte per bool, so numpy
writes and reads it directly (protobuf's encoding: https://protobuf.dev/programming-guides/encoding/).

    >>> from hlo_common.proto.messages import LiteralProto
    >>> lit = LiteralProto()
    >>> set_packed(lit, "f32s", np.array([1.5, -2], np.float32)); list(lit.f32s)
    [1.5, -2.0]
    >>> packed_values(lit, "f32s").tolist()
    [1.5, -2.0]
"""

from __future__ import annotations

import numpy as np

WIRE_DTYPES = {"f32s": "<f4", "f64s": "<f8", "c64s": "<f4", "c128s": "<f8", "preds": "u1"}
_LENGTH_DELIMITED = 2


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def set_packed(message, field: str, values: np.ndarray) -> None:
    """Append `values` to repeated field `field` (a WIRE_DTYPES one) of `message`."""
    number = message.DESCRIPTOR.fields_by_name[field].number
    data = np.ascontiguousarray(values, dtype=WIRE_DTYPES[field]).tobytes()
    message.MergeFromString(_varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(data)) + data)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def packed_values(message, field: str) -> np.ndarray:
    """The values of repeated field `field` (a WIRE_DTYPES one) of `message` as a numpy array,
    read from the message's packed encoding (what a serializer writes for proto3 repeated scalars)."""
    number = message.DESCRIPTOR.fields_by_name[field].number
    buf = message.SerializeToString()
    pos, parts = 0, []
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        wire = key & 7
        if wire == 0:
            _, pos = _read_varint(buf, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        elif wire == _LENGTH_DELIMITED:
            size, pos = _read_varint(buf, pos)
            if key >> 3 == number:
                parts.append(np.frombuffer(buf, dtype=WIRE_DTYPES[field], count=size // np.dtype(
                    WIRE_DTYPES[field]).itemsize, offset=pos))
            pos += size
        else:
            raise ValueError(f"unexpected wire type {wire} in a LiteralProto")
    if not parts:
        return np.zeros(0, dtype=WIRE_DTYPES[field])
    return np.concatenate(parts) if len(parts) != 1 else parts[0]
