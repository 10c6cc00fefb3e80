"""Own transcendental functions in LLVM IR (no libm, no libdevice), used by both targets.

Where it sits: the lowering (lowering.py) calls `define_math(module, op, "float"|"double")` for
`exp`, `log`, `tanh`, `erf`, `atan2`, `powf`, ... on the host always, and on NVPTX when libdevice
is not available (libdevice.py). Every function is written once in double precision; the float
versions widen, call it and round once, so f32 results are within about half an ulp of the true
value and both targets agree bit for bit. Except, for f32: exp and tanh run in f32 arithmetic
(math_exp_f32.py, math_tanh_f32.py: within 0.87 and 0.713 ulp on every f32 input), expm1, log and
erf as straight-line double forms (math_f32.py), all of them vectorizable.

Algorithms (f64): exp - Cody-Waite reduction by ln2 and a degree-13 Taylor polynomial, scaled by
two exact powers of two; log - reduction to [sqrt(1/2), sqrt(2)), log(1+f) = f - s(f - R(s^2))
with s = f/(2+f); expm1 / log1p - Kahan's compensated forms; sin/cos/tan - three-part pi/2
(Cody-Waite) reduction below 2^19, Payne-Hanek with 128 bits of 2/pi above (so every double
reduces exactly), then Taylor polynomials on [-pi/4, pi/4]; atan/atan2/asin/acos - reduction
to [0, tan(pi/8)] and a Taylor
series; sinh/cosh/asinh/acosh/atanh - through exp/expm1/log/log1p; erf - Taylor series below 2,
the continued fraction of erfc above; cbrt - exp(log(x)/3) and one Newton step; pow -
exp(y log|x|) with C99's special cases (relative error grows with |y log x|, ~1e-14 for f64);
fmod - exact, by long division of the significands (NVPTX only: PTX has no exact remainder).
"""

from __future__ import annotations

import math
from typing import Callable

from hlo_codegen.llvm.math_base import (
    ATAN_COEFFS, COS_COEFFS, ERFC_CF_TERMS, ERF_TAYLOR, EXP_COEFFS, EXP_MAX, LN2_HI, LN2_LO, LOG2E,
    LOG_COEFFS, SIN_COEFFS, PI_HI, PI_LO, PIO2_HI, PIO2_LO, PIO4_HI, PIO4_LO, D, LN2,
    MathBuilder as _Math, reduce_pio2 as _reduce_pio2,
)
from hlo_codegen.llvm.math_exp_f32 import define_exp_f32
from hlo_codegen.llvm.math_f32 import F32_FORMS, define_f32
from hlo_codegen.llvm.math_tanh_f32 import define_tanh_f32
from hlo_codegen.llvm.text import LV, LLModule


# -- the functions (each takes _Math and its double arguments) -------------------------------------
def _exp(m: _Math, x: LV) -> LV:
    xc = m.sel(m.isnan(x), m.c(0.0), m.min(m.max(x, m.c(-746.0)), m.c(710.0)))
    k = m.rint(m.mul(xc, m.c(LOG2E)))
    r = m.sub(m.sub(xc, m.mul(k, m.c(LN2_HI))), m.mul(k, m.c(LN2_LO)))
    p = m.horner(r, EXP_COEFFS)
    ki = m.f.cast("fptosi", k, "i64")
    k1 = m.f.binop("ashr", ki, LV("i64", "1"))
    k2 = m.f.binop("sub", ki, k1)
    res = m.mul(m.mul(p, m.pow2(k1)), m.pow2(k2))
    res = m.sel(m.gt(x, m.c(EXP_MAX)), m.c(math.inf), res)
    res = m.sel(m.lt(x, m.c(-745.2)), m.c(0.0), res)
    return m.sel(m.isnan(x), x, res)


def _log(m: _Math, x: LV) -> LV:
    f = m.f
    tiny = m.lt(x, m.c(2.0 ** -1022))
    xs = m.sel(tiny, m.mul(x, m.c(2.0 ** 54)), x)
    e, fr = m.log_reduction(xs, scaled=tiny)
    s = m.div(fr, m.add(m.c(2.0), fr))
    z = m.mul(s, s)
    r = m.mul(z, m.horner(z, LOG_COEFFS))
    log1pf = m.sub(fr, m.mul(s, m.sub(fr, r)))
    ed = f.cast("sitofp", e, D)
    res = m.add(m.mul(ed, m.c(LN2_HI)), m.add(log1pf, m.mul(ed, m.c(LN2_LO))))
    return m.log_special_cases(x, res)


