"""Building blocks of the own math library (math.py): constants, 2/pi's bits, a small builder
of double-precision arithmetic in LLVM IR (`MathBuilder`) and the argument reduction by pi/2.

The reduction is Cody-Waite with three pieces of pi/2 below 2^19 and Payne-Hanek above: 128 bits
of 2/pi (a global table of 32-bit words, 64 zero bits first so every window starts inside it)
chosen by the exponent, one i128 multiply, so every double reduces exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

from hlo_codegen.llvm.text import LV, LLFunction, LLModule

D = "double"
_PI = Fraction("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899")
_LN2 = Fraction("0.693147180559945309417232121458176568075500134360255254120680009493393621969694715606")


def _split(value: Fraction, keep_bits: int) -> float:
    """`value` rounded to a double with only `keep_bits` significant bits (so k * it is exact)."""
    m, e = math.frexp(float(value))
    scale = 2 ** keep_bits
    return math.ldexp(math.floor(m * scale) / scale, e)


def _hi_lo(value: Fraction) -> tuple[float, float]:
    hi = float(value)
    return hi, float(value - Fraction(hi))


PIO2_1 = _split(_PI / 2, 33)
PIO2_2 = _split(_PI / 2 - Fraction(PIO2_1), 33)
PIO2_3 = float(_PI / 2 - Fraction(PIO2_1) - Fraction(PIO2_2))
PI_HI, PI_LO = _hi_lo(_PI)
PIO2_HI, PIO2_LO = _hi_lo(_PI / 2)
PIO4_HI, PIO4_LO = _hi_lo(_PI / 4)
LN2_HI = _split(_LN2, 32)
LN2_LO = float(_LN2 - Fraction(LN2_HI))
LN2 = float(_LN2)
LOG2E = float(1 / _LN2)
TWO_OVER_PI = float(2 / _PI)
EXP_MAX = 709.782712893384  # log(DBL_MAX)
EXP_COEFFS = [1.0 / math.factorial(k) for k in range(13, -1, -1)]
SIN_COEFFS = [(-1) ** k / math.factorial(2 * k + 1) for k in range(8, 0, -1)]  # r^3 .. r^17
COS_COEFFS = [(-1) ** k / math.factorial(2 * k) for k in range(9, 1, -1)]  # r^4 .. r^18
ATAN_COEFFS = [(-1) ** k / (2 * k + 1) for k in range(22, 0, -1)]  # u^3 .. u^45
LOG_COEFFS = [2.0 / (2 * k + 1) for k in range(11, 0, -1)]  # 2z/3 + 2z^2/5 + ...
ERF_TAYLOR = [(-1) ** k / (math.factorial(k) * (2 * k + 1)) for k in range(33, -1, -1)]
ERFC_CF_TERMS = 40


def _two_over_pi_bits(nbits: int) -> int:
    """floor(2/pi * 2^nbits), from Machin's formula in integer arithmetic."""
    guard = nbits + 64

    def arctan_inv(n: int) -> int:
        total, term, k, sign = 0, (1 << guard) // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k, sign = k + 2, -sign
        return total

    pi = 16 * arctan_inv(5) - 4 * arctan_inv(239)  # pi * 2^guard
    return (2 << (guard + nbits)) // pi


TWO_OVER_PI_PAD = 64  # zero bits before the binary point, so windows may start left of it
TWO_OVER_PI_WORDS = 44


def define_two_over_pi_table(module: LLModule) -> str:
    """The global table of 2/pi's bits: 32-bit words, most significant first, 64 leading zeros."""
    name = "__hlo_two_over_pi"
    if name not in module.defined:
        module.defined.add(name)
        nbits = TWO_OVER_PI_WORDS * 32 - TWO_OVER_PI_PAD
        value = _two_over_pi_bits(nbits)
        words = [(value >> (32 * (TWO_OVER_PI_WORDS - 1 - k))) & 0xFFFFFFFF for k in range(TWO_OVER_PI_WORDS)]
        body = ", ".join(f"i32 {w - (1 << 32) if w >= 1 << 31 else w}" for w in words)
        space = " addrspace(1)" if module.triple.startswith("nvptx") else ""
        module.globals.append(
            f"@{name} = internal{space} constant [{TWO_OVER_PI_WORDS} x i32] [{body}], align 4")
    return "@" + name


