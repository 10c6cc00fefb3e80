"""Transcendental functions of complex values (elemental/complex_math.py) against numpy.

Each type gets one loop fusion computing every unary function of one c64/c128 parameter (and one
for power and atan2); it is emitted, JIT-compiled and run on the host, and every output is
compared with numpy on the same values: the four quadrants, both axes, signed zeros, large and
tiny magnitudes and the special values (infinite and NaN parts). The bound is hlo-run's (abs and
rel 1e-3 per part, an element fails only when it exceeds both; NaN matches NaN, an infinity only
the same infinity). Where XLA and numpy disagree on a special value the kernels follow numpy (the
reference interpreter's semantics), so every point of the grid is checked. A second check holds
finite random values to a few ulps of numpy's complex128 result, and the kernels' PTX links for
sm_90 when nvJitLink is importable.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from emitter_testlib import link_ptx, nvjitlink_available
from elemental_harness import fusion_of, run_on_host
from hlo_codegen.emitters import emit_kernel
from hlo_common.errors import HloError

TYPES = {"c64": np.complex64, "c128": np.complex128}
UNARY = {
    "sqrt": np.sqrt, "rsqrt": lambda z: np.ones((), z.dtype) / np.sqrt(z), "log": np.log,
    "log-plus-one": np.log1p, "exponential": np.exp, "exponential-minus-one": np.expm1, "sine": np.sin,
    "cosine": np.cos, "tan": np.tan, "tanh": np.tanh,
}
INF, NAN = float("inf"), float("nan")
PARTS = [0.0, -0.0, 0.75, -0.75, 1.0, -1.0, 3.5, -3.5]  # quadrants, axes, signed zeros, |z| = 1
SPECIAL = [INF, -INF, NAN]
BIG = {"c64": 3e30, "c128": 1e300}
TINY = {"c64": 1e-42, "c128": 1e-310}  # subnormal parts


def _numpy(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


def _unary_values(ty: str) -> np.ndarray:
    big, tiny = BIG[ty], TINY[ty]
    pairs = [(x, y) for x in PARTS for y in PARTS]
    pairs += [(x, y) for x in SPECIAL + [0.0, -0.0, 1.0, -1.0] for y in SPECIAL + [0.0, -0.0, 1.0, -1.0]]
    pairs += [(big, 0.5), (-big, 0.5), (0.5, -big), (big, big), (-big, -0.75 * big), (0.0, big),
              (tiny, 0.0), (-tiny, tiny), (0.0, -tiny), (-1.0, tiny), (2.0, -tiny), (1e-8, -1e-8)]
    return np.array([complex(x, y) for x, y in pairs], TYPES[ty])


def _binary_values(ty: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(base, exponent) pairs for power and (y, x) pairs for atan2."""
    big = 1e10 if ty == "c64" else 1e100
    bases = [complex(x, y) for x in (0.75, -0.75, 0.0, 2.5, -2.5) for y in (0.75, -0.75, 0.0, 1.5)]
    exps = [complex(0.5, 0.25), complex(-1.5, 0.0), complex(2.5, -1.0), complex(3.0, 0.0), complex(-0.3, 2.0)]
    pw = [(b, e) for b in bases for e in exps if b != 0]
    pw += [(complex(big, big), complex(0.5, 0.25)), (complex(-big, 0.5 * big), complex(1.5, 0.0)),
           (complex(big, -big), complex(-2.0, 0.0)), (complex(0.0, big), complex(0.5, 0.0))]
    pw += [(0j, complex(2.5, 0.0)), (0j, 0j), (complex(-0.0, 0.0), complex(0.5, 0.0)),
           (complex(1.0, 0.0), complex(INF, NAN)), (complex(NAN, 1.0), 0j), (complex(3.0, -4.0), 0j)]
    ys = [complex(x, y) for x in (1.0, -1.0, 0.0, 2.0) for y in (0.5, -0.5, 0.0)]
    xs = [complex(x, y) for x in (0.25, -3.0, 0.0) for y in (1.0, -1.5, 0.0)]
    at = [(y, x) for y in ys for x in xs if y != 0 or x != 0]
    at += [(complex(big, 2 * big), complex(-big, 0.5)), (complex(-big, 0.0), complex(3 * big, -big))]
    dt = TYPES[ty]
    a, e = (np.array(v, dt) for v in zip(*pw))
    y, x = (np.array(v, dt) for v in zip(*at))
    return a, e, y, x


