"""tanh on f32 in f32 arithmetic, 16 lanes a vector on the host.

Where it sits: math.py's `define_math(module, "tanh", "float")` builds this for every f32 tanh of a
host kernel, including the f32 tanh the emitters write between a widening from bf16/f16 and the
rounding back (GELU). Straight-line code (selects, no branches, no calls), so it is inlined and the
host's loop vectorizer runs it on a vector of threads, as math_exp_f32.py's exp.

With a = |x|, two pieces, both computed and one selected:
- a < SWITCH: tanh(a) = a + a^3 P(a^2), P of degree 4 fitted on [0, SWITCH^2] (weighted minimax by
  Lawson's iteration, the coefficients rounded to f32 one at a time, the rest refitted; off by
  2^-24 / 50 relative); the correction a^3 P is at most 10% of the result, so its few roundings stay
  small in it;
- a >= SWITCH: tanh(a) = 1 - 1 / h with h = (1 + e^{2a}) / 2. e^{2a} = 2^k (1 + p) by exp's f32
  Cody-Waite reduction (k rounded by a magic constant whose bits also give 2^(k-1), a two-part
  ln 2 in fused multiply-adds) and p = e^r - 1 = r + r^2 Q(r), Q of degree 4 fitted the same way on
  |r| <= ln2/2 and evaluated by Estrin's scheme; h = (2^(k-1) + 1/2) + 2^(k-1) p is summed exactly
  into a head and a tail (Fast2Sum), the quotient 1 / h gets one Newton correction from its exact
  FMA residual, and 1 - q is formed exactly (Fast2Sum) before q's tail is taken off, so the errors
  left are p's (a few 2^-26 relative, damped by tanh's slope) and the last rounding. Each
  compensation is needed: without any one of them the error near the switch reaches 1.09-1.33
  ulp. |x| is clamped at 10 (tanh rounds to 1 from 9.0109 on), so infinities need no case and
  k <= 29.
The sign comes back by copysign (tanh(-0) = -0); NaN propagates through the arithmetic. 37
vector instructions for 16 lanes, one a division; the dependency chain is kept short (Estrin, k
from |x| directly, q's tail in one FMA), as a kernel computing several tanh a thread runs out of
out-of-order window before it runs out of execution units. Error: at most 0.713 ulp of the exact
value on every f32 input (at x = +-0.54891, just below the switch; the exhaustive `slow` test of
tests/unit/hlo_codegen/llvm/test_vector_math.py runs all 2^32 bit patterns against numpy's f64 tanh,
about a minute), within the project's f32 bound of 1 ulp (tests/unit/hlo_codegen/llvm/
test_lowering_math.py); rounded to bf16 or f16 it is the correctly rounded tanh on every input. The
double-precision form it replaced (expm1(2a) / (expm1(2a) + 2) in f64) was within about 0.5 ulp but
ran on 8-lane halves: the f32 GELU kernel of testdata/fusion/mlp_f32.hlo (4M tanh) went from 4.1
to 2.25 ms on one thread (0.77 ms with tanh replaced by a clamp), from 2.3 to 1.35 ms on two.
XLA:CPU uses Eigen's rational interpolant instead, which its comments call not numerically precise
(xla/service/llvm_ir/math_ops.cc, EmitFastTanh).
"""

from __future__ import annotations

import math
from typing import Sequence

from hlo_codegen.llvm.text import LV, LLFunction, LLModule

F = "float"
NAME = "__hlo_tanh_f32"
SWITCH = 0.55
# P(z) = (tanh(x) - x) / x^3 with z = x^2, lowest power first (fit weighted by x^3 / tanh(x)).
SMALL_POLY = [-0.33333316445350647, 0.13332544267177582, -0.0538475476205349, 0.02105071395635605,
              -0.0062428489327430725]
# Q(r) = (e^r - 1 - r) / r^2 on |r| <= ln2/2, lowest power first (fit weighted by r^2 e^-r).
EXPM1_POLY = [0.4999999403953552, 0.1666652113199234, 0.04166827350854874, 0.008368689566850662,
              0.001382028334774077]
LN2_HI = 0.693145751953125  # 15 significant bits: k * LN2_HI is exact for k < 2^9
LN2_LO = math.log(2.0) - LN2_HI
MAX_2A = 20.0  # 1 - 2 e^-20 rounds to 1 in f32; k stays <= 29
ROUND_MAGIC = 1.5 * 2.0 ** 23 + 126  # ulp 1 (so adding rounds to an integer); low bits: bias - 1


