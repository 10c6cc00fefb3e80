"""Affine-like index expressions: the leaves and operators of every indexing map.

Where it sits: `IndexingMap` (indexing_map.py) holds one `AffineExpr` per result and per
constraint; the simplifier (simplify.py) rewrites them; emitters print, evaluate or lower them.
This is XLA's `SymbolicExpr` (formerly `mlir::AffineExpr`): constants, dimension variables `d_i`,
symbols `s_j` (range variables first, then runtime variables, as in XLA), and the binary
operators `+`, `*`, `floordiv`, `mod` with floor semantics (`-7 floordiv 2 == -4`,
`-7 mod 2 == 1`). Divisors are constants: non-zero for `floordiv`, positive for `mod`.

Expressions are immutable and hashable; `a < b` is XLA's comparator (kind order Add < Mul < Mod <
FloorDiv < dims < symbols < constants, then operands left to right), which fixes the order of
summands in canonical sums. The operators fold only trivially (`x + 0`, `x * 1`, constants,
constant moved to the right); `simplify.canonicalize` / `simplify.simplify_expr` do the rest.

    >>> d0, d1 = dim(0), dim(1)
    >>> str((d0 % 8) * 512 + d1 * 4 + sym(0))
    '(d0 mod 8) * 512 + d1 * 4 + s0'
    >>> str(-d0 + 16), str(d0 - d1 * 3)
    ('-d0 + 16', 'd0 - d1 * 3')
"""

from __future__ import annotations

import math
from typing import Callable, Iterator, Sequence

from hlo_common.errors import HloError

ADD, MUL, MOD, FLOORDIV, DIM, SYMBOL, CONST = range(7)
_SPELLING = {ADD: " + ", MUL: " * ", MOD: " mod ", FLOORDIV: " floordiv "}