def _tuple_module(ty: str, n: int, calls: list[str], arity: int) -> str:
    """A computation of `arity` parameters p0, p1 whose root is the tuple of `calls` ("sqrt(p0)")."""
    params = "\n".join(f"  p{i} = {ty}[{n}] parameter({i})" for i in range(arity))
    body = "\n".join(f"  r{k} = {ty}[{n}] {call}" for k, call in enumerate(calls))
    shape = ", ".join([f"{ty}[{n}]"] * len(calls))
    roots = ", ".join(f"r{k}" for k in range(len(calls)))
    return f"e {{\n{params}\n{body}\n  ROOT t = ({shape}) tuple({roots})\n}}"


@functools.lru_cache(maxsize=None)
def _unary_run(ty: str):
    z = _unary_values(ty)
    fusion = fusion_of(_tuple_module(ty, z.size, [f"{op}(p0)" for op in UNARY], 1))
    kernel = emit_kernel(fusion)
    return z, kernel, dict(zip(UNARY, run_on_host(fusion, [z.copy()], kernel)))


@functools.lru_cache(maxsize=None)
def _binary_run(ty: str):
    a, e, y, x = _binary_values(ty)
    k = max(a.size, y.size)
    pad = lambda v: np.concatenate([v, np.full(k - v.size, 1 + 1j, v.dtype)])  # noqa: E731
    fusion = fusion_of(_tuple_module(ty, k, ["power(p0, p1)", "atan2(p0, p1)"], 2))
    kernel = emit_kernel(fusion)
    pw = run_on_host(fusion, [pad(a), pad(e)], kernel)[0]
    at = run_on_host(fusion, [pad(y), pad(x)], kernel)[1]
    return (a, e, pw[:a.size]), (y, x, at[:y.size]), kernel


def _part_fails(got: np.ndarray, want: np.ndarray, bound: float = 1e-3) -> np.ndarray:
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(all="ignore"):
        err = np.abs(g - w)
        same = (np.isnan(g) & np.isnan(w)) | (g == w)
        return ~same & ~((err <= bound) | (err <= bound * np.abs(w)))


def _assert_matches(got: np.ndarray, want: np.ndarray, inputs: list[np.ndarray], what: str) -> None:
    bad = np.nonzero(_part_fails(got.real, want.real) | _part_fails(got.imag, want.imag))[0]
    shown = "; ".join(f"{tuple(v[i] for v in inputs)}: got {got[i]}, numpy {want[i]}" for i in bad[:6])
    assert bad.size == 0, f"{what}: {bad.size} of {got.size} differ: {shown}"


@pytest.mark.parametrize("ty", TYPES)
@pytest.mark.parametrize("op", UNARY)
def test_unary_matches_numpy(op: str, ty: str) -> None:
    z, _, outs = _unary_run(ty)
    _assert_matches(outs[op], _numpy(UNARY[op], z), [z], f"{op} of {ty}")


@pytest.mark.parametrize("ty", TYPES)
def test_power_matches_numpy(ty: str) -> None:
    (a, e, got), _, _ = _binary_run(ty)
    want = np.where((a == 1) | (e == 0), np.ones((), a.dtype), _numpy(np.power, a, e))  # x^0 = 1^b = 1
    _assert_matches(got, want, [a, e], f"power of {ty}")


@pytest.mark.parametrize("ty", TYPES)
def test_atan2_matches_the_evaluator_formula(ty: str) -> None:
    _, (y, x, got), _ = _binary_run(ty)
    want = _numpy(lambda y, x: -1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y)), y, x)
    _assert_matches(got, want, [y, x], f"atan2 of {ty}")