def _log1p(m: _Math, x: LV) -> LV:
    u = m.add(m.c(1.0), x)
    d = m.sub(u, m.c(1.0))
    res = m.mul(m.call("__hlo_log_f64", u), m.div(x, d))
    res = m.sel(m.eq(u, m.c(math.inf)), u, res)
    return m.sel(m.eq(d, m.c(0.0)), x, res)


def _expm1(m: _Math, x: LV) -> LV:
    u = m.call("__hlo_exp_f64", x)
    um1 = m.sub(u, m.c(1.0))
    res = m.div(m.mul(um1, x), m.call("__hlo_log_f64", u))
    res = m.sel(m.eq(um1, m.c(-1.0)), um1, res)
    res = m.sel(m.eq(u, m.c(math.inf)), u, res)
    return m.sel(m.eq(u, m.c(1.0)), x, res)


def _tanh(m: _Math, x: LV) -> LV:
    a = m.abs(x)
    e = m.call("__hlo_expm1_f64", m.add(a, a))
    r = m.sel(m.gt(a, m.c(22.0)), m.c(1.0), m.div(e, m.add(e, m.c(2.0))))
    return m.copysign(r, x)


def _sin_cos_poly(m: _Math, r: LV) -> tuple[LV, LV]:
    z = m.mul(r, r)
    s = m.add(r, m.mul(m.mul(r, z), m.horner(z, SIN_COEFFS)))
    c = m.add(m.sub(m.c(1.0), m.mul(z, m.c(0.5))), m.mul(m.mul(z, z), m.horner(z, COS_COEFFS)))
    return s, c


def _quadrant(m: _Math, q: LV, values: list[LV]) -> LV:
    out = values[3]
    for k in (2, 1, 0):
        out = m.sel(m.f.icmp("eq", q, LV("i64", str(k))), values[k], out)
    return out


def _tiny(m: _Math, x: LV, value: LV) -> LV:
    """x itself where |x| < 2^-27 (keeps the sign of -0 for odd functions)."""
    return m.sel(m.lt(m.abs(x), m.c(2.0 ** -27)), x, value)


def _sin(m: _Math, x: LV) -> LV:
    r, q = _reduce_pio2(m, x)
    s, c = _sin_cos_poly(m, r)
    return _tiny(m, x, _quadrant(m, q, [s, c, m.neg(s), m.neg(c)]))


def _cos(m: _Math, x: LV) -> LV:
    r, q = _reduce_pio2(m, x)
    s, c = _sin_cos_poly(m, r)
    return _quadrant(m, q, [c, m.neg(s), m.neg(c), s])


def _tan(m: _Math, x: LV) -> LV:
    r, q = _reduce_pio2(m, x)
    s, c = _sin_cos_poly(m, r)
    odd = m.f.icmp("ne", m.f.binop("and", q, LV("i64", "1")), LV("i64", "0"))
    return _tiny(m, x, m.sel(odd, m.neg(m.div(c, s)), m.div(s, c)))


def _atan01(m: _Math, t: LV) -> LV:
    """atan(t) for t in [0, 1] (NaN passes through)."""
    big = m.gt(t, m.c(math.sqrt(2.0) - 1.0))
    u = m.sel(big, m.div(m.sub(t, m.c(1.0)), m.add(t, m.c(1.0))), t)
    z = m.mul(u, u)
    p = m.add(u, m.mul(m.mul(u, z), m.horner(z, ATAN_COEFFS)))
    return m.sel(big, m.add(m.c(PIO4_HI), m.add(p, m.c(PIO4_LO))), p)


def _atan(m: _Math, x: LV) -> LV:
    a = m.abs(x)
    inv = m.gt(a, m.c(1.0))
    r = m.call("__hlo_atan01_f64", m.sel(inv, m.div(m.c(1.0), a), a))
    r = m.sel(inv, m.add(m.sub(m.c(PIO2_HI), r), m.c(PIO2_LO)), r)
    return m.copysign(r, x)


