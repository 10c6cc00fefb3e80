"""Parsing of indexing maps and expressions in XLA's text form (`indexing_map_serialization.cc`).

Where it sits: the inverse of `IndexingMap.to_string()`, so tests and kernel-IR text can carry
maps as text and round-trip them. Accepted form (whitespace and newlines are free):

    (d0, d1)[s0]{rt0} -> (d1 + rt0, d0 floordiv 2), domain: d0 in [0, 9], d1 in [0, 4],
    s0 in [0, 3], rt0 in [0, 7], d0 mod 2 in [0, 0]

Variable names are free (`th_x`, `chunk_id`); the domain lists every variable in declaration
order, then the constraints. `/` is read as `floordiv` (newer XLA prints it so). `UNDEFINED`
parses to the undefined map. Syntax errors raise
`HloParseError` with the position.

    >>> str(parse_indexing_map("(d0) -> (d0 * 2 - 1), domain: d0 in [1, 4]"))
    '(d0) -> (d0 * 2 - 1), domain: d0 in [1, 4]'
"""

from __future__ import annotations

import re
from typing import Sequence

from hlo_codegen.indexing.affine import AffineExpr, const, dim, sym
from hlo_codegen.indexing.indexing_map import IndexingMap, Variable
from hlo_codegen.indexing.interval import Interval
from hlo_common.errors import HloParseError

_TOKEN = re.compile(r"\s*(?:(->)|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|([()\[\]{},:+\-*/]))")
_MUL_OPS = {"*", "floordiv", "floorDiv", "/", "mod"}
_DEFAULT_FILENAME = "<indexing map>"


