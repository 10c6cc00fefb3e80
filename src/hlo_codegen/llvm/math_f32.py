"""Vector-friendly f32 forms of expm1, log and erf (used by math.py for f32; exp and tanh are in
math_exp_f32.py and math_tanh_f32.py, in f32 arithmetic).

Where it sits: `math.define_math(module, op, "float")` builds these instead of widening to the f64
functions, whose f64 accuracy costs degree-13 polynomials, divisions and calls between functions
(f32 expm1 was exp and log). Each form here is straight-line code (selects, no branches, no
calls), so it is inlined into the kernel and the host's loop vectorizer runs it on a vector of
threads.

The shape is XLA:CPU's (xla/service/cpu/llvm_ir_runtime.cc: exp as Cody-Waite reduction by ln 2 and
a polynomial scaled by 2^n built from the exponent bits; log from the exponent field and a
polynomial of the mantissa), but every step runs in double and the result is rounded to f32 once.
Polynomials are Horner steps of one fused multiply-add each (llvm.fma: half the vector
instructions of a multiply and an add, one rounding less). Polynomial errors are below 2^-30
relative, so results stay within the project's f32 bound (1 ulp of the correctly rounded value,
tests/unit/hlo_codegen/llvm/test_lowering_math.py; about 0.5 ulp in fact) where XLA's f32
polynomials are several ulp off and flush subnormals. Degrees: exp - Taylor to r^8 on
|r| <= ln2/2; expm1 - the same reduction, r + r^2 (Taylor to r^9 / 9!); log - log(1 + f) = 2s +
2s^3/3 + ... to s^13 with s = f / (2 + f), |s| <= 0.1716; erf - x P(x^2) (Taylor to x^25) below
0.9, 1 - exp(-x^2) erfcx(x) above, erfcx by a degree-13 Chebyshev interpolant on [0.9, 4] in
powers of u = (x - 2.45) / 1.55 (erf rounds to 1 beyond 4).
"""

from __future__ import annotations

import math

from hlo_codegen.llvm.math_base import D, LN2, LOG2E, MathBuilder
from hlo_codegen.llvm.text import LV, LLFunction

F = "float"
_EXP_TAYLOR = [1.0 / math.factorial(k) for k in range(8, -1, -1)]
_EXPM1_TAYLOR = [1.0 / math.factorial(k) for k in range(9, 1, -1)]  # r^2/2! .. r^9/9!, over r^2
_LOG_SERIES = [2.0 / (2 * k + 1) for k in range(6, 0, -1)]  # 2z/3 + 2z^2/5 + ... + 2z^6/13
_ERF_TAYLOR = [2.0 / math.sqrt(math.pi) * (-1) ** k / (math.factorial(k) * (2 * k + 1))
               for k in range(12, -1, -1)]
ERF_SPLIT, ERFCX_LO, ERFCX_HI = 0.9, 0.9, 4.0
# erfcx(x) = exp(x^2) erfc(x) on [0.9, 4]: Chebyshev interpolant (64 nodes, degree 13) in powers of
# u, highest first; max error 5.3e-10, i.e. below 2.4e-10 on erf (tests refit it with scipy).
ERFCX_POLY = [
    -9.535693927870905e-06, 2.497179619975151e-05, -3.2952530025363916e-05, 8.497582899611976e-05,
    -0.000252738191933312, 0.0006098098548771485, -0.0014089676558188095, 0.0032243102522278837,
    -0.007158660671919873, 0.015346173562649293, -0.03170449744222384, 0.06288822006690538,
    -0.11919874458087645, 0.2145870926623317,
]


def _reduce_ln2(m: MathBuilder, x: LV) -> tuple[LV, LV]:
    """(r, 2^k) with x = k ln2 + r, |r| <= ln2/2, for x in [-110, 90] (k*LN2 is off by under
    1e-14, far below what an f32 result can see)."""
    k = m.rint(m.mul(x, m.c(LOG2E)))
    r = m.sub(x, m.mul(k, m.c(LN2)))
    return r, m.pow2(m.f.cast("fptosi", k, "i64"))


def _exp(m: MathBuilder, x: LV) -> LV:
    xc = m.min(m.max(x, m.c(-110.0)), m.c(90.0))  # e^-110 and e^90 round to 0 and inf in f32
    r, scale = _reduce_ln2(m, xc)
    return m.sel(m.isnan(x), x, m.mul(m.fma_horner(r, _EXP_TAYLOR), scale))


def _expm1(m: MathBuilder, x: LV) -> LV:
    xc = m.min(m.max(x, m.c(-40.0)), m.c(90.0))  # expm1(-40) is -1 in f32
    r, scale = _reduce_ln2(m, xc)
    em1 = m.add(r, m.mul(m.mul(r, r), m.fma_horner(r, _EXPM1_TAYLOR)))  # e^r - 1, exact near 0
    res = m.add(m.mul(scale, em1), m.sub(scale, m.c(1.0)))  # 2^k (e^r - 1) + (2^k - 1)
    return m.sel(m.or_(m.isnan(x), m.eq(x, m.c(0.0))), x, res)  # NaN, and -0 keeps its sign


def _log(m: MathBuilder, x: LV) -> LV:
    """x is an f32 widened: never subnormal as a double, so the exponent field is exact."""
    e, fr = m.log_reduction(x)
    s = m.div(fr, m.add(m.c(2.0), fr))
    z = m.mul(s, s)
    log1pf = m.sub(fr, m.mul(s, m.sub(fr, m.mul(z, m.fma_horner(z, _LOG_SERIES)))))
    res = m.add(m.mul(m.f.cast("sitofp", e, D), m.c(LN2)), log1pf)
    return m.log_special_cases(x, res)


def _erf(m: MathBuilder, x: LV) -> LV:
    a = m.abs(x)
    small = m.mul(a, m.fma_horner(m.mul(a, a), _ERF_TAYLOR))
    ac = m.min(m.max(a, m.c(ERFCX_LO)), m.c(ERFCX_HI))
    u = m.mul(m.sub(ac, m.c((ERFCX_HI + ERFCX_LO) / 2)), m.c(2.0 / (ERFCX_HI - ERFCX_LO)))
    tail = m.sub(m.c(1.0), m.mul(_exp(m, m.neg(m.mul(ac, ac))), m.fma_horner(u, ERFCX_POLY)))
    r = m.sel(m.lt(a, m.c(ERF_SPLIT)), small, tail)
    return m.sel(m.isnan(x), x, m.copysign(r, x))


F32_FORMS = {"expm1": _expm1, "log": _log, "erf": _erf}


def define_f32(f: LLFunction, fn: str) -> None:
    """Fill `f` (float -> float) with the f32 form of `fn`."""
    m = MathBuilder(f)
    f.ret(f.cast("fptrunc", F32_FORMS[fn](m, f.cast("fpext", f.args[0], D)), F))
