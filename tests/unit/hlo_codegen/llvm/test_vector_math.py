"""The f32 forms of exp and tanh (hlo_codegen.llvm.math_exp_f32 and math_tanh_f32, in f32
arithmetic), expm1, log and erf (hlo_codegen.llvm.math_f32, in double): accuracy where they are
hardest (range edges, subnormal results, the switch points between pieces), special values, and
that the host's loop vectorizer really turns a loop of them into vector code. tanh is also run on
every f32 input (a `slow` test).

The bound is the project's f32 bound of tests/unit/hlo_codegen/llvm/test_lowering_math.py: within 1 ulp of
the correctly rounded value (the error table there samples the whole domains).
"""

from __future__ import annotations

import ctypes
import functools
import math
import re

import numpy as np
import pytest
from scipy import special

from hlo_codegen.llvm.math import define_math
from hlo_codegen.llvm.math_f32 import ERFCX_HI, ERFCX_LO, ERFCX_POLY, F32_FORMS
from hlo_codegen.llvm.math_tanh_f32 import EXPM1_POLY, MAX_2A, SMALL_POLY, SWITCH, build_tanh_f32
from hlo_codegen.llvm.text import LV, LLModule
from hlo_run.host_kernel import compile_host_module, specialize_for_cpu

REFERENCE = {"exp": np.exp, "expm1": np.expm1, "tanh": np.tanh, "log": np.log, "erf": special.erf}
TINY = float(np.finfo(np.float32).smallest_subnormal)
# Sampling ranges around each function's edges (f32 inputs).
EDGES = {
    "exp": [(-104.5, -87.0), (-1e-3, 1e-3), (87.0, 89.0), (-0.35, 0.35)],
    "expm1": [(-1e-6, 1e-6), (-0.4, 0.4), (-20.0, -15.0), (85.0, 88.8)],
    "tanh": [(-1e-6, 1e-6), (-0.6, 0.6), (8.0, 10.0), (-10.0, -8.0)],
    "log": [(0.7, 1.42), (1 - 1e-4, 1 + 1e-4), (TINY, 1e-38), (1e37, 3.4e38)],
    "erf": [(-1e-6, 1e-6), (0.85, 0.95), (-0.95, -0.85), (3.8, 4.2), (1.0, 3.0)],
}
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, TINY, -TINY, 1.0, -1.0,
                     float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny)], np.float32)

_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def _map_loop(module: LLModule, name: str, fn: str) -> None:
    """`void name(ptr in, ptr out, i64 n)`: out[i] = fn(in[i]) for i < n."""
    f = module.function(name, "void", [("ptr", "a"), ("ptr", "o"), ("i64", "n")])
    loop, done = f.new_block("loop"), f.new_block("done")
    f.br(loop)
    f.set_block(loop)
    i, phi = f.phi("i64", "i")
    phi.incoming.append(("0", "entry"))
    x = f.load("float", f.gep("float", f.args[0], i))
    f.store(f.call("float", fn, [x]), f.gep("float", f.args[1], i))
    nxt = f.binop("add", i, LV("i64", "1"))
    phi.incoming.append((nxt.ref, f.current))
    f.cbr(f.icmp("slt", nxt, f.args[2]), loop, done)
    f.set_block(done)
    f.ret()


@functools.lru_cache(maxsize=None)
def _compiled():
    m = LLModule("x86_64-unknown-linux-gnu")
    for op in REFERENCE:
        _map_loop(m, f"map_{op}", define_math(m, op, "float"))
    text = m.text()
    return compile_host_module(text), text


def _run(op: str, x: np.ndarray, compiled=None) -> np.ndarray:
    compiled = compiled or _compiled()[0]
    x = np.ascontiguousarray(x, np.float32)
    out = np.zeros_like(x)
    _FN(compiled.engine.get_function_address(f"map_{op}"))(x.ctypes.data, out.ctypes.data, x.size)
    return out


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def test_every_f32_form_is_tested() -> None:
    assert set(F32_FORMS) | {"exp", "tanh"} == set(REFERENCE) == set(EDGES)


