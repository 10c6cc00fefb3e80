"""The low level of the HLO text parser: scanning tokens over the raw text, and shapes.

`Scanner` walks the text with compiled regular expressions (no separate token list, so every
error knows its exact FILE:LINE:COL) and reads the pieces every part of the grammar shares:
names, integers, quoted strings (C escapes, as XLA's lexer), balanced `{...}` values, shapes
with layouts (`f32[2,4]{1,0:T(8,128)}`, tuples, `b(...)` buffers, `<=N` / `?` dynamic dims).
`hlo_common.hlo.parser` builds modules on top of it.
"""

from __future__ import annotations

import re

from hlo_common.hlo.attributes import c_unescape
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.errors import HloParseError
from hlo_common.hlo.shape import Layout, Shape

NAME_RE = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
INT_RE = re.compile(r"-?\d+")
NUMBER_RE = re.compile(r"-?(?:nan(?:\(0x[0-9a-fA-F]+\))?|inf|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
STRING_RE = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)
WS_RE = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)+", re.S)
_FOUND_RE = re.compile(r"[A-Za-z0-9_.%\-]+|.", re.S)
_RAW_PIECE_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'|\s+|[^\s"\']+', re.S)
_LAYOUT_KEYS = ("SC", "D", "T", "L", "#", "*", "E", "S", "P", "M")
_INT_EXTRA_RE = re.compile(r"\(\s*(\d+)\s*\)")
_UTYPE_EXTRA_RE = re.compile(r"\(\s*(u8|u16|u32|u64)\s*\)")
_TILE_RE = re.compile(r"\((?:\s*(?:\d+|\*)\s*(?:,\s*(?:\d+|\*)\s*)*)?\)")
_DIM_LEVEL_RE = re.compile(r"\((?:\s*[DCSH]\+?~?\s*(?:,\s*[DCSH]\+?~?\s*)*)?\)")
_SPLIT_CONFIG_RE = re.compile(r"\(\s*\d+\s*:\s*\d+\s*(?:,\s*\d+\s*)*\)")
_SIMPLE_SHAPE_RE = re.compile(r"([a-z][a-z0-9]*)\[([<=\d,]*)\](?:\{(\d[\d,]*)\})?")
_SHAPE_CACHE: dict[str, Shape] = {}
_WS_START = frozenset(" \t\n\r\f\v/")
MAX_NESTING = 200  # deeper tuples / braces are rejected instead of exhausting the stack


MAX_ARRAY_BYTES = (1 << 63) - 1


def array_size_problem(shape: Shape) -> str | None:
    """Why an array shape cannot exist: more bytes than an int64 counts (XLA's ValidateShape
    refuses a shape whose size may overflow int64_t). Dynamic `?` dimensions count as 0."""
    if not shape.is_array:
        return None
    elements = 1
    for d in shape.dims:
        elements *= max(d, 0)
    nbytes = (elements * shape.element_type.bits + 7) // 8
    if nbytes > MAX_ARRAY_BYTES:
        return (f"shape {shape.to_string(print_layout=False)} holds {nbytes} bytes; an array may hold at "
                "most 2^63-1 bytes")
    return None


class SourceText:
    """The text a module was parsed from: each parsed instruction keeps (SourceText, offset) as
    `source`, so that a later message (a run-time limit, the verifier) can say FILE:LINE:COL."""

    __slots__ = ("text", "filename", "line_offset")

    def __init__(self, text: str, filename: str, line_offset: int):
        self.text = text
        self.filename = filename
        self.line_offset = line_offset

    def place(self, pos: int) -> str:
        line_start = self.text.rfind("\n", 0, pos) + 1
        line = self.text.count("\n", 0, pos) + 1 + self.line_offset
        return f"{self.filename}:{line}:{pos - line_start + 1}"