def _atan2(m: _Math, y: LV, x: LV) -> LV:
    ax, ay = m.abs(x), m.abs(y)
    swap = m.gt(ay, ax)
    base = m.call("__hlo_atan01_f64", m.div(m.sel(swap, ax, ay), m.sel(swap, ay, ax)))
    base = m.sel(swap, m.add(m.sub(m.c(PIO2_HI), base), m.c(PIO2_LO)), base)
    zero = m.and_(m.eq(ax, m.c(0.0)), m.eq(ay, m.c(0.0)))
    inf = m.and_(m.eq(ax, m.c(math.inf)), m.eq(ay, m.c(math.inf)))
    base = m.sel(zero, m.c(0.0), m.sel(inf, m.c(PIO4_HI), base))
    xneg = m.f.icmp("slt", m.f.cast("bitcast", x, "i64"), LV("i64", "0"))
    base = m.sel(xneg, m.add(m.sub(m.c(PI_HI), base), m.c(PI_LO)), base)
    res = m.copysign(base, y)
    return m.sel(m.or_(m.isnan(x), m.isnan(y)), m.add(x, y), res)


def _cosine_side(m: _Math, x: LV) -> LV:
    return m.sqrt(m.mul(m.sub(m.c(1.0), x), m.add(m.c(1.0), x)))


def _asin(m: _Math, x: LV) -> LV:
    return m.call("__hlo_atan2_f64", x, _cosine_side(m, x))


def _acos(m: _Math, x: LV) -> LV:
    return m.call("__hlo_atan2_f64", _cosine_side(m, x), x)


def _sinh(m: _Math, x: LV) -> LV:
    a = m.abs(x)
    e = m.call("__hlo_expm1_f64", a)
    small = m.mul(m.c(0.5), m.add(e, m.div(e, m.add(e, m.c(1.0)))))
    t = m.call("__hlo_exp_f64", a)
    mid = m.sub(m.mul(m.c(0.5), t), m.div(m.c(0.5), t))
    h = m.call("__hlo_exp_f64", m.mul(m.c(0.5), a))
    huge = m.mul(m.mul(m.c(0.5), h), h)
    r = m.sel(m.lt(a, m.c(1.0)), small, m.sel(m.lt(a, m.c(709.0)), mid, huge))
    return m.copysign(r, x)


def _cosh(m: _Math, x: LV) -> LV:
    a = m.abs(x)
    t = m.call("__hlo_exp_f64", a)
    mid = m.add(m.mul(m.c(0.5), t), m.div(m.c(0.5), t))
    h = m.call("__hlo_exp_f64", m.mul(m.c(0.5), a))
    return m.sel(m.lt(a, m.c(709.0)), mid, m.mul(m.mul(m.c(0.5), h), h))


def _asinh(m: _Math, x: LV) -> LV:
    a = m.abs(x)
    a2 = m.mul(a, a)
    mid = m.call("__hlo_log1p_f64", m.add(a, m.div(a2, m.add(m.c(1.0), m.sqrt(m.add(m.c(1.0), a2))))))
    huge = m.add(m.call("__hlo_log_f64", a), m.c(LN2))
    return m.copysign(m.sel(m.gt(a, m.c(2.0 ** 28)), huge, mid), x)


def _acosh(m: _Math, x: LV) -> LV:
    t = m.sub(x, m.c(1.0))
    mid = m.call("__hlo_log1p_f64", m.add(t, m.sqrt(m.add(m.add(t, t), m.mul(t, t)))))
    huge = m.add(m.call("__hlo_log_f64", x), m.c(LN2))
    res = m.sel(m.gt(x, m.c(2.0 ** 28)), huge, mid)
    return m.sel(m.lt(x, m.c(1.0)), m.c(math.nan), res)


def _atanh(m: _Math, x: LV) -> LV:
    a = m.abs(x)
    r = m.mul(m.c(0.5), m.call("__hlo_log1p_f64", m.div(m.add(a, a), m.sub(m.c(1.0), a))))
    return m.copysign(r, x)