def test_f32_exp_within_one_ulp_on_a_million_inputs() -> None:
    """exp in f32 arithmetic: an exhaustive run over all f32 inputs found at most 0.87 ulp of the
    X"""
    bits = np.random.default_rng(9).integers(0, 1 << 32, 4_000_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[(x >= -104.0) & (x <= 88.72)][:1_000_000]  # above, inf (checked at the edges)
    got = _run("exp", x)
    ulps = _ulps(got, np.exp(x.astype(np.float64)))
    assert len(x) > 900_000 and ulps.max() <= 0.9, f"{ulps.max():.3f} ulp at {x[np.argmax(ulps)]!r}"


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_f32_form_within_one_ulp_at_its_edges(op: str) -> None:
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(lo, hi, 20000) for lo, hi in EDGES[op]]).astype(np.float32)
    got = _run(op, x)
    with np.errstate(all="ignore"):
        want = REFERENCE[op](x.astype(np.float64))
    finite = np.abs(want) < float(np.finfo(np.float32).max)
    assert np.array_equal(np.isinf(got), ~finite), f"{op}: overflow differs"
    ulps = _ulps(got[finite], want[finite])
    assert ulps.max() <= 1.0, f"{op}: {ulps.max():.2f} ulp at x = {x[finite][np.argmax(ulps)]!r}"


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_f32_form_special_values(op: str) -> None:
    got = _run(op, SPECIALS)
    with np.errstate(all="ignore"):
        want = REFERENCE[op](SPECIALS.astype(np.float64)).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{op}: NaNs {got} vs {want}"
    ok = ~np.isnan(want)
    assert np.array_equal(np.isinf(got[ok]), np.isinf(want[ok])) and (got[ok][np.isinf(got[ok])] ==
                                                                     want[ok][np.isinf(want[ok])]).all()
    assert (_ulps(got[ok & ~np.isinf(want)], want[ok & ~np.isinf(want)].astype(np.float64)) <= 1.0).all()
    zeros = ok & (want == 0)
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])), f"{op}: sign of zero"


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_f32_form_is_straight_line_and_vectorizes(op: str) -> None:
    """The form is one block with no calls (so it inlines), and LLVM turns the map loop into vector
    code (`vector.body` with double vectors where the form computes in double, float vectors for
    exp and tanh: 16 lanes with AVX-512, 8 with AVX2)."""
    compiled, text = _compiled()
    body = re.search(rf"define internal float @__hlo_{op}_f32\(.*?\n}}", text, re.S).group(0)
    assert body.count(":\n") == 1 and not re.search(r"call \w+ @(?!llvm\.|__hlo_ldexp_f32\()", body), body[:400]
    optimized = str(compiled.module)
    loop = re.search(rf"define void @map_{op}\(.*?\n}}", optimized, re.S).group(0)
    lanes = r"<(8|16) x float>" if op in ("exp", "tanh") else r"<\d+ x double>"
    assert "vector.body" in loop and re.search(lanes, loop), f"map_{op} did not vectorize"


def _exp_bits(x: np.ndarray, avx512_form: bool) -> np.ndarray:
    """exp's bits on x, its scaling by 2^k in the portable form or as on an AVX-512 host
    (llvm.ldexp: vscalefps there, a libm call elsewhere), whatever this CPU is."""
    text = specialize_for_cpu(_compiled()[1], avx512_form)
    return _run("exp", x, compile_host_module(text, specialize=False)).view(np.uint32)


def test_exp_has_the_same_bits_with_the_avx512_scaling() -> None:
    """host_kernel gives exp's `__hlo_ldexp_f32` the body llvm.ldexp on AVX-512 hosts; the bits are
    the portable form's: every bf16 value, a million random f32, and where the result is subnormal,
    overflows or k is at its ends (the exhaustive run is the slow test below)."""
    rng = np.random.default_rng(11)
    bf16 = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)
    x = np.concatenate([bf16, rng.integers(0, 1 << 32, 1_000_000, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32), rng.uniform(-104.5, -86.0, 200_000).astype(np.float32),
                        rng.uniform(87.0, 89.5, 50_000).astype(np.float32), SPECIALS])
    assert (_exp_bits(x, False) == _exp_bits(x, True)).all()
    assert "@__hlo_ldexp_f32(float %p, i32 %k) alwaysinline {\nentry:\n  %r = call float @llvm.ldexp" \
        in specialize_for_cpu(_compiled()[1], True)


@pytest.mark.slow
def test_exp_has_the_same_bits_with_the_avx512_scaling_on_every_input() -> None:
    for start in range(0, 1 << 32, 1 << 26):
        x = np.arange(start, start + (1 << 26), dtype=np.uint64).astype(np.uint32).view(np.float32)
        assert (_exp_bits(x, False) == _exp_bits(x, True)).all(), f"from bits 0x{start:08x}"


def test_erfcx_coefficients_are_the_documented_fit() -> None:
    """ERFCX_POLY is the degree-13 Chebyshev interpolant of erfcx on [0.9, 4] at 64 nodes, in powers
    of u = (x - mid) / half (what math_f32's docstring says), and it is within 6e-10 of erfcx."""
    from numpy.polynomial import chebyshev

    mid, half = (ERFCX_HI + ERFCX_LO) / 2, (ERFCX_HI - ERFCX_LO) / 2
    nodes = np.cos(np.pi * (np.arange(64) + 0.5) / 64) * half + mid
    fit = chebyshev.cheb2poly(chebyshev.chebfit((nodes - mid) / half, special.erfcx(nodes), 13))[::-1]
    np.testing.assert_allclose(ERFCX_POLY, fit, rtol=1e-9, atol=1e-14)
    xs = np.linspace(ERFCX_LO, ERFCX_HI, 50001)
    assert np.abs(np.polyval(ERFCX_POLY, (xs - mid) / half) - special.erfcx(xs)).max() < 6e-10