class MathBuilder:
    """Double arithmetic inside one LLFunction, with short names so formulas stay readable."""

    def __init__(self, f: LLFunction):
        self.f = f

    def c(self, v: float) -> LV:
        return self.f.fconst(D, v)

    def add(self, a, b): return self.f.binop("fadd", a, b)
    def sub(self, a, b): return self.f.binop("fsub", a, b)
    def mul(self, a, b): return self.f.binop("fmul", a, b)
    def div(self, a, b): return self.f.binop("fdiv", a, b)
    def neg(self, a): return self.f.inst(D, f"fneg double {a.ref}")
    def lt(self, a, b): return self.f.fcmp("olt", a, b)
    def gt(self, a, b): return self.f.fcmp("ogt", a, b)
    def eq(self, a, b): return self.f.fcmp("oeq", a, b)
    def isnan(self, a): return self.f.fcmp("uno", a, a)
    def sel(self, c, a, b): return self.f.select(c, a, b)
    def or_(self, a, b): return self.f.binop("or", a, b)
    def and_(self, a, b): return self.f.binop("and", a, b)

    def intr(self, name: str, *args: LV) -> LV:
        return self.f.intrinsic(f"llvm.{name}.f64", D, list(args))

    def abs(self, a): return self.intr("fabs", a)
    def sqrt(self, a): return self.intr("sqrt", a)
    def rint(self, a): return self.intr("roundeven", a)
    def trunc(self, a): return self.intr("trunc", a)
    def copysign(self, a, b): return self.intr("copysign", a, b)
    def min(self, a, b): return self.intr("minnum", a, b)
    def max(self, a, b): return self.intr("maxnum", a, b)

    def call(self, name: str, *args: LV) -> LV:
        return self.f.call(D, name, list(args))

    def horner(self, x: LV, coeffs: list[float]) -> LV:
        acc = self.c(coeffs[0])
        for c in coeffs[1:]:
            acc = self.add(self.mul(acc, x), self.c(c))
        return acc

    def log_reduction(self, x: LV, scaled: LV | None = None) -> tuple[LV, LV]:
        """x = 2^e (1 + fr) with 1 + fr in [sqrt(1/2), sqrt(2)] for a positive normal double x,
        from its exponent field and mantissa bits: (e as i64, fr). Where the i1 `scaled` holds, x
        was a subnormal multiplied by 2^54, and e has the 54 taken off."""
        f, i64 = self.f, "i64"
        bits = f.cast("bitcast", x, i64)
        e = f.binop("sub", f.binop("and", f.binop("lshr", bits, LV(i64, "52")), LV(i64, "2047")),
                   LV(i64, "1023"))
        if scaled is not None:
            e = f.binop("sub", e, f.select(scaled, LV(i64, "54"), LV(i64, "0")))
        mant = f.cast("bitcast", f.binop("or", f.binop("and", bits, LV(i64, str((1 << 52) - 1))),
                                         LV(i64, str(1023 << 52))), D)
        big = self.gt(mant, self.c(math.sqrt(2.0)))
        mant = self.sel(big, self.mul(mant, self.c(0.5)), mant)
        return f.binop("add", e, f.cast("zext", big, i64)), self.sub(mant, self.c(1.0))

    def log_special_cases(self, x: LV, res: LV) -> LV:
        """log's result where x is +inf, 0, negative or NaN; `res` elsewhere."""
        res = self.sel(self.eq(x, self.c(math.inf)), x, res)
        res = self.sel(self.eq(x, self.c(0.0)), self.c(-math.inf), res)
        res = self.sel(self.lt(x, self.c(0.0)), self.c(math.nan), res)
        return self.sel(self.isnan(x), x, res)

    def fma_horner(self, x: LV, coeffs: list[float]) -> LV:
        """`horner` with each step one fused multiply-add (llvm.fma: one rounding, the same on every
        target): half the instructions of the vectorized f32 forms, and no less accurate."""
        acc = self.c(coeffs[0])
        for c in coeffs[1:]:
            acc = self.intr("fma", acc, x, self.c(c))
        return acc

    def pow2(self, k: LV) -> LV:
        """2**k for an i64 k in the normal range."""
        f = self.f
        return f.cast("bitcast", f.binop("shl", f.binop("add", k, LV("i64", "1023")), LV("i64", "52")), D)

    def to_int(self, a: LV) -> LV:
        """Truncate a double that may be inf/NaN to i64 (out-of-range values give 0)."""
        ok = self.lt(self.abs(a), self.c(2.0 ** 62))
        return self.f.cast("fptosi", self.sel(ok, a, self.c(0.0)), "i64")

    def branch(self, cond: LV, then_fn: Callable[[], LV], else_fn: Callable[[], LV]) -> LV:
        f = self.f
        t, e, j = f.new_block("then"), f.new_block("else"), f.new_block("join")
        f.cbr(cond, t, e)
        f.set_block(t)
        a = then_fn()
        ta = f.current
        f.br(j)
        f.set_block(e)
        b = else_fn()
        eb = f.current
        f.br(j)
        f.set_block(j)
        v, phi = f.phi(D)
        phi.incoming += [(a.ref, ta), (b.ref, eb)]
        return v