class _Parser:
    def __init__(self, text: str, filename: str = _DEFAULT_FILENAME):
        self.text = text
        self.filename = filename
        self.tokens: list[tuple[str, int]] = []
        pos = 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                break
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise self._error(f"unexpected character '{text[pos]}'", pos)
            self.tokens.append((m.group(m.lastindex), m.start(m.lastindex)))
            pos = m.end()
        self.i = 0
        self.names: dict[str, AffineExpr] = {}

    # -- token helpers -----------------------------------------------------------------------
    def _error(self, message: str, pos: int | None = None) -> HloParseError:
        if pos is None:
            pos = self.tokens[self.i][1] if self.i < len(self.tokens) else len(self.text)
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        src = self.text.splitlines()[line - 1] if self.text.splitlines() else ""
        return HloParseError(message, self.filename, line, col, src)

    def peek(self) -> str | None:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise self._error("unexpected end of input")
        self.i += 1
        return tok

    def expect(self, tok: str) -> None:
        if self.peek() != tok:
            raise self._error(f"expected '{tok}', got '{self.peek() or 'end of input'}'")
        self.i += 1

    def accept(self, tok: str) -> bool:
        if self.peek() == tok:
            self.i += 1
            return True
        return False

    def integer(self) -> int:
        sign = -1 if self.accept("-") else 1
        tok = self.take()
        if not tok.isdigit():
            raise self._error(f"expected an integer, got '{tok}'", self.tokens[self.i - 1][1])
        return sign * int(tok)

    # -- expressions -------------------------------------------------------------------------
    def expr(self) -> AffineExpr:
        result = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            result = result + rhs if op == "+" else result - rhs
        return result

    def term(self) -> AffineExpr:
        result = self.unary()
        while self.peek() in _MUL_OPS:
            op, pos = self.take(), self.tokens[self.i - 1][1]
            rhs = self.unary()
            try:
                if op == "*":
                    result = result * rhs
                elif op == "mod":
                    result = result % rhs
                else:
                    result = result.floordiv(rhs)
            except ValueError as err:
                raise self._error(str(err), pos) from None
        return result

    def unary(self) -> AffineExpr:
        if self.accept("-"):
            return -self.unary()
        tok = self.peek()
        if tok == "(":
            self.take()
            inner = self.expr()
            self.expect(")")
            return inner
        if tok is not None and tok.isdigit():
            return const(int(self.take()))
        if tok is not None and (tok[0].isalpha() or tok[0] == "_") and tok in self.names:
            self.take()
            return self.names[tok]
        raise self._error(f"unknown name or token '{tok or 'end of input'}'")

    # -- maps --------------------------------------------------------------------------------
    def name_list(self, open_: str, close: str) -> list[str]:
        self.expect(open_)
        names: list[str] = []
        if self.accept(close):
            return names
        while True:
            tok = self.take()
            if not (tok[0].isalpha() or tok[0] == "_"):
                raise self._error(f"expected a variable name, got '{tok}'", self.tokens[self.i - 1][1])
            if tok in names or tok in self.names or tok in ("domain", "in", "mod", "floordiv"):
                raise self._error(f"bad or duplicate variable name '{tok}'", self.tokens[self.i - 1][1])
            names.append(tok)
            if self.accept(close):
                return names
            self.expect(",")

    def interval(self) -> Interval:
        self.expect("[")
        lo = self.integer()
        self.expect(",")
        hi = self.integer()
        self.expect("]")
        return Interval(lo, hi)

    def indexing_map(self) -> IndexingMap:
        if self.peek() == "UNDEFINED" and len(self.tokens) == 1:
            return IndexingMap.undefined()
        dims = self.name_list("(", ")")
        ranges = self.name_list("[", "]") if self.peek() == "[" else []
        rts = self.name_list("{", "}") if self.peek() == "{" else []
        self.names = {n: dim(i) for i, n in enumerate(dims)}
        self.names.update({n: sym(j) for j, n in enumerate(ranges + rts)})
        self.expect("->")
        self.expect("(")
        results: list[AffineExpr] = []
        if not self.accept(")"):
            results.append(self.expr())
            while self.accept(","):
                results.append(self.expr())
            self.expect(")")
        all_names = dims + ranges + rts
        bounds: list[Interval] = []
        constraints: list[tuple[AffineExpr, Interval]] = []
        if all_names or self.peek() is not None:
            self.expect(",")
            self.expect("domain")
            self.expect(":")
            for name in all_names:
                got = self.take()
                if got != name:
                    raise self._error(f"expected the bounds of '{name}', got '{got}'",
                                      self.tokens[self.i - 1][1])
                self.expect("in")
                bounds.append(self.interval())
                if self.peek() is not None:
                    self.expect(",")
            while self.peek() is not None:
                e = self.expr()
                self.expect("in")
                constraints.append((e, self.interval()))
                if self.peek() is not None:
                    self.expect(",")
        defaults = [f"d{i}" for i in range(len(dims))] + [f"s{j}" for j in range(len(ranges))]
        defaults += [f"rt{k}" for k in range(len(rts))]
        variables = [Variable(b, "" if n == d else n) for b, n, d in zip(bounds, all_names, defaults)]
        nd, nr = len(dims), len(ranges)
        return IndexingMap(results, variables[:nd], variables[nd:nd + nr], variables[nd + nr:],
                           constraints)


def parse_indexing_map(text: str, filename: str = _DEFAULT_FILENAME) -> IndexingMap:
    """Parse XLA's printed form of an indexing map."""
    return _Parser(text, filename).indexing_map()


def parse_affine_expr(text: str, dim_names: Sequence[str] = (),
                      symbol_names: Sequence[str] = ()) -> AffineExpr:
    """Parse one expression; `d<i>` / `s<j>` are always understood, other names as given."""
    p = _Parser(text)
    for tok, _ in p.tokens:
        m = re.fullmatch(r"([ds])(\d+)", tok)
        if m:
            p.names[tok] = (dim if m.group(1) == "d" else sym)(int(m.group(2)))
    p.names.update({n: dim(i) for i, n in enumerate(dim_names)})
    p.names.update({n: sym(j) for j, n in enumerate(symbol_names)})
    result = p.expr()
    if p.peek() is not None:
        raise p._error(f"unexpected '{p.peek()}' after the expression")
    return result
