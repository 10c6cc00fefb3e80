"""Range-free canonical form of index expressions (XLA's `SymbolicExpr::Canonicalize`).

Where it sits: the first half of every simplification step (simplify.py alternates
`canonicalize` with range-driven rewrites until nothing changes). The canonical form folds
constants, keeps constants on the right of `+` and `*`, distributes `*` over `+`, collects like
terms of sums and sorts them with XLA's comparator (constant last), merges
`(x floordiv c) * c*y + (x mod c) * y` into `x * y`, and applies the divisibility rules for
`floordiv` / `mod` that need no variable ranges (`(x * 6) floordiv 4 -> (x * 3) floordiv 2`,
`(x * 8 + y) mod 4 -> y mod 4`, `(x mod 8) mod 4 -> x mod 4`).

    >>> from hlo_codegen.indexing.affine import dim
    >>> str(canonicalize(dim(1) * 2 + dim(0) + dim(1) * 3 + 4 - 4))
    'd1 * 5 + d0'
"""

from __future__ import annotations

import math

from hlo_codegen.indexing.affine import (
    ADD, CONST, FLOORDIV, MOD, MUL, AffineExpr, const, fold_binary, visit_summands,
)


def canonicalize(expr: AffineExpr) -> AffineExpr:
    memo: dict[AffineExpr, AffineExpr] = {}
    return _canon(expr, memo)


def _canon(expr: AffineExpr, memo: dict[AffineExpr, AffineExpr]) -> AffineExpr:
    if not expr.is_binary:
        return expr
    hit = memo.get(expr)
    if hit is not None:
        return hit
    lhs, rhs = _canon(expr.lhs, memo), _canon(expr.rhs, memo)
    kind = expr.kind
    if lhs.kind == CONST and rhs.kind == CONST:
        out = const(fold_binary(kind, lhs.value, rhs.value))
    else:
        if kind in (ADD, MUL) and rhs < lhs:
            lhs, rhs = rhs, lhs
        out = _CANON[kind](lhs, rhs, memo)
    memo[expr] = out
    return out


def base_and_coeff(expr: AffineExpr) -> tuple[AffineExpr, int]:
    """`x * 3 * 2` -> (x, 6); anything else -> (expr, 1)."""
    coeff = 1
    while expr.kind == MUL and expr.rhs.kind == CONST:
        coeff *= expr.rhs.value
        expr = expr.lhs
    return expr, coeff


def _terms(expr: AffineExpr, out: list[tuple[AffineExpr, int]]) -> None:
    out.extend(base_and_coeff(e) for e in visit_summands(expr))


def _canon_add(lhs: AffineExpr, rhs: AffineExpr, memo) -> AffineExpr:
    terms: list[tuple[AffineExpr, int]] = []
    _terms(lhs, terms)
    _terms(rhs, terms)
    constant = 0
    coeffs: dict[AffineExpr, int] = {}
    for base, coeff in terms:
        if base.kind == CONST:
            constant += base.value * coeff
        else:
            coeffs[base] = coeffs.get(base, 0) + coeff
    ordered = sorted((b for b, c in coeffs.items() if c != 0))
    coeffs = {b: coeffs[b] for b in ordered}
    exprs, changed = _merge_div_mod(coeffs, memo)
    for base, coeff in coeffs.items():
        if coeff != 0:
            exprs.append(_canon(base * coeff, memo))
    if constant != 0:
        exprs.append(const(constant))
    if not exprs:
        return const(0)
    exprs.sort()
    result = exprs[0]
    for e in exprs[1:]:
        result = AffineExpr(ADD, 0, result, e)
    return _canon(result, memo) if changed else result


