"""Reading literal text (constants, `literal=` attributes) into numpy values, as XLA's parser does.

Grammar (xla/hlo/parser/hlo_parser.cc, ParseDenseLiteral): a scalar is one value (`1.5`, `-inf`,
`nan(0x1)`, `true`, complex `(1, 2)`); an array is nested braces with exactly the shape's
counts per dimension (commas are separators XLA skips); `{...}` at the first level stands for
values that were not printed; a tuple is `( lit, lit )`. A single scalar given for an array shape
is accepted the way XLA accepts it: the value goes to element 0, the rest are zero (so
`f32[10000,10000] constant(0)` is a zero splat, kept as a broadcast view without materializing
10^8 elements).
"""

from __future__ import annotations

import re

import numpy as np

from hlo_common.hlo.literal import (
    LiteralError, first_element_literal, garbage_literal, is_zero_splat, values_to_array,
)
from hlo_common.hlo.parser_scanner import MAX_NESTING, Scanner
from hlo_common.hlo.shape import Shape

_LIT_TOKEN_RE = re.compile(
    r"-?nan\(0x[0-9a-fA-F]+\)|\s+|//[^\n]*|/\*.*?\*/|[{}(),]|\.\.\.|[^\s{}(),/]+|/", re.S)


class LiteralParsing(Scanner):
    """Mixin of the parser: literal values for a known shape."""

    def literal_value(self, shape: Shape, what: str, depth: int = 0) -> tuple[object, bool]:
        """(value, unknown) of the literal for `shape` at the current position; `unknown` is set
        for `{...}` (the values are then deterministic filler)."""
        self.ws()
        if depth > MAX_NESTING:
            raise self.error("literal nested too deeply")
        if self.at_shape() and not self.text.startswith("(", self.pos):
            at = self.pos
            written = self.shape()  # an older style repeats the shape before the value
            if not written.compatible(shape):
                raise self.error(f"literal shape {written} does not match {shape}", at)
        if shape.is_tuple:
            return self._tuple_literal(shape, what, depth), False
        if not shape.is_array:
            raise self.error(f"{what} needs an array or tuple shape, not {shape}")
        return self._array_literal(shape, what)

    def _tuple_literal(self, shape: Shape, what: str, depth: int) -> tuple:
        self.expect("(", "to open the tuple literal")
        values = []
        for i, element in enumerate(shape.tuple_shapes):
            if i:
                self.expect(",", "between tuple literal elements")
            value, unknown = self.literal_value(element, what, depth + 1)
            if unknown:
                raise self.error("a tuple literal cannot hold '{...}'")
            values.append(value)
        self.expect(")", f"after the {len(shape.tuple_shapes)} elements of the tuple literal")
        return tuple(values)

    def _array_literal(self, shape: Shape, what: str) -> tuple[np.ndarray, bool]:
        et, dims = shape.element_type, shape.dims
        if any(d < 0 for d in dims):
            raise self.error(f"{what} cannot have an unbounded dynamic shape {shape}")
        start = self.pos
        if shape.rank == 0 or not self.text.startswith("{", self.pos):
            tokens, positions = self._scalar_tokens(et)
            try:
                value = values_to_array(tokens, positions, et, ())
            except LiteralError as exc:
                raise self.error(str(exc), exc.pos) from None
            if shape.rank == 0:
                return value, False
            if et.is_complex:
                raise self.error(f"expected '{{' to start the {shape} literal", start)
            return self._first_element(value, shape, what, start), False
        tokens, positions, unknown = self._nested_tokens(dims, et.is_complex)
        if unknown:
            return self._guard_size(lambda: garbage_literal(dims, et, what), shape, start), True
        try:
            return values_to_array(tokens, positions, et, dims), False
        except LiteralError as exc:
            raise self.error(str(exc), exc.pos) from None

    def _first_element(self, value: np.ndarray, shape: Shape, what: str, start: int) -> np.ndarray:
        arr = self._guard_size(lambda: first_element_literal(value, shape.element_type, shape.dims),
                               shape, start)
        if not is_zero_splat(value) and self.module is not None:
            self.module.warnings.append(
                f"{what}: a scalar for shape {shape} sets element 0 only; XLA's parser makes every "
                "other element zero")
        return arr

    def _guard_size(self, make, shape: Shape, pos: int) -> np.ndarray:
        try:
            return make()
        except (MemoryError, ValueError):
            raise self.error(f"literal of shape {shape} is too large to hold", pos) from None

    def _scalar_tokens(self, et) -> tuple[list[str], list[int]]:
        """The token(s) of one scalar: a value, or `(re, im)` for complex types."""
        self.ws()
        if self.text.startswith("(", self.pos):
            if not et.is_complex:
                raise self.error("unexpected '(' in a literal: parentheses are only for complex values")
            self.pos += 1
            re_tok = self._value_token()
            self.expect(",", "between the real and imaginary part")
            im_tok = self._value_token()
            self.expect(")", "to close the complex value")
            return [re_tok[0], im_tok[0]], [re_tok[1], im_tok[1]]
        if et.is_complex:
            raise self.error(f"expected a complex value '(re, im)', found {self.found()}")
        tok, pos = self._value_token()
        return [tok], [pos]

    def _value_token(self) -> tuple[str, int]:
        self.ws()
        m = _LIT_TOKEN_RE.match(self.text, self.pos)
        if not m or m.group(0) in "{}(),/" or m.group(0) == "...":
            raise self.error(f"expected a literal value, found {self.found()}")
        self.pos = m.end()
        return m.group(0), m.start()

    def _nested_tokens(self, dims: tuple[int, ...], is_complex: bool) -> tuple[list[str], list[int], bool]:
        """Walk `{ {a, b}, {c, d} }` checking the count at every level (XLA's messages)."""
        rank = len(dims)
        counts = [0] * rank
        tokens: list[str] = []
        positions: list[int] = []
        depth, unknown, complex_part = 0, False, None
        for m in _LIT_TOKEN_RE.finditer(self.text, self.pos):
            tok = m.group(0)
            c = tok[0]
            if c.isspace() or (c == "/" and len(tok) > 1):
                continue
            pos = m.start()
            if complex_part is not None:
                complex_part = self._complex_piece(tok, pos, complex_part, tokens, positions)
                continue
            if tok == "{":
                depth += 1
                self._open_level(depth, counts, dims, pos)
            elif tok == "}":
                self._close_level(depth, counts, dims, pos)
                depth -= 1
                if depth == 0:
                    self.pos = m.end()
                    return tokens, positions, unknown
            elif tok == ",":
                continue
            elif tok == "...":
                if depth != 1:
                    raise self.error(f"expects '...' at nesting level 1, but sees it at level {depth}", pos)
                counts[0], unknown = dims[0], True
            elif tok in ("(", ")", "/"):
                if tok != "(" or depth != rank or not is_complex:
                    raise self.error(f"unexpected '{tok}' in a literal", pos)
                counts[rank - 1] += 1
                self._check_minor(counts, dims, pos)
                complex_part = []
            else:
                if depth != rank:
                    raise self.error(f"expects a nested array of rank {rank}, but sees a value at "
                                     f"level {depth}", pos)
                if is_complex:
                    raise self.error(f"expected a complex value '(re, im)', found '{tok[:40]}'", pos)
                counts[rank - 1] += 1
                self._check_minor(counts, dims, pos)
                tokens.append(tok)
                positions.append(pos)
        raise self.error("unterminated literal: missing '}'", self.pos)

    def _open_level(self, depth: int, counts: list[int], dims: tuple[int, ...], pos: int) -> None:
        """A '{' opening nesting level `depth`: one more element of the level above."""
        if depth > len(dims):
            raise self.error(f"expects a nested array of rank {len(dims)}, but sees a deeper one", pos)
        if depth > 1:
            counts[depth - 2] += 1
            if counts[depth - 2] > dims[depth - 2]:
                raise self.error(f"expects {dims[depth - 2]} elements in dimension {depth - 2}, "
                                 "but sees more", pos)

    def _close_level(self, depth: int, counts: list[int], dims: tuple[int, ...], pos: int) -> None:
        """A '}' closing nesting level `depth`: it must have held all its elements."""
        if counts[depth - 1] != dims[depth - 1]:
            raise self.error(f"expects {dims[depth - 1]} elements in dimension {depth - 1}, "
                             f"but sees {counts[depth - 1]}", pos)
        counts[depth - 1] = 0

    def _check_minor(self, counts: list[int], dims: tuple[int, ...], pos: int) -> None:
        if counts[-1] > dims[-1]:
            raise self.error(f"expects {dims[-1]} elements on the minor-most dimension, but sees more", pos)

    def _complex_piece(self, tok: str, pos: int, part: list, tokens: list[str], positions: list[int]):
        """Collect `re , im )` after a '(' inside an array; returns None once the value is done."""
        expected = ("value", ",", "value", ")")[len(part)]
        ok = tok in (",", ")") and tok == expected or expected == "value" and tok not in "{}(),"
        if not ok:
            raise self.error(f"malformed complex value at '{tok}'", pos)
        part.append((tok, pos))
        if len(part) < 4:
            return part
        tokens.extend((part[0][0], part[2][0]))
        positions.extend((part[0][1], part[2][1]))
        return None