class AffineExpr:
    """One node of an index expression. Build with `const`, `dim`, `sym` and the operators."""

    __slots__ = ("kind", "value", "lhs", "rhs", "_key", "_hash")

    def __init__(self, kind: int, value: int = 0, lhs: AffineExpr | None = None,
                 rhs: AffineExpr | None = None):
        self.kind = kind
        self.value = value
        self.lhs = lhs
        self.rhs = rhs
        if lhs is None:
            self._key = (kind, value)
        else:
            self._key = (kind, lhs._key, rhs._key)
        self._hash = hash(self._key)

    # -- identity and order ------------------------------------------------------------------
    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, AffineExpr):
            return NotImplemented
        return self._hash == other._hash and self._key == other._key

    def __lt__(self, other: AffineExpr) -> bool:
        return self._key < other._key

    def __le__(self, other: AffineExpr) -> bool:
        return self._key <= other._key

    @property
    def is_binary(self) -> bool:
        return self.kind <= FLOORDIV

    @property
    def is_constant(self) -> bool:
        return self.kind == CONST

    def is_const(self, value: int) -> bool:
        return self.kind == CONST and self.value == value

    # -- operators (trivial folding only) -----------------------------------------------------
    def __add__(self, other: AffineExpr | int) -> AffineExpr:
        other = as_expr(other)
        if other.kind == CONST:
            if self.kind == CONST:
                return const(self.value + other.value)
            if other.value == 0:
                return self
        elif self.kind == CONST:
            return other if self.value == 0 else AffineExpr(ADD, 0, other, self)
        return AffineExpr(ADD, 0, self, other)

    __radd__ = __add__

    def __neg__(self) -> AffineExpr:
        return self * -1

    def __sub__(self, other: AffineExpr | int) -> AffineExpr:
        return self + (-as_expr(other))

    def __rsub__(self, other: int) -> AffineExpr:
        return as_expr(other) + (-self)

    def __mul__(self, other: AffineExpr | int) -> AffineExpr:
        other = as_expr(other)
        lhs, rhs = (other, self) if self.kind == CONST and other.kind != CONST else (self, other)
        if rhs.kind != CONST:
            return AffineExpr(MUL, 0, lhs, rhs)
        c = rhs.value
        if lhs.kind == CONST:
            return const(lhs.value * c)
        if c == 0:
            return const(0)
        if c == 1:
            return lhs
        if lhs.kind == MUL and lhs.rhs.kind == CONST:
            return lhs.lhs * (lhs.rhs.value * c)
        return AffineExpr(MUL, 0, lhs, rhs)

    __rmul__ = __mul__

    def floordiv(self, divisor: AffineExpr | int) -> AffineExpr:
        d = _nonzero_divisor(divisor)
        if d == 1:
            return self
        if d == -1:
            return -self
        if self.kind == CONST:
            return const(self.value // d)
        return AffineExpr(FLOORDIV, 0, self, const(d))

    __floordiv__ = floordiv

    def __mod__(self, divisor: AffineExpr | int) -> AffineExpr:
        d = _positive_divisor(divisor, "mod")
        if d == 1:
            return const(0)
        if self.kind == CONST:
            return const(self.value % d)
        return AffineExpr(MOD, 0, self, const(d))

    # -- queries -----------------------------------------------------------------------------
    def used_dims(self) -> set[int]:
        return {e.value for e in self.walk() if e.kind == DIM}

    def used_symbols(self) -> set[int]:
        return {e.value for e in self.walk() if e.kind == SYMBOL}

    def walk(self) -> Iterator[AffineExpr]:
        stack = [self]
        while stack:
            e = stack.pop()
            yield e
            if e.lhs is not None:
                stack.append(e.rhs)
                stack.append(e.lhs)

    def largest_known_divisor(self) -> int:
        """A positive number that provably divides every value of the expression (XLA's rule)."""
        k = self.kind
        if k == CONST:
            return abs(self.value)
        if k in (DIM, SYMBOL):
            return 1
        lhs, rhs = self.lhs.largest_known_divisor(), self.rhs.largest_known_divisor()
        if k == MUL:
            return lhs * rhs
        if k == FLOORDIV:
            d = abs(self.rhs.value)
            return lhs // d if lhs % d == 0 else 1
        return math.gcd(lhs, rhs)

    def is_multiple_of(self, factor: int) -> bool:
        return self.largest_known_divisor() % factor == 0

    # -- substitution and evaluation ----------------------------------------------------------
    def replace(self, dims: Sequence[AffineExpr] | None = None,
                symbols: Sequence[AffineExpr] | None = None) -> AffineExpr:
        """Substitute `d_i -> dims[i]` and `s_j -> symbols[j]` (None keeps a variable)."""
        memo: dict[AffineExpr, AffineExpr] = {}

        def go(e: AffineExpr) -> AffineExpr:
            hit = memo.get(e)
            if hit is not None:
                return hit
            if e.kind == DIM:
                out = dims[e.value] if dims is not None and dims[e.value] is not None else e
            elif e.kind == SYMBOL:
                out = symbols[e.value] if symbols is not None and symbols[e.value] is not None else e
            elif e.kind == CONST:
                out = e
            else:
                out = _rebuild(e, go(e.lhs), go(e.rhs))
            memo[e] = out
            return out

        return go(self)

    def replace_map(self, mapping: dict[AffineExpr, AffineExpr]) -> AffineExpr:
        """Replace whole subexpressions (XLA's `SymbolicExpr::Replace`)."""
        hit = mapping.get(self)
        if hit is not None:
            return hit
        if not self.is_binary:
            return self
        return _rebuild(self, self.lhs.replace_map(mapping), self.rhs.replace_map(mapping))

    def evaluate(self, dims: Sequence = (), symbols: Sequence = ()):
        """Value for integer or numpy-array variable values (arrays broadcast, floor semantics)."""
        k = self.kind
        if k == CONST:
            return self.value
        if k == DIM:
            return dims[self.value]
        if k == SYMBOL:
            return symbols[self.value]
        return fold_binary(k, self.lhs.evaluate(dims, symbols), self.rhs.evaluate(dims, symbols))

    # -- printing ----------------------------------------------------------------------------
    def to_string(self, dim_names: Sequence[str] | None = None,
                  symbol_names: Sequence[str] | None = None) -> str:
        out: list[str] = []
        _print(self, dim_names or (), symbol_names or (), False, out)
        return "".join(out)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"AffineExpr({self.to_string()!r})"


SymbolicExpr = AffineExpr  # XLA's current name for the same thing

_CONSTS = [AffineExpr(CONST, v) for v in range(-8, 65)]
_DIMS = [AffineExpr(DIM, i) for i in range(16)]
_SYMS = [AffineExpr(SYMBOL, i) for i in range(16)]


def const(value: int) -> AffineExpr:
    value = int(value)
    if -8 <= value < 65:
        return _CONSTS[value + 8]
    return AffineExpr(CONST, value)


def dim(index: int) -> AffineExpr:
    return _DIMS[index] if index < 16 else AffineExpr(DIM, index)


def sym(index: int) -> AffineExpr:
    return _SYMS[index] if index < 16 else AffineExpr(SYMBOL, index)


def as_expr(value: AffineExpr | int) -> AffineExpr:
    if isinstance(value, AffineExpr):
        return value
    if isinstance(value, (int,)) or hasattr(value, "__index__"):
        return const(int(value))
    raise TypeError(f"cannot use {type(value).__name__} as an index expression")


class AffineExprError(HloError, ValueError):
    """An expression the operators cannot build (a divisor that is not a usable constant, e.g. a
    dynamic dimension's -1): a project error that still reads as the ValueError it replaces."""


def _nonzero_divisor(divisor: AffineExpr | int) -> int:
    d = as_expr(divisor)
    if d.kind != CONST or d.value == 0:
        raise AffineExprError(f"floordiv needs a non-zero constant divisor, got {d}")
    return d.value


def _positive_divisor(divisor: AffineExpr | int, op: str) -> int:
    d = as_expr(divisor)
    if d.kind != CONST or d.value <= 0:
        raise AffineExprError(f"{op} needs a positive constant divisor, got {d}")
    return d.value


def make_binary(kind: int, lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    """Apply operator `kind` through the folding operators."""
    if kind == ADD:
        return lhs + rhs
    if kind == MUL:
        return lhs * rhs
    if kind == FLOORDIV:
        return lhs.floordiv(rhs)
    return lhs % rhs


def fold_binary(kind: int, a, b):
    """The value of a binary expression of `kind` on values `a` and `b` (ints or numpy arrays;
    floor division and modulo, as affine expressions mean them)."""
    if kind == ADD:
        return a + b
    if kind == MUL:
        return a * b
    if kind == FLOORDIV:
        return a // b
    return a % b


def _rebuild(e: AffineExpr, lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    if lhs is e.lhs and rhs is e.rhs:
        return e
    return make_binary(e.kind, lhs, rhs)


def visit_summands(expr: AffineExpr) -> Iterator[AffineExpr]:
    """The summands of an arbitrarily nested sum, left to right."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if e.kind == ADD:
            stack.append(e.rhs)
            stack.append(e.lhs)
        else:
            yield e


def map_summands(expr: AffineExpr, fn: Callable[[AffineExpr], AffineExpr]) -> AffineExpr:
    """Rewrite every summand of a nested sum with `fn` (zeros vanish through `+`)."""
    if expr.kind != ADD:
        return fn(expr)
    lhs, rhs = map_summands(expr.lhs, fn), map_summands(expr.rhs, fn)
    if lhs is expr.lhs and rhs is expr.rhs:
        return expr
    return lhs + rhs


def _name(names: Sequence[str], index: int, prefix: str) -> str:
    if index < len(names) and names[index]:
        return names[index]
    return f"{prefix}{index}"


def _print(e: AffineExpr, dn: Sequence[str], sn: Sequence[str], parens: bool, out: list[str]) -> None:
    """XLA's / MLIR's affine printer: tight ops parenthesised as operands, `a + b * -c` as `a - b * c`."""
    k = e.kind
    if k == CONST:
        out.append(str(e.value))
        return
    if k == DIM:
        out.append(_name(dn, e.value, "d"))
        return
    if k == SYMBOL:
        out.append(_name(sn, e.value, "s"))
        return
    lhs, rhs = e.lhs, e.rhs
    if parens:
        out.append("(")
    if k != ADD:
        if k == MUL and rhs.is_const(-1):
            out.append("-")
            _print(lhs, dn, sn, True, out)
        else:
            _print(lhs, dn, sn, True, out)
            out.append(_SPELLING[k])
            _print(rhs, dn, sn, True, out)
    elif rhs.kind == MUL and rhs.rhs.kind == CONST and rhs.rhs.value < 0:
        _print(lhs, dn, sn, False, out)
        out.append(" - ")
        if rhs.rhs.value == -1:
            _print(rhs.lhs, dn, sn, rhs.lhs.kind == ADD, out)
        else:
            _print(rhs.lhs, dn, sn, True, out)
            out.append(f" * {-rhs.rhs.value}")
    elif rhs.kind == CONST and rhs.value < 0:
        _print(lhs, dn, sn, False, out)
        out.append(f" - {-rhs.value}")
    else:
        _print(lhs, dn, sn, False, out)
        out.append(" + ")
        _print(rhs, dn, sn, False, out)
    if parens:
        out.append(")")
