"""Properties of whole maps: simplification keeps the domain and the values, composition is
function composition restricted to the producer's domain (checked by brute force)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlo_codegen.indexing import IndexingMap, Interval, Variable, compose, dim, sym
from hlo_codegen.indexing.affine import const

SETTINGS = settings(derandomize=True, max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

leaves = st.one_of(st.sampled_from([dim(0), dim(1), sym(0)]), st.integers(-6, 20).map(const))


def _combine(children):
    pair = st.tuples(children, children)
    return st.one_of(
        pair.map(lambda ab: ab[0] + ab[1]),
        st.tuples(children, st.integers(-3, 6)).map(lambda ac: ac[0] * ac[1]),
        st.tuples(children, st.sampled_from([2, 3, 4, 8])).map(lambda ad: ad[0].floordiv(ad[1])),
        st.tuples(children, st.sampled_from([2, 3, 4, 8])).map(lambda ad: ad[0] % ad[1]),
    )


exprs = st.recursive(leaves, _combine, max_leaves=8)
bounds = st.tuples(st.integers(-3, 4), st.integers(0, 7)).map(lambda lw: Interval(lw[0], lw[0] + lw[1]))
constraint = st.tuples(exprs, st.integers(-5, 10), st.integers(0, 12)).map(
    lambda t: (t[0], Interval(t[1], t[1] + t[2])))


def points(box: list[Interval]) -> np.ndarray:
    return np.array(list(itertools.product(*(range(b.lower, b.upper + 1) for b in box))), np.int64)


def brute_force(m: IndexingMap, box: list[Interval]) -> dict[tuple, tuple]:
    """point -> results over `box` (dims then symbols), honouring the map's current domain."""
    if m.is_known_empty:
        return {}
    pts = points(box)
    nd = m.num_dims
    ok = np.ones(len(pts), bool)
    for i, b in enumerate(m.dim_bounds() + m.symbol_bounds()):
        ok &= (pts[:, i] >= b.lower) & (pts[:, i] <= b.upper)
    d, s = list(pts[:, :nd].T), list(pts[:, nd:].T)
    ok &= np.broadcast_to(m.constraints_satisfied(d, s), ok.shape)
    res = [np.broadcast_to(np.asarray(v), ok.shape) for v in m.evaluate(d, s)]
    return {tuple(p.tolist()): tuple(int(r[i]) for r in res) for i, p in enumerate(pts) if ok[i]}


@SETTINGS
@given(st.lists(exprs, min_size=1, max_size=2), bounds, bounds, bounds,
       st.lists(constraint, max_size=2))
def test_simplify_keeps_domain_and_values(results, b0, b1, b2, constraints):
    m = IndexingMap(results, [Variable(b0), Variable(b1)], [Variable(b2)], (), constraints)
    box = [b0, b1, b2]
    before = brute_force(m, box)
    simplified = m.simplify()
    after = brute_force(simplified, box)
    assert after == before, f"{m}\n -> {simplified}"


@SETTINGS
@given(st.lists(exprs, min_size=2, max_size=2), exprs, bounds, bounds, bounds, bounds,
       st.lists(constraint, max_size=1))
def test_composition_is_function_composition(first_results, second_result, b0, b1, c0, c1, constraints):
    first = IndexingMap(first_results, [Variable(b0), Variable(b1)], [Variable(Interval(0, 2))])
    second = IndexingMap([second_result], [Variable(c0), Variable(c1)], [Variable(Interval(-1, 1))], (),
                         constraints)
    composed = compose(first, second)
    # composed symbols: [second's s0, first's s0]
    box = [b0, b1, Interval(-1, 1), Interval(0, 2)]
    pts = points(box)
    y = [np.broadcast_to(np.asarray(v), (len(pts),))
         for v in first.evaluate([pts[:, 0], pts[:, 1]], [pts[:, 3]])]
    ok = np.ones(len(pts), bool)
    for yi, b in zip(y, second.dim_bounds()):
        ok &= (yi >= b.lower) & (yi <= b.upper)
    t_bound = second.symbol_bounds()[0]
    ok &= (pts[:, 2] >= t_bound.lower) & (pts[:, 2] <= t_bound.upper)
    ok &= np.broadcast_to(second.constraints_satisfied(y, [pts[:, 2]]), ok.shape)
    value = np.broadcast_to(np.asarray(second.evaluate(y, [pts[:, 2]])[0]), ok.shape)
    want = {tuple(p.tolist()): (int(value[i]),) for i, p in enumerate(pts) if ok[i]}
    assert brute_force(composed, box) == want
    assert brute_force(composed.simplify(), box) == want
