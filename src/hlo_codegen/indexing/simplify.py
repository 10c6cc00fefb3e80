"""Range-driven simplification of index expressions (XLA's `SymbolicExprSimplifier`).

Where it sits: `IndexingMap.simplify()` calls `Simplifier.simplify` on every result and
constraint; emitters call it on the maps they compose. `RangeEvaluator` bounds an expression
from the intervals of its variables (and, optionally, the map's constraints); the rewrites use
those bounds:

- `mod`: removed when the dividend already fits (`d0 mod 8 -> d0` for `d0 in [0, 7]`), summands
  that are multiples of the modulus dropped, `(a * k + b) mod m -> (a * k) mod m + b` when
  `b in [0, k - 1]`, `(c * a) mod (a * b) -> (c mod b) * a`;
- `floordiv`: `(c mod ab) floordiv a -> (c floordiv a) mod b`, `(a floordiv b) floordiv c ->
  a floordiv bc`, multiples of the divisor pulled out of sums (`(a * k + b) floordiv k ->
  a + b floordiv k`), summands too small to matter dropped (`(x * 6 + y) floordiv 9 ->
  (x * 2) floordiv 3` for `y in [0, 2]`), one inner division folded into the outer one;
- sums: `(x mod c) * d + (x floordiv c) * (c * d) -> x * d` (the delinearize/linearize pairs
  that chains of reshapes produce) and, beyond XLA, `((x floordiv c) mod m) * (c * d) +
  (x mod c) * d -> (x mod (c * m)) * d`;
- anything whose range is a single point becomes that constant (unless asked to preserve).

    >>> from hlo_codegen.indexing.affine import dim
    >>> from hlo_codegen.indexing.interval import Interval
    >>> s = Simplifier(RangeEvaluator([Interval(0, 6), Interval(0, 14)], []))
    >>> str(s.simplify(dim(0) + dim(1).floordiv(16))), str(s.simplify(dim(1) % 16))
    ('d0', 'd1')
"""

from __future__ import annotations

import math
from typing import Sequence

from hlo_codegen.indexing.affine import (
    ADD, CONST, DIM, FLOORDIV, MOD, MUL, SYMBOL, AffineExpr, const, map_summands,
    visit_summands,
)
from hlo_codegen.indexing.canonical import canonicalize
from hlo_codegen.indexing.interval import Interval

# Bound on rewrite rounds per expression; each round normally shrinks the expression.
MAX_SIMPLIFY_ROUNDS = 64


class RangeEvaluator:
    """Bounds of expressions over a box of variables, optionally tightened by constraints."""

    def __init__(self, dim_bounds: Sequence[Interval], symbol_bounds: Sequence[Interval],
                 constraints: dict[AffineExpr, Interval] | None = None):
        self.dim_bounds = list(dim_bounds)
        self.symbol_bounds = list(symbol_bounds)
        self.constraints = constraints or {}
        self._cache: dict[AffineExpr, Interval] = {}

    def range(self, expr: AffineExpr) -> Interval:
        hit = self._cache.get(expr)
        if hit is not None:
            return hit
        result = self._compute(expr)
        bound = self.constraints.get(expr)
        if bound is not None:
            result = result.intersect(bound)
        self._cache[expr] = result
        return result

    def _compute(self, expr: AffineExpr) -> Interval:
        k = expr.kind
        if k == CONST:
            return Interval(expr.value, expr.value)
        if k == DIM:
            return self.dim_bounds[expr.value]
        if k == SYMBOL:
            return self.symbol_bounds[expr.value]
        lhs, rhs = self.range(expr.lhs), self.range(expr.rhs)
        if k == ADD:
            return lhs + rhs
        if k == MUL:
            return lhs * rhs
        m = rhs.lower
        if k == FLOORDIV:
            return lhs.floordiv(m)
        if 0 <= lhs.lower and lhs.upper < m:
            return lhs
        return Interval(0, m - 1)

    def point_value(self, expr: AffineExpr) -> int | None:
        r = self.range(expr)
        return r.lower if r.is_point else None


