r"""String and JSON text helpers shared by the HLO parser and printer.

XLA writes strings with absl::CEscape (`\n`, `\"`, `\'`, octal `\ooo` for other bytes) and reads
them with CUnescape; backend configs are JSON objects printed raw (`backend_config={...}`) or other
strings printed quoted. These functions reproduce both directions.

    >>> print(quote_string("it's \"x\""))
    "it\'s \"x\""
    >>> format_json({"b": 1, "a": [1, 2]})
    '{"b":1,"a":[1,2]}'
"""

from __future__ import annotations

import json
from typing import Any

# -- strings (absl::CEscape / CUnescape) ----------------------------------------------------------
_ESCAPES = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x27: "\\'", 0x5C: "\\\\"}
_UNESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, '"': 0x22, "'": 0x27, "\\": 0x5C, "?": 0x3F,
              "a": 0x07, "b": 0x08, "f": 0x0C, "v": 0x0B}


def c_escape(s: str) -> str:
    """XLA's string escaping (absl::CEscape) of the UTF-8 bytes: `\\n`, `\\"`, `\\'`, octal `\\ooo`."""
    out = []
    for b in s.encode("utf-8", "surrogateescape"):
        if b in _ESCAPES:
            out.append(_ESCAPES[b])
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


def c_unescape(body: str) -> str:
    """Inverse of `c_escape` for the text between the quotes; ValueError on a bad escape."""
    if "\\" not in body:
        return body
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError("string ends in a lone backslash")
        e = body[i + 1]
        if e in _UNESCAPES:
            out.append(_UNESCAPES[e])
            i += 2
        elif e in "01234567":
            j = i + 1
            while j < n and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1:j], 8) & 0xFF)
            i = j
        elif e == "x":
            j = i + 2
            while j < n and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                raise ValueError("\\x escape without hex digits")
            out.append(int(body[i + 2:j], 16) & 0xFF)
            i = j
        else:
            raise ValueError(f"unknown escape '\\{e}'")
    return out.decode("utf-8", "surrogateescape")


def quote_string(s: str) -> str:
    """A string literal as XLA prints it: double quotes around the CEscape'd text."""
    return f'"{c_escape(s)}"'


# -- backend_config / JSON ------------------------------------------------------------------------
def parse_json_object(text: str) -> dict | None:
    """The JSON object `text` holds (key order kept), or None when it is not one."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def format_json(value: Any) -> str:
    """Compact JSON, the way XLA prints a backend config it holds as a proto."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def lexes_as_json_dict(s: str) -> bool:
    """XLA prints a backend_config raw (unquoted) when it reads as a `{...}` JSON-like dict."""
    if not (s.startswith("{") and s.endswith("}")):
        return False
    depth, i, n = 0, 0, len(s)
    while i < n:
        c = s[i]
        if c == '"':
            i += 1
            while i < n and s[i] != '"':
                i += 2 if s[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and i != n - 1:
                return False
        i += 1
    return depth == 0


def format_backend_config(value: dict | str | None) -> str | None:
    """The text after `backend_config=`: compact JSON for a dict, else the (quoted) string."""
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        return format_json(value)
    return value if lexes_as_json_dict(value) else quote_string(value)