class Scanner:
    def __init__(self, text: str, filename: str, line_offset: int = 0):
        self.text = text
        self.filename = filename
        self.line_offset = line_offset
        self.pos = 0
        self.source_text = SourceText(text, filename, line_offset)

    # -- errors ---------------------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> HloParseError:
        """An HloParseError at `pos` (default: the current position), with its source line."""
        pos = self.pos if pos is None else pos
        pos = max(0, min(pos, len(self.text)))
        line_start = self.text.rfind("\n", 0, pos) + 1
        line_end = self.text.find("\n", pos)
        if line_end < 0:
            line_end = len(self.text)
        line = self.text.count("\n", 0, pos) + 1 + self.line_offset
        return HloParseError(message, self.filename, line, pos - line_start + 1,
                             self.text[line_start:line_end])

    def found(self) -> str:
        """The token at the current position, for messages."""
        self.ws()
        if self.pos >= len(self.text):
            return "end of input"
        m = _FOUND_RE.match(self.text, self.pos)
        tok = m.group(0)
        return f"'{tok[:40]}'" if tok.isprintable() else repr(tok)

    # -- tokens ---------------------------------------------------------------------------------
    def ws(self) -> None:
        text, pos = self.text, self.pos
        if pos < len(text) and text[pos] in _WS_START:
            m = WS_RE.match(text, pos)
            if m:
                self.pos = m.end()

    def peek(self, s: str) -> bool:
        text, pos = self.text, self.pos
        if pos < len(text) and text[pos] in _WS_START:
            self.ws()
        return text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        text, pos = self.text, self.pos
        if pos < len(text) and text[pos] in _WS_START:
            self.ws()
            pos = self.pos
        if text.startswith(s, pos):
            self.pos = pos + len(s)
            return True
        return False

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.accept(s):
            raise self.error(f"expected '{s}'{' ' + what if what else ''}, found {self.found()}")

    def at_end(self) -> bool:
        self.ws()
        return self.pos >= len(self.text)

    def name(self, what: str = "a name") -> str:
        self.ws()
        m = NAME_RE.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = m.end()
        return m.group(1)

    def peek_name(self) -> str | None:
        self.ws()
        m = NAME_RE.match(self.text, self.pos)
        return m.group(1) if m else None

    def word(self, what: str) -> str:
        """An identifier-like value (`kLoop`, `LT`, `API_VERSION_STATUS_RETURNING`, `high`)."""
        self.ws()
        m = IDENT_RE.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = m.end()
        return m.group(0)

    def integer(self, what: str = "an integer") -> int:
        self.ws()
        m = INT_RE.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self.found()}")
        if len(m.group(0)) > 21:  # beyond 64 bits either way
            raise self.error(f"integer {m.group(0)[:24]}... is out of range")
        self.pos = m.end()
        return int(m.group(0))

    def number(self, what: str = "a number") -> float:
        self.ws()
        m = NUMBER_RE.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = m.end()
        tok = m.group(0)
        if "nan" in tok:
            return float("-nan") if tok.startswith("-") else float("nan")
        return float(tok)

    def string(self) -> str:
        """A double-quoted string with C escapes (absl::CUnescape)."""
        self.ws()
        m = STRING_RE.match(self.text, self.pos)
        if not m:
            if self.text.startswith('"', self.pos):
                raise self.error("unterminated string")
            raise self.error(f"expected a quoted string, found {self.found()}")
        try:
            value = c_unescape(m.group(1))
        except ValueError as exc:
            raise self.error(f"bad string: {exc}") from None
        self.pos = m.end()
        return value

    def raw_value(self) -> str:
        """Text of an attribute value up to the next top-level ',' / whitespace / closer, with
        runs of whitespace inside brackets collapsed to one space."""
        self.ws()
        start = i = self.pos
        text, n = self.text, len(self.text)
        depth = 0
        while i < n:
            c = text[i]
            if c == '"' or c == "'":
                i = self._skip_quoted(i)
                continue
            if c in "{[(":
                depth += 1
            elif c in "}])":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (c == "," or c.isspace()):
                break
            i += 1
        if depth:
            raise self.error("unbalanced brackets in attribute value", start)
        if i == start:
            raise self.error(f"expected an attribute value, found {self.found()}")
        self.pos = i
        return normalize_space(text[start:i])

    def _skip_quoted(self, i: int) -> int:
        """Index after the string starting at `i` (double quotes with escapes, or single)."""
        text, n, q = self.text, len(self.text), self.text[i]
        j = i + 1
        while j < n and text[j] != q:
            j += 2 if (text[j] == "\\" and q == '"') else 1
        if j >= n:
            raise self.error("unterminated string", i)
        return j + 1

    def balanced(self, open_: str = "{", close: str = "}") -> str:
        """Consume `{...}` (nesting and strings respected) and return the inner text."""
        self.expect(open_)
        start = i = self.pos
        depth = 1
        text, n = self.text, len(self.text)
        while i < n:
            c = text[i]
            if c == '"':
                i = self._skip_quoted(i)
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    self.pos = i + 1
                    return text[start:i]
            i += 1
        raise self.error(f"unterminated '{open_}'", start - 1)

    # -- shapes ---------------------------------------------------------------------------------
    def at_shape(self) -> bool:
        """True when a shape starts here: a type keyword with `[`, `(`, or `b(`."""
        self.ws()
        text, pos = self.text, self.pos
        if text.startswith("(", pos) or text.startswith("b(", pos):
            return True
        m = IDENT_RE.match(text, pos)
        return bool(m and m.group(0) in PRIMITIVE_TYPES and text.startswith("[", m.end()))

    def shape(self, depth: int = 0) -> Shape:
        """A shape; plain array shapes (`f32[2,4]{1,0}`) are cached by their text."""
        self.ws()
        m = _SIMPLE_SHAPE_RE.match(self.text, self.pos)
        if m is None or (m.group(3) is None and self._at_layout_from(m.end())):
            return self._shape(depth)
        key = m.group(0)
        cached = _SHAPE_CACHE.get(key)
        if cached is not None:
            self.pos = m.end()
            return cached
        shape = self._shape(depth)
        if self.pos == m.end():
            if len(_SHAPE_CACHE) > 50000:
                _SHAPE_CACHE.clear()
            _SHAPE_CACHE[key] = shape
        return shape

    def _shape(self, depth: int) -> Shape:
        if depth > MAX_NESTING:
            raise self.error("shape nested too deeply")
        start = self.pos
        if self.text.startswith("b(", self.pos):
            self.pos += 2
            inner = self.shape(depth + 1)
            self.expect(")", "to close the buffer shape")
            if not inner.is_array:
                raise self.error(f"a buffer shape holds an array, not {inner}", start)
            return Shape.buffer(inner)
        if self.accept("("):
            elems = []
            if not self.accept(")"):
                while True:
                    elems.append(self.shape(depth + 1))
                    if self.accept(")"):
                        break
                    self.expect(",", "between tuple element shapes")
            return Shape.tuple_of(elems)
        m = IDENT_RE.match(self.text, self.pos)
        if not m or m.group(0) not in PRIMITIVE_TYPES:
            raise self.error(f"expected a shape, found {self.found()}")
        etype = PRIMITIVE_TYPES[m.group(0)]
        self.pos = m.end()
        if not self.text.startswith("[", self.pos):
            raise self.error("expected '[' after the element type", self.pos)
        self.pos += 1
        dims, dyn = self._dimensions(start)
        layout = self.layout(len(dims)) if self._at_layout() else None
        if not etype.is_array_type:
            if dims:
                raise self.error(f"{etype.name} shape cannot have dimensions", start)
            if layout is not None and (layout.minor_to_major or layout.extras):
                raise self.error(f"{etype.name} shape cannot have a layout", start)
            return Shape(etype, (), None, None, ())
        if layout is None:
            layout = Layout.default(len(dims))
        shape = Shape(etype, tuple(dims), layout, None, tuple(dyn))
        problem = array_size_problem(shape)
        if problem is not None:
            raise self.error(problem, start)
        return shape

    def _dimensions(self, start: int) -> tuple[list[int], list[str]]:
        dims: list[int] = []
        dyn: list[str] = []
        if self.accept("]"):
            return dims, dyn
        while True:
            if self.accept("?"):
                dims.append(-1)
                dyn.append("?")
            else:
                bounded = self.accept("<=")
                pos = self.pos
                dims.append(self.integer("a dimension size"))
                dyn.append("<=" if bounded else "")
                if dims[-1] < 0:
                    raise self.error("negative dimension size", pos)
            if self.accept("]"):
                return dims, dyn
            self.expect(",", "between dimensions")

    def _at_layout(self) -> bool:
        return self._at_layout_from(self.pos)

    def _at_layout_from(self, pos: int) -> bool:
        """A `{` after a shape starts a layout when an integer or ':' follows (as XLA decides)."""
        m = WS_RE.match(self.text, pos)
        p = m.end() if m else pos
        if not self.text.startswith("{", p):
            return False
        m = WS_RE.match(self.text, p + 1)
        q = m.end() if m else p + 1
        return q < len(self.text) and (self.text[q].isdigit() or self.text[q] == ":")

    def layout(self, rank: int) -> Layout:
        start = self.pos
        self.expect("{")
        m2m: list[int] = []
        if not self.peek("}") and not self.peek(":"):
            while True:
                m2m.append(self.integer("a layout dimension"))
                if not self.accept(","):
                    break
        extras = self._layout_extras() if self.accept(":") else []
        self.expect("}", "to close the layout")
        if len(m2m) != rank or sorted(m2m) != list(range(rank)):
            raise self.error(f"layout {{{','.join(map(str, m2m))}}} is not a permutation of the "
                             f"{rank} dimensions", start)
        return Layout(tuple(m2m), tuple(extras))

    def _layout_extras(self) -> list[tuple[str, str]]:
        extras: list[tuple[str, str]] = []
        while not self.peek("}"):
            key = next((k for k in _LAYOUT_KEYS if self.text.startswith(k + "(", self.pos)), None)
            if key is None or any(k == key for k, _ in extras):
                what = "repeated" if key else "unknown"
                raise self.error(f"{what} layout attribute {self.found()}")
            self.pos += len(key)
            extras.append((key, self._layout_extra_value(key)))
        return extras

    def _layout_extra_value(self, key: str) -> str:
        text, pos = self.text, self.pos
        if key == "P":
            self.expect("(")
            inner = self.shape()
            self.expect(")", "to close the physical shape")
            return str(inner)
        pattern = {"T": _TILE_RE, "D": _DIM_LEVEL_RE, "SC": _SPLIT_CONFIG_RE, "#": _UTYPE_EXTRA_RE,
                   "*": _UTYPE_EXTRA_RE}.get(key, _INT_EXTRA_RE)
        pieces = []
        while True:
            m = pattern.match(text, self.pos)
            if not m:
                break
            pieces.append(re.sub(r"\s+", "", m.group(0)))
            self.pos = m.end()
            if key not in ("T", "SC"):
                break
        if not pieces:
            raise self.error(f"malformed layout attribute '{key}'", pos)
        joined = "".join(pieces)
        # Layout keeps the tiles with their parentheses and the other extras without the outer
        # pair, so that `SC(0:1)(1:2)` is stored as "0:1)(1:2" and prints back unchanged.
        return joined if key == "T" else joined[1:-1]


def normalize_space(text: str) -> str:
    """Collapse whitespace runs outside quoted strings to one space, so raw attribute text
    prints on one line (XLA's own spacing, such as `{ {0}: (0, {}) }`, is kept)."""
    if "\n" not in text and "\t" not in text and "  " not in text and "\r" not in text:
        return text
    return "".join(" " if piece[0].isspace() else piece for piece in _RAW_PIECE_RE.findall(text)).strip()