class _F32:
    """The few f32 operations the form needs, on one LLFunction."""

    def __init__(self, f: LLFunction):
        self.f = f

    def c(self, v: float) -> LV:
        return self.f.fconst(F, v)

    def add(self, a: LV, b: LV) -> LV:
        return self.f.binop("fadd", a, b)

    def sub(self, a: LV, b: LV) -> LV:
        return self.f.binop("fsub", a, b)

    def mul(self, a: LV, b: LV) -> LV:
        return self.f.binop("fmul", a, b)

    def neg(self, a: LV) -> LV:
        return self.f.inst(F, f"fneg float {a.ref}")

    def fma(self, a: LV, b: LV, d: LV) -> LV:
        return self.f.intrinsic("llvm.fma.f32", F, [a, b, d])

    def estrin4(self, u: LV, u2: LV, c: Sequence[float]) -> LV:
        """c0 + c1 u + ... + c4 u^4 as (c0 + c1 u) + u^2 ((c2 + c3 u) + c4 u^2): as many fused
        multiply-adds as Horner's rule, three deep instead of four."""
        return self.fma(self.fma(u2, self.c(c[4]), self.fma(u, self.c(c[3]), self.c(c[2]))), u2,
                        self.fma(u, self.c(c[1]), self.c(c[0])))

    def horner(self, u: LV, coeffs: Sequence[float]) -> LV:
        """sum coeffs[i] u^i (lowest power first), one fused multiply-add a step."""
        p = self.c(coeffs[-1])
        for v in reversed(coeffs[:-1]):
            p = self.fma(p, u, self.c(v))
        return p


def _small(m: _F32, a: LV, poly: Sequence[float]) -> LV:
    z = m.mul(a, a)
    return m.fma(a, m.mul(z, m.horner(z, poly)), a)


def _exp2a(m: _F32, a: LV, poly: Sequence[float]) -> tuple[LV, LV]:
    """(2^(k-1), p) with e^{2a} = 2^k (1 + p) for a in [0, MAX_2A / 2] (2a clamped there; NaN
    stays NaN, so the result does)."""
    f = m.f
    ac = f.select(f.fcmp("ogt", a, m.c(MAX_2A / 2)), m.c(MAX_2A / 2), a)
    y = m.add(ac, ac)
    # k = rint(y / ln 2) in the low bits of ROUND_MAGIC + k: ROUND_MAGIC's ulp is 1 and its low bits
    # hold the exponent bias less 1, so those bits shifted left by 23 are 2^(k-1) as a float.
    kf = m.fma(ac, m.c(2.0 / math.log(2.0)), m.c(ROUND_MAGIC))
    nk = m.sub(m.c(ROUND_MAGIC), kf)
    r = m.fma(nk, m.c(LN2_LO), m.fma(nk, m.c(LN2_HI), y))  # the first step is exact
    r2 = m.mul(r, r)
    p = m.fma(r2, m.estrin4(r, r2, poly), r)
    scale = f.cast("bitcast", f.binop("shl", f.cast("bitcast", kf, "i32"), LV("i32", "23")), F)
    return scale, p


def _large(m: _F32, a: LV, poly: Sequence[float]) -> LV:
    """1 - 1 / h with h = (1 + e^{2a}) / 2 = (2^(k-1) + 1/2) + 2^(k-1) p, halved so that the
    constants are 1/2 and 1 only."""
    half_scale, p = _exp2a(m, a, poly)
    s = m.add(half_scale, m.c(0.5))  # exact for k <= 24; beyond, the lost 1/2 is far below an ulp
    h_hi = m.fma(p, half_scale, s)  # Fast2Sum of s and 2^(k-1) p (|s| > |2^(k-1) p|), as two FMAs
    h_lo = m.fma(p, half_scale, m.sub(s, h_hi))
    q_hi = m.f.binop("fdiv", m.c(1.0), h_hi)
    rho = m.fma(m.neg(q_hi), h_lo, m.fma(m.neg(q_hi), h_hi, m.c(1.0)))  # 1 - q_hi h, the first exact
    t_hi = m.sub(m.c(1.0), q_hi)  # Fast2Sum: q_hi <= 1
    t_lo = m.sub(m.sub(m.c(1.0), t_hi), q_hi)
    return m.add(t_hi, m.fma(m.neg(rho), q_hi, t_lo))  # q's tail rho / h is rho q_hi to f32 accuracy


def build_tanh_f32(f: LLFunction, small_poly: Sequence[float] = SMALL_POLY,
                   expm1_poly: Sequence[float] = EXPM1_POLY, switch: float = SWITCH) -> None:
    """Fill `f` (float -> float) with the form (the coefficients are parameters for tests)."""
    m = _F32(f)
    x = f.args[0]
    a = f.intrinsic("llvm.fabs.f32", F, [x])
    t = f.select(f.fcmp("olt", a, m.c(switch)), _small(m, a, small_poly), _large(m, a, expm1_poly))
    f.ret(f.intrinsic("llvm.copysign.f32", F, [t, x]))


def define_tanh_f32(module: LLModule) -> str:
    """Define (once) `float @__hlo_tanh_f32(float)`; its name."""
    if NAME not in module.defined:
        build_tanh_f32(module.function(NAME, F, [(F, "x0")], prefix="internal"))
    return NAME