def _erf(m: _Math, x: LV) -> LV:
    a = m.abs(x)

    def taylor() -> LV:
        return m.mul(m.c(2.0 / math.sqrt(math.pi)), m.mul(a, m.horner(m.mul(a, a), ERF_TAYLOR)))

    def continued_fraction() -> LV:
        ac = m.min(a, m.c(6.0))
        k = ac
        for j in range(ERFC_CF_TERMS, 0, -1):
            k = m.add(ac, m.div(m.c(j / 2.0), k))
        erfc = m.div(m.call("__hlo_exp_f64", m.neg(m.mul(ac, ac))), m.mul(m.c(math.sqrt(math.pi)), k))
        return m.sub(m.c(1.0), erfc)

    r = m.branch(m.lt(a, m.c(2.0)), taylor, continued_fraction)
    return m.copysign(m.sel(m.isnan(a), a, r), x)


def _cbrt(m: _Math, x: LV) -> LV:
    a = m.abs(x)
    y0 = m.call("__hlo_exp_f64", m.mul(m.call("__hlo_log_f64", a), m.c(1.0 / 3.0)))
    y = m.sub(y0, m.mul(m.sub(y0, m.div(a, m.mul(y0, y0))), m.c(1.0 / 3.0)))
    special = m.or_(m.or_(m.eq(a, m.c(0.0)), m.eq(a, m.c(math.inf))), m.isnan(a))
    return m.sel(special, x, m.copysign(y, x))


def _pow(m: _Math, x: LV, y: LV) -> LV:
    f = m.f
    ax = m.abs(x)
    r = m.call("__hlo_exp_f64", m.mul(y, m.call("__hlo_log_f64", ax)))
    y_int = m.eq(m.trunc(y), y)
    half = m.mul(y, m.c(0.5))
    y_odd = m.and_(m.and_(y_int, m.f.fcmp("une", m.trunc(half), half)), m.lt(m.abs(y), m.c(2.0 ** 53)))
    neg = f.icmp("slt", f.cast("bitcast", x, "i64"), LV("i64", "0"))
    r = m.sel(m.and_(neg, y_odd), m.neg(r), r)
    bad = m.and_(m.and_(m.lt(x, m.c(0.0)), f.binop("xor", y_int, LV("i1", "true"))),
                 m.f.fcmp("one", x, m.c(-math.inf)))
    r = m.sel(bad, m.c(math.nan), r)
    r = m.sel(m.or_(m.isnan(x), m.isnan(y)), m.add(x, y), r)
    one = m.or_(m.eq(y, m.c(0.0)), m.or_(m.eq(x, m.c(1.0)),
                                          m.and_(m.eq(x, m.c(-1.0)), m.eq(m.abs(y), m.c(math.inf)))))
    return m.sel(one, m.c(1.0), r)


def _fmod(m: _Math, x: LV, y: LV) -> LV:
    """Exact fmod (the sign of x) by long division on the significands: at most ~2100 steps."""
    f = m.f
    i64 = "i64"
    c = lambda v: LV(i64, str(v))  # noqa: E731

    def split(v: LV) -> tuple[LV, LV]:  # |v| = sig * 2^exp with bit 52 of sig set
        bits = f.cast("bitcast", m.abs(v), i64)
        field = f.binop("lshr", bits, c(52))
        sig = f.binop("and", bits, c((1 << 52) - 1))
        sig = f.select(f.icmp("eq", field, c(0)), sig, f.binop("or", sig, c(1 << 52)))
        exp = f.binop("sub", f.intrinsic("llvm.smax.i64", i64, [field, c(1)]), c(1075))
        shift = f.binop("sub", f.intrinsic("llvm.ctlz.i64", i64, [sig, LV("i1", "true")]), c(11))
        return f.binop("shl", sig, shift), f.binop("sub", exp, shift)

    special = m.or_(m.or_(m.isnan(x), m.isnan(y)), m.or_(m.eq(m.abs(x), m.c(math.inf)), m.eq(y, m.c(0.0))))
    small = m.or_(m.lt(m.abs(x), m.abs(y)), m.eq(x, m.c(0.0)))
    safe_x = m.sel(m.or_(special, small), m.c(1.0), x)
    safe_y = m.sel(m.or_(special, small), m.c(1.0), y)
    mx, ex = split(safe_x)
    my, ey = split(safe_y)
    pre, head, done = f.current, f.new_block("fmod_loop"), f.new_block("fmod_done")
    f.cbr(f.icmp("sgt", ex, ey), head, done)
    f.set_block(head)
    sig, sig_phi = f.phi(i64, "sig")
    e, e_phi = f.phi(i64, "e")
    sig_phi.incoming.append((mx.ref, pre))
    e_phi.incoming.append((ex.ref, pre))
    reduced = f.select(f.icmp("uge", sig, my), f.binop("sub", sig, my), sig)
    nsig, ne = f.binop("shl", reduced, c(1)), f.binop("sub", e, c(1))
    sig_phi.incoming.append((nsig.ref, head))
    e_phi.incoming.append((ne.ref, head))
    f.cbr(f.icmp("sgt", ne, ey), head, done)
    f.set_block(done)
    last, last_phi = f.phi(i64, "sig")
    last_phi.incoming += [(mx.ref, pre), (nsig.ref, head)]
    rem = f.select(f.icmp("uge", last, my), f.binop("sub", last, my), last)
    half = f.binop("ashr", ey, c(1))
    r = m.mul(m.mul(f.cast("uitofp", rem, D), m.pow2(half)), m.pow2(f.binop("sub", ey, half)))
    r = m.copysign(r, x)
    return m.sel(special, m.c(math.nan), m.sel(small, x, r))


