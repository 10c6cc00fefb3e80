"""Properties of expressions: rewriting never changes a value, printing round-trips.

Random expression trees (seeded hypothesis) over two dimensions and one symbol with small
ranges, negative bounds included, are checked point by point against their plain evaluation.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlo_codegen.indexing import Interval, dim, parse_affine_expr, simplify_expr, sym
from hlo_codegen.indexing.affine import AffineExpr, const
from hlo_codegen.indexing.canonical import canonicalize

SETTINGS = settings(derandomize=True, max_examples=250, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

leaves = st.one_of(st.sampled_from([dim(0), dim(1), sym(0)]), st.integers(-20, 40).map(const))


def _combine(children):
    binary = st.tuples(children, children)
    return st.one_of(
        binary.map(lambda ab: ab[0] + ab[1]),
        binary.map(lambda ab: ab[0] - ab[1]),
        st.tuples(children, st.integers(-6, 12)).map(lambda ac: ac[0] * ac[1]),
        st.tuples(children, st.sampled_from([1, 2, 3, 4, 6, 8, 16, -3])).map(
            lambda ad: ad[0].floordiv(ad[1])),
        st.tuples(children, st.sampled_from([1, 2, 3, 4, 5, 8, 16])).map(lambda ad: ad[0] % ad[1]),
    )


exprs = st.recursive(leaves, _combine, max_leaves=12)
bounds = st.tuples(st.integers(-8, 8), st.integers(0, 12)).map(lambda lw: Interval(lw[0], lw[0] + lw[1]))


def grid(d0: Interval, d1: Interval, s0: Interval):
    pts = np.array(list(itertools.product(range(d0.lower, d0.upper + 1), range(d1.lower, d1.upper + 1),
                                          range(s0.lower, s0.upper + 1))), dtype=np.int64)
    return [pts[:, 0], pts[:, 1]], [pts[:, 2]]


def values(e: AffineExpr, dims, syms) -> np.ndarray:
    return np.broadcast_to(np.asarray(e.evaluate(dims, syms)), dims[0].shape)


@SETTINGS
@given(exprs, bounds, bounds, bounds)
def test_canonicalize_and_simplify_preserve_values(e, b0, b1, b2):
    dims, syms = grid(b0, b1, b2)
    want = values(e, dims, syms)
    np.testing.assert_array_equal(values(canonicalize(e), dims, syms), want)
    simplified = simplify_expr(e, [b0, b1], [b2])
    np.testing.assert_array_equal(values(simplified, dims, syms), want, err_msg=f"{e} -> {simplified}")
    again = simplify_expr(simplified, [b0, b1], [b2])
    np.testing.assert_array_equal(values(again, dims, syms), want)


@SETTINGS
@given(exprs)
def test_print_parse_round_trip(e):
    parsed = parse_affine_expr(str(e))
    dims, syms = grid(Interval(-3, 3), Interval(-2, 4), Interval(0, 2))
    np.testing.assert_array_equal(values(parsed, dims, syms), values(e, dims, syms))
    canonical = canonicalize(e)
    assert parse_affine_expr(str(canonical)) == canonical


def test_floor_semantics_for_negative_values():
    d0 = dim(0)
    assert d0.floordiv(2).evaluate([-7]) == -4
    assert (d0 % 2).evaluate([-7]) == 1
    assert d0.floordiv(-3).evaluate([35]) == -12
    arr = np.arange(-5, 6)
    np.testing.assert_array_equal((d0 % 3).evaluate([arr]), np.mod(arr, 3))


def test_hash_equality_and_order():
    a, b = dim(0) * 4 + sym(0), dim(0) * 4 + sym(0)
    assert a == b and hash(a) == hash(b) and a is not b
    # XLA's comparator: sums < products < mod < floordiv < dims < symbols < constants.
    ordered = [dim(0) + 1, dim(0) * 2, dim(0) % 2, dim(0).floordiv(2), dim(0), dim(1), sym(0), const(3)]
    assert sorted(reversed(ordered)) == ordered


def test_printing_matches_xla_forms():
    d0, d1, s0 = dim(0), dim(1), sym(0)
    assert str(d0.floordiv(8)) == "d0 floordiv 8"
    assert str((d0 % 8) * 512 + s0) == "(d0 mod 8) * 512 + s0"
    assert str(-d1 + 16) == "-d1 + 16"
    assert str(d0 - (d1 + s0)) == "d0 - (d1 + s0)"
    assert str(d0 * 8 + d1 - 2) == "d0 * 8 + d1 - 2"
    assert str((d0 - 1).floordiv(2)) == "(d0 - 1) floordiv 2"
    assert d0.to_string(["th_x"]) == "th_x"


@settings(derandomize=True, max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs, st.integers(1, 6), st.integers(1, 6), st.integers(-3, 4), bounds, bounds, bounds)
def test_split_mod_pairs_merge_soundly(x, c, m, d, b0, b1, b2):
    e = ((x.floordiv(c)) % m) * (c * d) + (x % c) * d + dim(1)
    dims, syms = grid(b0, b1, b2)
    simplified = simplify_expr(e, [b0, b1], [b2])
    np.testing.assert_array_equal(values(simplified, dims, syms), values(e, dims, syms))


def test_split_mod_pair_becomes_one_mod():
    d1 = dim(1)
    e = ((d1.floordiv(2)) % 32) * 4 + (d1 % 2) * 2
    assert str(simplify_expr(e, [Interval(0, 31), Interval(0, 255)])) == "(d1 mod 64) * 2"