@functools.lru_cache(maxsize=None)
def _tanh_variant(small_poly: tuple[float, ...], expm1_poly: tuple[float, ...]):
    """The f32 tanh form built with these coefficients, as `map_tanh` of a compiled module."""
    m = LLModule("x86_64-unknown-linux-gnu")
    build_tanh_f32(m.function("tanh_variant", "float", [("float", "x0")], prefix="internal"),
                   small_poly, expm1_poly)
    _map_loop(m, "map_tanh", "tanh_variant")
    return compile_host_module(m.text())


def _f32_span(lo: float, hi: float) -> np.ndarray:
    """Every f32 in [lo, hi) (0 <= lo < hi)."""
    bits = np.array([lo, hi], np.float32).view(np.uint32)
    return np.arange(bits[0], bits[1], dtype=np.uint32).view(np.float32)


def _tanh_hard_inputs() -> np.ndarray:
    """Every f32 around the switch between the pieces (and tanh = 1/2 at 0.5493), around each
    point where e^{2a} = 2^k (1 + p) changes k (|r| = ln2/2 there, so p is largest) and where tanh
    starts to round to 1 (9.011), and random magnitudes from 2^-30 to 10."""
    steps = [(j + 0.5) * math.log(2.0) / 2 for j in range(int(MAX_2A / math.log(2.0)) + 1)]
    parts = [_f32_span(SWITCH - 0.08, SWITCH + 0.05)]
    parts += [_f32_span(v * (1 - 2.0 ** -11), v * (1 + 2.0 ** -11)) for v in steps + [9.0109]]
    parts.append(np.exp2(np.random.default_rng(21).uniform(-30, 3.33, 500_000)).astype(np.float32))
    return np.concatenate(parts)


def _tanh_max_ulps(compiled, x: np.ndarray) -> tuple[float, float]:
    """(max error in ulps of the correctly rounded result, where) over x and -x."""
    x = np.concatenate([x, -x])
    ulps = _ulps(_run("tanh", x, compiled), np.tanh(x.astype(np.float64)))
    return float(ulps.max()), float(x[np.argmax(ulps)])


@pytest.mark.parametrize("change", ["none", "small_poly", "expm1_poly"])
def test_f32_tanh_within_one_ulp_where_it_is_hardest(change: str) -> None:
    """The form is within 1 ulp on ~5M inputs where its errors are largest (at most 0.713 ulp there
    and on every input, see below); and the same check fails (over 1 ulp) when one coefficient is
    off by a few f32 ulps: the tanh polynomial's x^5 one by 2^-19 (the error peaks below the switch)
    or the exp polynomial's r^4 one by 2^-12 (near a change of k)."""
    small, expm1 = list(SMALL_POLY), list(EXPM1_POLY)
    if change == "small_poly":
        small[1] = float(np.float32(small[1] * (1 + 2.0 ** -19)))
    elif change == "expm1_poly":
        expm1[2] = float(np.float32(expm1[2] * (1 + 2.0 ** -12)))
    worst, where = _tanh_max_ulps(_tanh_variant(tuple(small), tuple(expm1)), _tanh_hard_inputs())
    if change == "none":
        assert worst <= 0.72, f"{worst:.3f} ulp at x = {where!r}"
    else:
        assert worst > 1.0, f"a changed {change} coefficient went unnoticed ({worst:.3f} ulp)"


@pytest.mark.slow
def test_f32_tanh_within_one_ulp_on_every_input() -> None:
    """All 2^32 bit patterns in chunks (about a minute): NaN stays NaN, and every other result is
    within 0.713 ulp of the exact value (np.tanh in f64), the bound math_tanh_f32's docstring gives."""
    compiled = _tanh_variant(tuple(SMALL_POLY), tuple(EXPM1_POLY))
    worst, where = 0.0, 0.0
    for start in range(0, 1 << 32, 1 << 24):
        x = np.arange(start, start + (1 << 24), dtype=np.uint32).view(np.float32)
        got = _run("tanh", x, compiled)
        nan = np.isnan(x)
        assert np.isnan(got[nan]).all() and not np.isnan(got[~nan]).any()
        ulps = _ulps(got[~nan], np.tanh(x[~nan].astype(np.float64)))
        if ulps.max() > worst:
            worst, where = float(ulps.max()), float(x[~nan][np.argmax(ulps)])
    assert worst <= 0.72, f"{worst:.4f} ulp at x = {where!r}"