def test_special_values_by_hand() -> None:
    """A few results written out (C99 Annex G, which numpy and XLA share here), and XLA's
    inf^c = inf for real c > 0 (numpy's cpow gives inf + NaN i there)."""
    z, _, outs = _unary_run("c64")
    at = {bits: i for i, bits in reversed(list(enumerate(z.view(np.uint64).tolist())))}  # -0 != +0
    c = complex
    cases = [("sqrt", c(-1.0, 0.0), c(0.0, 1.0)), ("sqrt", c(-INF, 1.0), c(0.0, INF)),
             ("sqrt", c(NAN, INF), c(INF, INF)), ("log", c(-0.0, 0.0), c(-INF, np.pi)),
             ("log", c(-INF, INF), c(INF, 0.75 * np.pi)), ("tanh", c(INF, 1.0), c(1.0, 0.0)),
             ("tan", c(0.0, INF), c(0.0, 1.0)), ("exponential", c(-INF, 1.0), c(0.0, 0.0)),
             ("log-plus-one", c(-1.0, 0.0), c(-INF, 0.0)), ("rsqrt", c(0.0, 0.0), c(INF, NAN)),
             ("sine", c(0.0, INF), c(0.0, INF)), ("cosine", c(0.0, INF), c(INF, 0.0))]
    fusion = fusion_of(_tuple_module("c64", 2, ["power(p0, p1)"], 2))
    got = run_on_host(fusion, [np.array([INF, INF], np.complex64), np.array([0.5, -2.0], np.complex64)])[0]
    assert list(got) == [INF, 0.0]
    for op, arg, want in cases:
        got = complex(outs[op][at[int(np.array(arg, np.complex64).view(np.uint64))]])
        for g, w in ((got.real, want.real), (got.imag, want.imag)):
            assert (np.isnan(g) and np.isnan(w)) or g == pytest.approx(w, rel=1e-6), (op, arg, got, want)


@pytest.mark.parametrize("ty", TYPES)
def test_random_values_are_accurate(ty: str) -> None:
    """Finite values with |z| in [0.1, 10]: within a few ulps of numpy's complex128 result."""
    rng = np.random.default_rng(7)
    n = 256
    z = (10 ** rng.uniform(-1, 1, n) * np.exp(2j * np.pi * rng.uniform(size=n))).astype(TYPES[ty])
    b = (rng.uniform(-2, 2, n) + 1j * rng.uniform(-1, 1, n)).astype(TYPES[ty])
    ops = list(UNARY) + ["power", "atan2"]
    calls = [f"{op}(p0)" for op in UNARY] + ["power(p0, p1)", "atan2(p0, p1)"]
    fusion = fusion_of(_tuple_module(ty, n, calls, 2))
    outs = dict(zip(ops, run_on_host(fusion, [z.copy(), b.copy()])))
    z2, b2 = z.astype(np.complex128), b.astype(np.complex128)
    exact = {op: _numpy(fn, z2) for op, fn in UNARY.items()}
    exact["power"] = _numpy(np.power, z2, b2)
    exact["atan2"] = _numpy(lambda y, x: -1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y)), z2, b2)
    eps = 1e-5 if ty == "c64" else 1e-12
    for op in ops:
        err = np.abs(outs[op] - exact[op]) / np.maximum(np.abs(exact[op]), 1.0)
        assert err.max() <= eps, f"{op} of {ty}: error {err.max():.3g} at {z[np.argmax(err)]}"


@pytest.mark.parametrize("ty", TYPES)
def test_ptx_links(ty: str) -> None:
    if not nvjitlink_available():
        pytest.skip("cuda.bindings (nvJitLink) is not importable")
    link_ptx(_unary_run(ty)[1])
    link_ptx(_binary_run(ty)[2])


@pytest.mark.parametrize("op", ["sinh", "cbrt", "logistic"])
def test_other_complex_functions_are_refused_by_name(op: str) -> None:
    with pytest.raises(HloError, match=f"%r: {op} of complex values is not supported"):
        emit_kernel(fusion_of(f"e {{\n  p = c64[4] parameter(0)\n  ROOT r = c64[4] {op}(p)\n}}"))


@pytest.mark.parametrize("ty", TYPES)
def test_abs_of_nan_and_infinite_parts_follows_hypot(ty: str) -> None:
    """|z| with a NaN part is NaN unless the other part is infinite (numpy's and C's hypot)."""
    vals = [complex(x, y) for x in SPECIAL + [0.0, 1.0, -2.5] for y in SPECIAL + [0.0, 1.0, -2.5]]
    z = np.array(vals, TYPES[ty])
    real = {"c64": "f32", "c128": "f64"}[ty]
    fusion = fusion_of(f"e {{\n  p0 = {ty}[{z.size}] parameter(0)\n  ROOT a = {real}[{z.size}] abs(p0)\n}}")
    got = run_on_host(fusion, [z.copy()], emit_kernel(fusion))[0]
    want = _numpy(np.abs, z)
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(want.dtype).eps, atol=0, equal_nan=True)