def _reduce_pio2_small(m: MathBuilder, x: LV) -> tuple[LV, LV]:
    """Cody-Waite with three pieces of pi/2: exact while |x| < 2^20 * pi/2."""
    k = m.rint(m.mul(x, m.c(TWO_OVER_PI)))
    r = m.sub(m.sub(m.sub(x, m.mul(k, m.c(PIO2_1))), m.mul(k, m.c(PIO2_2))), m.mul(k, m.c(PIO2_3)))
    return r, m.f.binop("and", m.to_int(k), LV("i64", "3"))


def _reduce_pio2_large(m: MathBuilder, x: LV) -> tuple[LV, LV]:
    """Payne-Hanek: (|x| * 2/pi) mod 4 from 128 bits of 2/pi picked by the exponent, in i128."""
    f = m.f
    i64, i128 = "i64", "i128"
    c = lambda ty, v: LV(ty, str(v))  # noqa: E731
    bits = f.cast("bitcast", m.abs(x), i64)
    mant = f.binop("or", f.binop("and", bits, c(i64, (1 << 52) - 1)), c(i64, 1 << 52))
    e = f.binop("sub", f.binop("lshr", bits, c(i64, 52)), c(i64, 1023 + 52))  # |x| = mant * 2^e
    pos = f.binop("add", e, c(i64, TWO_OVER_PI_PAD - 2))  # table bit index of weight 2^(1-e)
    word, off = f.binop("lshr", pos, c(i64, 5)), f.binop("and", pos, c(i64, 31))
    table = define_two_over_pi_table(f.module)
    ptr = LV("ptr addrspace(1)" if f.module.triple.startswith("nvptx") else "ptr", table)
    words = [f.cast("zext", f.load("i32", f.gep("i32", ptr, f.binop("add", word, c(i64, k))), 4), i128)
             for k in range(5)]
    hi = words[0]
    for w in words[1:4]:
        hi = f.binop("or", f.binop("shl", hi, c(i128, 32)), w)
    chunk = f.binop("or", f.binop("shl", hi, f.cast("zext", off, i128)),
                    f.binop("lshr", words[4], f.cast("zext", f.binop("sub", c(i64, 32), off), i128)))
    prod = f.binop("mul", f.cast("zext", mant, i128), chunk)  # (|x| * 2/pi) mod 4, scaled by 2^126
    q = f.cast("trunc", f.binop("lshr", prod, c(i128, 126)), i64)
    frac = f.binop("shl", prod, c(i128, 2))
    neg = f.icmp("slt", frac, c(i128, 0))  # fraction >= 1/2: round the quadrant up
    q = f.binop("add", q, f.cast("zext", neg, i64))
    mag = f.select(neg, f.binop("sub", c(i128, 0), frac), frac)
    lz = f.intrinsic("llvm.umin.i128", i128, [f.intrinsic("llvm.ctlz.i128", i128, [mag, LV("i1", "false")]),
                                               c(i128, 127)])
    top = f.cast("trunc", f.binop("lshr", f.binop("shl", mag, lz), c(i128, 64)), i64)  # f * 2^(64 + lz)
    scale = m.pow2(f.binop("sub", c(i64, -64), f.cast("trunc", lz, i64)))
    r = m.mul(m.mul(f.cast("uitofp", top, D), scale), m.c(PIO2_HI))
    r = m.sel(neg, m.neg(r), r)
    xneg = m.lt(x, m.c(0.0))
    q = f.select(xneg, f.binop("sub", c(i64, 0), q), q)
    return m.sel(xneg, m.neg(r), r), f.binop("and", q, c(i64, 3))


def reduce_pio2(m: MathBuilder, x: LV) -> tuple[LV, LV]:
    """(r, quadrant) with x = quadrant * pi/2 + r (mod 2 pi), |r| <= pi/4; NaN r for inf/NaN."""
    f = m.f
    small = m.f.fcmp("ult", m.abs(x), m.c(2.0 ** 19))
    t, e, j = f.new_block("small"), f.new_block("large"), f.new_block("reduced")
    f.cbr(small, t, e)
    f.set_block(t)
    r1, q1 = _reduce_pio2_small(m, x)
    tb = f.current
    f.br(j)
    f.set_block(e)
    xs = m.sel(m.eq(m.abs(x), m.c(math.inf)), m.c(2.0 ** 20), x)
    r2, q2 = _reduce_pio2_large(m, xs)
    r2 = m.sel(m.eq(m.abs(x), m.c(math.inf)), m.c(math.nan), r2)
    eb = f.current
    f.br(j)
    f.set_block(j)
    r, pr = f.phi(D)
    pr.incoming += [(r1.ref, tb), (r2.ref, eb)]
    q, pq = f.phi("i64")
    pq.incoming += [(q1.ref, tb), (q2.ref, eb)]
    return r, q