# name -> (arity, builder, functions it calls)
_DEFINITIONS: dict[str, tuple[int, Callable, tuple[str, ...]]] = {
    "exp": (1, _exp, ()), "log": (1, _log, ()), "log1p": (1, _log1p, ("log",)),
    "expm1": (1, _expm1, ("exp", "log")), "tanh": (1, _tanh, ("expm1",)), "sin": (1, _sin, ()),
    "cos": (1, _cos, ()), "tan": (1, _tan, ()), "atan01": (1, _atan01, ()), "atan": (1, _atan, ("atan01",)),
    "atan2": (2, _atan2, ("atan01",)), "asin": (1, _asin, ("atan2",)), "acos": (1, _acos, ("atan2",)),
    "sinh": (1, _sinh, ("expm1", "exp")), "cosh": (1, _cosh, ("exp",)),
    "asinh": (1, _asinh, ("log1p", "log")), "acosh": (1, _acosh, ("log1p", "log")),
    "atanh": (1, _atanh, ("log1p",)), "erf": (1, _erf, ("exp",)), "cbrt": (1, _cbrt, ("exp", "log")),
    "pow": (2, _pow, ("exp", "log")), "fmod": (2, _fmod, ()),
}
# Kernel-IR op name -> function name here.
MATH_OPS = {op: op for op in _DEFINITIONS if op not in ("atan01", "pow", "fmod")}
MATH_OPS["powf"] = "pow"
MATH_OPS["remf"] = "fmod"


def define_math(module: LLModule, op: str, ty: str) -> str:
    """Define (once) the module function computing kernel-IR math op `op` on `ty`; its name."""
    fn = MATH_OPS[op]
    return _define(module, fn, ty)


def _define(module: LLModule, fn: str, ty: str) -> str:
    arity, builder, deps = _DEFINITIONS[fn]
    name = f"__hlo_{fn}_{'f64' if ty == D else 'f32'}"
    if name in module.defined:
        return name
    if ty != D and fn == "exp":  # in f32 arithmetic (math_exp_f32.py)
        return define_exp_f32(module)
    if ty != D and fn == "tanh":  # in f32 arithmetic (math_tanh_f32.py)
        return define_tanh_f32(module)
    if ty != D and fn in F32_FORMS:  # straight-line f32 forms (math_f32.py)
        define_f32(module.function(name, ty, [(ty, "x0")], prefix="internal"), fn)
        return name
    if ty != D:
        inner = _define(module, fn, D)
        f = module.function(name, ty, [(ty, f"x{i}") for i in range(arity)], prefix="internal")
        wide = [f.cast("fpext", a, D) for a in f.args]
        f.ret(f.cast("fptrunc", f.call(D, inner, wide), ty))
        return name
    for dep in deps:
        _define(module, dep, D)
    f = module.function(name, D, [(D, f"x{i}") for i in range(arity)], prefix="internal")
    f.ret(builder(_Math(f), *f.args))
    return name