class Simplifier:
    """Applies the rewrites of the module docstring until a fixed point (bounded)."""

    def __init__(self, evaluator: RangeEvaluator, replace_points: bool = True):
        self.ev = evaluator
        self.replace_points = replace_points

    # -- driver ------------------------------------------------------------------------------
    def simplify(self, expr: AffineExpr) -> AffineExpr:
        canonical = canonicalize(expr)
        for _ in range(MAX_SIMPLIFY_ROUNDS):
            simplified = self.simplify_once(canonical)
            if simplified == canonical:
                break
            canonical = canonicalize(simplified)
        return canonical

    def simplify_once(self, expr: AffineExpr) -> AffineExpr:
        if expr.kind == CONST:
            return expr
        if self.replace_points:
            value = self.ev.point_value(expr)
            if value is not None:
                return const(value)
        if expr.kind == MUL:
            return self._rewrite_mul(expr)
        if expr.kind == ADD:
            return self._rewrite_sum(expr)
        if expr.kind == MOD:
            return self._rewrite_mod(expr)
        if expr.kind == FLOORDIV:
            return self._rewrite_floordiv(expr)
        return expr

    # -- helpers -----------------------------------------------------------------------------
    def _constant_rhs(self, expr: AffineExpr, kind: int) -> int | None:
        if expr.kind != kind:
            return None
        return self.ev.point_value(expr.rhs)

    def _extract_multiplier(self, expr: AffineExpr) -> tuple[AffineExpr, int]:
        mul = self._constant_rhs(expr, MUL)
        return (expr.lhs, mul) if mul is not None else (expr, 1)

    def split_sum_by_gcd(self, expr: AffineExpr) -> tuple[AffineExpr, int, AffineExpr]:
        """`a * g + b`, g > 1 the gcd of the constant multipliers (ignoring sign); else (0, 1, expr)."""
        g = None
        for summand in visit_summands(expr):
            mul = self._constant_rhs(summand, MUL)
            if mul is not None:
                g = mul if g is None else math.gcd(g, mul)
        g = abs(g) if g is not None else 1
        if g <= 1:
            return const(0), 1, expr
        rest = [const(0)]

        def scale(summand: AffineExpr) -> AffineExpr:
            mul = self._constant_rhs(summand, MUL)
            if mul is not None:
                return summand.lhs * (mul // g)
            rest[0] = rest[0] + summand
            return const(0)

        scaled = map_summands(expr, scale)
        return scaled, g, rest[0]

    # -- rewrites ----------------------------------------------------------------------------
    def _rewrite_mul(self, mul: AffineExpr) -> AffineExpr:
        factor = self.ev.point_value(mul.rhs)
        if factor is None:
            return mul
        lhs = self.simplify_once(mul.lhs)
        if lhs.kind == ADD:
            return map_summands(lhs, lambda s: s * factor)
        if factor == 1:
            return lhs
        return mul if lhs == mul.lhs else lhs * factor

    def _rewrite_sum(self, expr: AffineExpr) -> AffineExpr:
        mods: list[list] = []
        divs: list[list] = []
        summands: dict[AffineExpr, int] = {}
        for summand in visit_summands(expr):
            lhs, mul = self._extract_multiplier(self.simplify_once(summand))
            if lhs.kind == MOD:
                mods.append([lhs, mul])
            elif lhs.kind == FLOORDIV:
                divs.append([lhs, mul])
            else:
                summands[lhs] = summands.get(lhs, 0) + mul
        if divs:
            self._merge_mod_div_pairs(mods, divs, summands)
            self._negative_divs_to_mods(mods, divs, summands)
        if len(mods) > 1:
            self._merge_mod_pairs(mods)
        for item, mul in mods + divs:
            if item is not None:
                summands[item] = summands.get(item, 0) + mul
        expanded = sorted(item * mul for item, mul in summands.items())
        result = const(0)
        for e in expanded:
            result = result + e
        return result

    def _merge_mod_div_pairs(self, mods, divs, summands) -> None:
        """`(x mod c) * d + (x floordiv c) * (c * d)` -> `x * d`."""
        for mod_entry in mods:
            mod, mod_mul = mod_entry
            mod_c = self._constant_rhs(mod, MOD)
            if mod_c is None:
                continue
            # Compare with the simplified division: `x floordiv c` may itself have been rewritten.
            simplified_div = self.simplify(mod.lhs.floordiv(mod_c))
            for div_entry in divs:
                div, div_mul = div_entry
                if div is None or div != simplified_div:
                    continue
                if div_mul % mod_mul or div_mul // mod_mul != mod_c:
                    continue
                summands[mod.lhs] = summands.get(mod.lhs, 0) + mod_mul
                div_entry[0] = None
                mod_entry[0] = None
                break

    def _merge_mod_pairs(self, mods) -> None:
        """`((x floordiv c) mod m) * (c * d) + (x mod c) * d` -> `(x mod (c * m)) * d`.

        Not one of XLA's rules; it undoes the split a transpose leaves between two reshapes."""
        for outer in mods:
            mod, mul = outer
            if mod is None or mod.lhs.kind != FLOORDIV:
                continue
            c, m = self.ev.point_value(mod.lhs.rhs), self._constant_rhs(mod, MOD)
            if c is None or m is None or c <= 0 or mul % c:
                continue
            for inner in mods:
                if (inner[0] is not None and inner[0].kind == MOD and inner[0].lhs == mod.lhs.lhs
                        and self._constant_rhs(inner[0], MOD) == c and inner[1] * c == mul):
                    outer[0], outer[1] = mod.lhs.lhs % (c * m), inner[1]
                    inner[0] = None
                    break

    def _negative_divs_to_mods(self, mods, divs, summands) -> None:
        """`(x floordiv c) * (-c * b)` -> `(x mod c) * b - x * b`."""
        for div_entry in divs:
            div, div_mul = div_entry
            if div is None or div_mul > 0:
                continue
            div_c = self._constant_rhs(div, FLOORDIV)
            if div_c is None or div_c < 0 or div_mul % div_c:
                continue
            b = div_mul // div_c
            x = div.lhs
            for s in visit_summands(x):
                summands[s] = summands.get(s, 0) + b
            mods.append([x % div_c, -b])
            div_entry[0] = None

    def _rewrite_mod(self, mod: AffineExpr) -> AffineExpr:
        m = self.ev.point_value(mod.rhs)
        if m is None:
            return mod
        if m == 0:
            return const(0)
        lhs = self.simplify_once(mod.lhs)
        lhs_range = self.ev.range(lhs)
        offset = -(lhs_range.lower // m) * m
        if lhs_range.upper + offset < m:
            return lhs + offset
        mul = self._constant_rhs(lhs, MUL)
        if mul is not None and mul > 0 and m % mul == 0:
            return (lhs.lhs % (m // mul)) * mul
        extracted = [0]

        def drop_multiples(summand: AffineExpr) -> AffineExpr:
            if summand.kind == CONST:
                extracted[0] += summand.value
                return const(0)
            factor = self._constant_rhs(summand, MUL)
            if factor is not None and factor % m == 0:
                return const(0)
            return summand

        new_lhs = map_summands(lhs, drop_multiples)
        remainder = extracted[0] % m
        if remainder:
            new_lhs = new_lhs + remainder
        multiplied, g, rest = self.split_sum_by_gcd(new_lhs)
        if g != 1 and m % g == 0:
            rest_range = self.ev.range(rest)
            if rest_range == Interval(0, 0):
                return (multiplied % (m // g)) * g
            if Interval(0, g - 1).contains(rest_range):
                return (multiplied * g) % m + rest
        return mod if new_lhs == mod.lhs else new_lhs % m

    def _rewrite_floordiv(self, div: AffineExpr) -> AffineExpr:
        d = self.ev.point_value(div.rhs)
        lhs = self.simplify_once(div.lhs)
        if d is None:
            return div
        if d > 1:
            inner_mod = self._constant_rhs(lhs, MOD)
            if inner_mod is not None and inner_mod % d == 0:
                return lhs.lhs.floordiv(d) % (inner_mod // d)
            inner_div = self._constant_rhs(lhs, FLOORDIV)
            if inner_div is not None:
                return lhs.lhs.floordiv(d * inner_div)
            result = self._simplify_sum_div(lhs, d)
            if result is not None:
                return result
        return div if lhs == div.lhs else lhs.floordiv(d)

    def _simplify_sum_div(self, dividend: AffineExpr, divisor: int) -> AffineExpr | None:
        extracted = [const(0)]

        def pull_out(summand: AffineExpr) -> AffineExpr:
            mul = self._constant_rhs(summand, MUL)
            if mul is not None and mul % divisor == 0:
                extracted[0] = extracted[0] + summand.lhs * (mul // divisor)
                return const(0)
            if summand.kind == CONST:
                count = summand.value // divisor
                if count != 0:
                    extracted[0] = extracted[0] + count
                    return const(summand.value - count * divisor)
            return summand

        new_dividend = map_summands(dividend, pull_out)
        multiplied, g, rest = self.split_sum_by_gcd(new_dividend)
        common = math.gcd(divisor, g)
        rest_range = self.ev.range(rest)
        if common != 1 and Interval(0, common - 1).contains(rest_range):
            new_dividend = multiplied * (g // common)
            divisor //= common
        elif rest_range.is_point and rest_range.lower != 0:
            common = math.gcd(rest_range.lower, common)
            if common != 1:
                new_dividend = multiplied * (g // common) + rest_range.lower // common
                divisor //= common
        inner = [self._constant_rhs(s, FLOORDIV) for s in visit_summands(new_dividend)]
        inner = [v for v in inner if v is not None]
        if len(inner) == 1:
            # `(a floordiv c0 + rest) floordiv c1 -> (a + rest * c0) floordiv (c0 * c1)`; exact
            # only with a single inner division.
            c0 = inner[0]
            new_dividend = map_summands(
                new_dividend,
                lambda s: s.lhs if self._constant_rhs(s, FLOORDIV) is not None else s * c0)
            divisor *= c0
        if new_dividend != dividend:
            return new_dividend.floordiv(divisor) + extracted[0]
        return None


def simplify_constraint_range(simplifier: Simplifier, expr: AffineExpr,
                               interval: Interval) -> tuple[AffineExpr, Interval]:
    """`e + c in [a, b]` -> `e in [a - c, b - c]`; likewise for `e * c` and `e floordiv c`."""
    ev = simplifier.ev
    for _ in range(MAX_SIMPLIFY_ROUNDS):
        k = expr.kind
        if k == ADD:
            shift = ev.point_value(expr.rhs)
            if shift is not None:
                expr, interval = expr.lhs, interval - shift
                continue
            split = _split_add_constraint(simplifier, expr, interval)
            if split is None:
                break
            expr = split
            continue
        if k not in (MUL, FLOORDIV):
            break
        c = ev.point_value(expr.rhs)
        if c is None or c == 0:
            break
        lo, hi = interval.lower, interval.upper
        if k == FLOORDIV:
            # floor(x / c) in [lo, hi]  <=>  lo * c <= x < (hi + 1) * c  (reversed for c < 0)
            interval = (Interval(lo * c, (hi + 1) * c - 1) if c > 0
                        else Interval((hi + 1) * c + 1, lo * c))
        else:
            if c < 0:
                c, lo, hi = -c, -hi, -lo
            interval = Interval(-((-lo) // c), hi // c)
        expr = expr.lhs
    return expr, interval


def _split_add_constraint(simplifier: Simplifier, expr: AffineExpr,
                          interval: Interval) -> AffineExpr | None:
    """`a * g + b in [0, ub]` -> `a * g in [0, ub]` when b can never change the outcome.

    Sound when b is in [0, g - 1] and `(ub - b) floordiv g == ub floordiv g` for every b."""
    if interval.lower != 0:
        return None
    multiplied, g, rest = simplifier.split_sum_by_gcd(expr)
    if g == 1:
        return None
    rest_range = simplifier.ev.range(rest)
    if not Interval(0, g - 1).contains(rest_range):
        return None
    quotient = (Interval.point(interval.upper) - rest_range).floordiv(g)
    if not quotient.is_point or quotient.lower != interval.upper // g:
        return None
    return multiplied * g


def simplify_expr(expr: AffineExpr, dim_bounds: Sequence[Interval],
                  symbol_bounds: Sequence[Interval] = ()) -> AffineExpr:
    """Simplify one expression for variables in the given boxes (no extra constraints)."""
    return Simplifier(RangeEvaluator(dim_bounds, symbol_bounds)).simplify(expr)
