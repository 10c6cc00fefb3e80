"""The f32 forms of exp (hlo_codegen.llvm.math_exp_f32, in f32 arithmetic), expm1, tanh, log and erf
(hlo_codegen.llvm.math_f32, in double): accuracy where
they are hardest (range edges, subnormal results, the switch points between pieces), special
values, and that the host's loop vectorizer really turns a loop of them into vector code.

The bound is the project's f32 bound of tests/unit/hlo_codegen/llvm/test_lowering_math.py: within 1 ulp of
the correctly rounded value (the error table there samples the whole domains).
"""

from __future__ import annotations

import ctypes
import functools
import re

import numpy as np
import pytest
from scipy import special

from hlo_codegen.llvm.math import define_math
from hlo_codegen.llvm.math_f32 import ERFCX_HI, ERFCX_LO, ERFCX_POLY, F32_FORMS
from hlo_codegen.llvm.text import LV, LLModule
from hlo_run.host_kernel import compile_host_module

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


def _run(op: str, x: np.ndarray) -> np.ndarray:
    compiled, _ = _compiled()
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
    exp)."""
    compiled, text = _compiled()
    body = re.search(rf"define internal float @__hlo_{op}_f32\(.*?\n}}", text, re.S).group(0)
    assert body.count(":\n") == 1 and not re.search(r"call \w+ @(?!llvm\.)", body), body[:400]
    optimized = str(compiled.module)
    loop = re.search(rf"define void @map_{op}\(.*?\n}}", optimized, re.S).group(0)
    lanes = r"<16 x float>" if op in ("exp", "tanh") else r"<\d+ x double>"
    assert "vector.body" in loop and re.search(lanes, loop), f"map_{op} did not vectorize"


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