def _merge_div_mod(coeffs: dict[AffineExpr, int], memo) -> tuple[list[AffineExpr], bool]:
    """`(x floordiv c) * c*y + (x mod c) * y` -> `x * y` (zeroes both coefficients)."""
    merged: list[AffineExpr] = []
    for base in list(coeffs):
        coeff = coeffs[base]
        if coeff == 0 or base.kind != FLOORDIV:
            continue
        c = base.rhs.value
        if c <= 0 or coeff % c != 0:
            continue
        y = coeff // c
        mod_expr = _canon(base.lhs % c, memo)
        if coeffs.get(mod_expr) == y:
            coeffs[base] = 0
            coeffs[mod_expr] = 0
            merged.append(_canon(base.lhs * y, memo))
    return merged, bool(merged)


def _canon_mul(lhs: AffineExpr, rhs: AffineExpr, memo) -> AffineExpr:
    if rhs.kind == CONST:
        c = rhs.value
        if c == 0:
            return const(0)
        if c == 1:
            return lhs
        if lhs.kind == MUL and lhs.rhs.kind == CONST:
            product = lhs.rhs.value * c
            if product == 1:
                return lhs.lhs
            return _canon(AffineExpr(MUL, 0, lhs.lhs, const(product)), memo)
    if lhs.kind == ADD:
        return _canon(lhs.lhs * rhs + lhs.rhs * rhs, memo)
    if rhs.kind == ADD:
        return _canon(lhs * rhs.lhs + lhs * rhs.rhs, memo)
    return AffineExpr(MUL, 0, lhs, rhs)


def _gcd_rewrite(kind: int, lhs: AffineExpr, divisor: int, memo) -> AffineExpr | None:
    """(A * c1) floordiv d -> (A * c1/g) floordiv d/g ; (A * c1) mod d -> ((A * c1/g) mod d/g) * g."""
    if lhs.kind != MUL or lhs.rhs.kind != CONST:
        return None
    c1 = lhs.rhs.value
    g = math.gcd(c1, divisor)
    if g <= 1:
        return None
    scaled = lhs.lhs * (c1 // g)
    if kind == FLOORDIV:
        return _canon(scaled.floordiv(divisor // g), memo)
    return _canon((scaled % (divisor // g)) * g, memo)


def _split_multiple(a: AffineExpr, divisor: int) -> tuple[AffineExpr, int] | None:
    if a.kind == MUL and a.rhs.kind == CONST and a.rhs.value % divisor == 0:
        return a.lhs, a.rhs.value // divisor
    if a.kind == CONST and a.value % divisor == 0:
        return const(1), a.value // divisor
    return None


def _canon_floordiv(lhs: AffineExpr, rhs: AffineExpr, memo) -> AffineExpr:
    if lhs.is_const(0):
        return lhs
    d = rhs.value
    if d == 1:
        return lhs
    if d == -1:
        return _canon(-lhs, memo)
    rewritten = _gcd_rewrite(FLOORDIV, lhs, d, memo)
    if rewritten is not None:
        return rewritten
    if lhs.kind == ADD:
        for a, b in ((lhs.lhs, lhs.rhs), (lhs.rhs, lhs.lhs)):
            split = _split_multiple(a, d)
            if split is not None:
                return _canon(split[0] * split[1] + b.floordiv(d), memo)
    return AffineExpr(FLOORDIV, 0, lhs, rhs)


def _canon_mod(lhs: AffineExpr, rhs: AffineExpr, memo) -> AffineExpr:
    if lhs.is_const(0) or lhs == rhs:
        return const(0)
    d = rhs.value
    if d == 1 or lhs.is_multiple_of(d):
        return const(0)
    rewritten = _gcd_rewrite(MOD, lhs, d, memo)
    if rewritten is not None:
        return rewritten
    if lhs.kind == MOD and lhs.rhs.value % d == 0:
        return _canon(lhs.lhs % d, memo)
    if lhs.kind == ADD:
        if lhs.lhs.is_multiple_of(d):
            return _canon(lhs.rhs % d, memo)
        if lhs.rhs.is_multiple_of(d):
            return _canon(lhs.lhs % d, memo)
    return AffineExpr(MOD, 0, lhs, rhs)


_CANON = {ADD: _canon_add, MUL: _canon_mul, FLOORDIV: _canon_floordiv, MOD: _canon_mod}
