"""Elemental rules for the transcendental functions of complex values (c64 and c128).

Where it sits: `arith.py`'s float-unary, power and binary rules hand an instruction whose operands
are complex to `COMPLEX_RULES[opcode](ctx, instr, operand values)`; the rules here build the result
from the kernel IR's float ops on the parts (`complex.re` / `complex.im` / `complex.create`,
`sqrt`, `log`, `log1p`, `exp`, `expm1`, `sin`, `cos`, `tan`, `sinh`, `cosh`, `atan2`, `powf`) and
the complex arithmetic ops (`complex.mul`, `complex.add`, `complex.div`).

The formulas are XLA's (`elemental_ir_emitter.cc`), made robust where numpy (the reference
interpreter, which follows C99 Annex G) is: |z| and log|z| never overflow for finite z, sqrt uses
the cancellation-free form sqrt((|x| + |z|) / 2) with |y| / (2 t) for the other part, exp scales
through exp(x/2)^2, tanh is Kahan's formula. The special values (signed zeros, infinite and NaN
parts) are numpy's wherever XLA and numpy agree; where they differ the result is numpy's.
    rsqrt(z) = 1 / sqrt(z)            (complex division: (0, 0) -> (inf, nan))
    log1p(z) = log(max) + log1p((min/max)^2) / 2 + i atan2(y, 1 + x), max/min of |1+x|, |y|,
               log(max) as log1p(x) or log1p(max - 1) where that is exact (XLA's form)
    tan(z) = -i tanh(iz)
    a^b = |a|^c e^(-d arg a) cis(c arg a + d log|a|), b = c + di, with XLA's cases for 0, 1 and inf
          (numpy multiplies out integer exponents instead: a part that is exactly 0 there is
          rounding noise here, e.g. (1e10 i)^3 has a real part of about 1e22 in c64, as in XLA)
    atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2)), all in complex arithmetic, as the evaluator.
"""

from __future__ import annotations

from typing import Callable

from hlo_codegen.elemental.emitter import FunctionContext
from hlo_codegen.kernel_ir.ir import Value
from hlo_codegen.kernel_ir.types import complex_element
from hlo_common.hlo.ir import HloInstruction

ComplexRule = Callable[[FunctionContext, HloInstruction, list[Value]], Value]
COMPLEX_RULES: dict[str, ComplexRule] = {}

# Above this magnitude sqrt and |z| scale their inputs by 1/4; below it by 2^60 / 2^120.
_HUGE = {"f32": 2.0 ** 125, "f64": 2.0 ** 1021}
_TINY = {"f32": (2.0 ** -100, 2.0 ** 60), "f64": (2.0 ** -1000, 2.0 ** 120)}
_TANH_LARGE = 22.0  # |x| beyond which tanh(x + iy) is copysign(1, x) to the last bit


class _Part:
    """Float arithmetic on one complex part type (f32 or f64) through the function's builder."""

    def __init__(self, ctx: FunctionContext, ctype: str):
        self.b = ctx.b
        self.ctype = ctype
        self.t = complex_element(ctype)

    def c(self, v: float) -> Value:
        return self.b.constant(float(v), self.t)

    # -- parts ---------------------------------------------------------------------------------------
    def re(self, z: Value) -> Value:
        return self.b.op("complex.re", [z], [self.t]).result

    def im(self, z: Value) -> Value:
        return self.b.op("complex.im", [z], [self.t]).result

    def make(self, re: Value, im: Value) -> Value:
        return self.b.op("complex.create", [re, im], [self.ctype]).result

    def parts(self, z: Value) -> tuple[Value, Value]:
        return self.re(z), self.im(z)

    def cop(self, name: str, *zs: Value) -> Value:
        """A complex arithmetic op (`add`, `mul`, `div`) on complex values."""
        return self.b.op(f"complex.{name}", list(zs), [self.ctype]).result

    # -- float ops -------------------------------------------------------------------------------------
    def add(self, a: Value, b: Value) -> Value:
        return self.b.binary("addf", a, b)

    def sub(self, a: Value, b: Value) -> Value:
        return self.b.binary("subf", a, b)

    def mul(self, a: Value, b: Value) -> Value:
        return self.b.binary("mulf", a, b)

    def div(self, a: Value, b: Value) -> Value:
        return self.b.binary("divf", a, b)

    def fn(self, name: str, *args: Value) -> Value:
        """A float math op: unary (`sqrt`, `exp`, ...) or binary (`atan2`, `powf`, `copysign`, ...)."""
        if len(args) == 1:
            return self.b.unary(name, args[0])
        return self.b.binary(name, args[0], args[1])

    def abs(self, a: Value) -> Value:
        return self.b.unary("absf", a)

    def neg(self, a: Value) -> Value:
        return self.b.unary("negf", a)

    def sel(self, cond: Value, a: Value, b: Value) -> Value:
        return self.b.select(cond, a, b)

    # -- predicates ------------------------------------------------------------------------------------
    def cmp(self, pred: str, a: Value, b: Value | float) -> Value:
        return self.b.cmpf(pred, a, b if isinstance(b, Value) else self.c(b))

    def is_inf(self, a: Value) -> Value:
        return self.cmp("oeq", self.abs(a), float("inf"))

    def not_finite(self, a: Value) -> Value:
        return self.cmp("uge", self.abs(a), float("inf"))  # inf or NaN

    def is_finite(self, a: Value) -> Value:
        return self.cmp("olt", self.abs(a), float("inf"))

    def both(self, p: Value, q: Value) -> Value:
        return self.b.binary("andi", p, q)

    def either(self, p: Value, q: Value) -> Value:
        return self.b.binary("ori", p, q)


def complex_rule(*opcodes: str) -> Callable[[ComplexRule], ComplexRule]:
    def register(fn: ComplexRule) -> ComplexRule:
        for op in opcodes:
            COMPLEX_RULES[op] = fn
        return fn
    return register


# -- shared pieces -------------------------------------------------------------------------------------
def _max_min(m: _Part, x: Value, y: Value) -> tuple[Value, Value]:
    """max(|x|, |y|) and min(|x|, |y|), NaN if either is NaN."""
    ax, ay = m.abs(x), m.abs(y)
    return m.fn("maximumf", ax, ay), m.fn("minimumf", ax, ay)


def _hypot(m: _Part, x: Value, y: Value) -> Value:
    """|x + iy| without overflow or underflow: inf if a part is infinite, else NaN if one is NaN."""
    big, small = _max_min(m, x, y)
    q = m.div(small, big)
    r = m.mul(big, m.fn("sqrt", m.add(m.c(1.0), m.mul(q, q))))
    r = m.sel(m.cmp("oeq", big, 0.0), m.c(0.0), r)
    return m.sel(m.either(m.is_inf(x), m.is_inf(y)), m.c(float("inf")), r)


def _log_hypot(m: _Part, x: Value, y: Value) -> Value:
    """log|x + iy| = log(max) + log1p((min/max)^2) / 2, so that it never overflows."""
    big, small = _max_min(m, x, y)
    q = m.div(small, big)
    r = m.add(m.fn("log", big), m.mul(m.c(0.5), m.fn("log1p", m.mul(q, q))))
    r = m.sel(m.cmp("oeq", big, 0.0), m.c(float("-inf")), r)
    return m.sel(m.either(m.is_inf(x), m.is_inf(y)), m.c(float("inf")), r)


def _sqrt_parts(m: _Part, x: Value, y: Value) -> tuple[Value, Value]:
    """sqrt(x + iy) (principal branch, C99's special values)."""
    big = _max_min(m, x, y)[0]
    tiny, up = _TINY[m.t]
    huge = m.cmp("ogt", big, _HUGE[m.t])
    small = m.cmp("olt", big, tiny)
    scale = m.sel(huge, m.c(0.25), m.sel(small, m.c(up), m.c(1.0)))
    unscale = m.sel(huge, m.c(2.0), m.sel(small, m.c(up ** -0.5), m.c(1.0)))
    xs, ys = m.mul(x, scale), m.mul(y, scale)
    t = m.fn("sqrt", m.mul(m.c(0.5), m.add(m.abs(xs), _hypot(m, xs, ys))))
    other = m.div(m.abs(ys), m.add(t, t))
    t, other = m.mul(t, unscale), m.mul(other, unscale)
    neg = m.cmp("olt", x, 0.0)
    re = m.sel(neg, other, t)
    im = m.fn("copysign", m.sel(neg, t, other), y)
    inf = m.c(float("inf"))
    zero_z = m.cmp("oeq", big, 0.0)
    re, im = m.sel(zero_z, m.c(0.0), re), m.sel(zero_z, y, im)
    pos_inf, neg_inf = m.cmp("oeq", x, float("inf")), m.cmp("oeq", x, float("-inf"))
    re, im = m.sel(pos_inf, inf, re), m.sel(pos_inf, m.mul(y, m.c(0.0)), im)
    re = m.sel(neg_inf, m.mul(m.abs(y), m.c(0.0)), re)
    im = m.sel(neg_inf, m.fn("copysign", inf, y), im)
    y_inf = m.is_inf(y)
    return m.sel(y_inf, inf, re), m.sel(y_inf, y, im)


def _log_parts(m: _Part, x: Value, y: Value) -> tuple[Value, Value]:
    return _log_hypot(m, x, y), m.fn("atan2", y, x)


def _tanh_parts(m: _Part, x: Value, y: Value) -> tuple[Value, Value]:
    """tanh(x + iy) by Kahan's formula; beyond |x| = 22, copysign(1, x) + 4i sin y cos y e^(-2|x|)."""
    t = m.fn("tan", y)
    beta = m.add(m.c(1.0), m.mul(t, t))
    s = m.fn("sinh", x)
    s2 = m.mul(s, s)
    rho = m.fn("sqrt", m.add(m.c(1.0), s2))
    den = m.add(m.c(1.0), m.mul(beta, s2))
    re = m.div(m.mul(m.mul(beta, rho), s), den)
    im = m.div(t, den)
    large = m.cmp("ogt", m.abs(x), _TANH_LARGE)
    decay = m.fn("exp", m.mul(m.c(-2.0), m.abs(x)))
    im_large = m.mul(m.mul(m.c(4.0), m.mul(m.fn("sin", y), m.fn("cos", y))), decay)
    re = m.sel(large, m.fn("copysign", m.c(1.0), x), re)
    im = m.sel(large, im_large, im)
    x_inf = m.is_inf(x)
    re = m.sel(m.both(m.not_finite(y), m.is_finite(x)), m.c(float("nan")), re)
    re = m.sel(m.cmp("oeq", x, 0.0), x, re)
    im = m.sel(x_inf, m.fn("copysign", m.c(0.0), y), im)
    return re, m.sel(m.cmp("oeq", y, 0.0), y, im)


# -- unary rules -------------------------------------------------------------------------------------
def _unary(body: Callable[[_Part, Value, Value], tuple[Value, Value]]) -> ComplexRule:
    def rule(ctx: FunctionContext, instr: HloInstruction, args: list[Value]) -> Value:
        m = _Part(ctx, args[0].type)
        re, im = body(m, *m.parts(args[0]))
        return m.make(re, im)
    return rule


COMPLEX_RULES["sqrt"] = _unary(_sqrt_parts)
COMPLEX_RULES["log"] = _unary(_log_parts)
COMPLEX_RULES["tanh"] = _unary(_tanh_parts)


@complex_rule("rsqrt")
def _rsqrt(ctx: FunctionContext, instr: HloInstruction, args: list[Value]) -> Value:
    m = _Part(ctx, args[0].type)
    root = m.make(*_sqrt_parts(m, *m.parts(args[0])))
    return m.cop("div", ctx.b.constant(complex(1.0, 0.0), m.ctype), root)


@complex_rule("tan")
def _tan(ctx: FunctionContext, instr: HloInstruction, args: list[Value]) -> Value:
    m = _Part(ctx, args[0].type)
    x, y = m.parts(args[0])
    u, v = _tanh_parts(m, m.neg(y), x)  # tan(z) = -i tanh(iz), iz = -y + ix
    return m.make(v, m.neg(u))


@complex_rule("log-plus-one")
def _log1p(ctx: FunctionContext, instr: HloInstruction, args: list[Value]) -> Value:
    m = _Part(ctx, args[0].type)
    x, y = m.parts(args[0])
    x1 = m.add(x, m.c(1.0))
    big, small = _max_min(m, x1, y)
    # log(big) through log1p where big - 1 is exact: big = 1 + x, or big in [1/2, 2] (Sterbenz)
    near_one = m.both(m.cmp("oge", big, 0.5), m.cmp("ole", big, 2.0))
    log_big = m.sel(near_one, m.fn("log1p", m.sub(big, m.c(1.0))), m.fn("log", big))
    log_big = m.sel(m.cmp("ogt", x1, m.abs(y)), m.fn("log1p", x), log_big)
    q = m.div(small, big)
    re = m.add(log_big, m.mul(m.c(0.5), m.fn("log1p", m.mul(q, q))))
    re = m.sel(m.cmp("oeq", big, 0.0), m.c(float("-inf")), re)
    re = m.sel(m.either(m.is_inf(x1), m.is_inf(y)), m.c(float("inf")), re)
    return m.make(re, m.fn("atan2", y, x1))


@complex_rule("exponential")
def _exp(ctx: FunctionContext, instr: HloInstruction, args: list[Value]) -> Value:
    m = _Part(ctx, args[0].type)
    x, y = m.parts(args[0])
    half = m.fn("exp", m.mul(m.c(0.5), x))  # e^x = half^2 stays finite while e^x cos y does
    re = m.mul(m.mul(half, m.fn("cos", y)), half)
    im = m.mul(m.mul(half, m.fn("sin", y)), half)
    minus_inf = m.cmp("oeq", x, float("-inf"))
    re = m.sel(m.both(m.cmp("oeq", x, float("inf")), m.not_finite(y)), m.c(float("inf")), re)
    re, im = m.sel(minus_inf, m.c(0.0), re), m.sel(minus_inf, m.fn("copysign", m.c(0.0), y), im)
    y_zero = m.cmp("oeq", y, 0.0)
    return m.make(m.sel(y_zero, m.fn("exp", x), re), m.sel(y_zero, y, im))


@complex_rule("exponential-minus-one")
def _expm1(ctx: FunctionContext, instr: HloInstruction, args: list[Value]) -> Value:
    """(expm1(x) cos y + cosm1(y)) + i e^x sin y with cosm1(y) = -2 sin^2(y/2), as numpy and XLA."""
    m = _Part(ctx, args[0].type)
    x, y = m.parts(args[0])
    em1 = m.fn("expm1", x)
    sh = m.fn("sin", m.mul(m.c(0.5), y))
    cosm1 = m.mul(m.c(-2.0), m.mul(sh, sh))
    re = m.add(m.mul(em1, m.fn("cos", y)), cosm1)
    im = m.mul(m.add(em1, m.c(1.0)), m.fn("sin", y))
    return m.make(re, im)


@complex_rule("sine", "cosine")
def _sin_cos(ctx: FunctionContext, instr: HloInstruction, args: list[Value]) -> Value:
    """sin z = sin x cosh y + i cos x sinh y; cos z = cos x cosh y - i sin x sinh y."""
    m = _Part(ctx, args[0].type)
    x, y = m.parts(args[0])
    sx, cx, chy, shy = m.fn("sin", x), m.fn("cos", x), m.fn("cosh", y), m.fn("sinh", y)
    x_bad, y_inf = m.not_finite(x), m.is_inf(y)
    x_zero, y_zero = m.cmp("oeq", x, 0.0), m.cmp("oeq", y, 0.0)
    if instr.opcode == "sine":
        re = m.sel(x_zero, x, m.mul(sx, chy))
        im = m.sel(m.both(y_inf, x_bad), m.abs(y), m.mul(cx, shy))
        return m.make(re, m.sel(m.both(y_zero, x_bad), y, im))
    re = m.sel(m.both(y_inf, x_bad), m.c(float("inf")), m.mul(cx, chy))
    im = m.neg(m.mul(sx, shy))
    im = m.sel(m.either(x_zero, m.both(y_zero, x_bad)), m.c(0.0), im)
    return m.make(re, im)


# -- binary rules ------------------------------------------------------------------------------------
@complex_rule("power")
def _power(ctx: FunctionContext, instr: HloInstruction, args: list[Value]) -> Value:
    """a^b = |a|^c e^(-d arg a) cis(c arg a + d log|a|) for a = x + iy, b = c + di (XLA's
    EmitComplexPower, with its cases 0^c, x^0, 1^b, inf^c)."""
    m = _Part(ctx, args[0].type)
    x, y, c, d = *m.parts(args[0]), *m.parts(args[1])
    mag, arg = _hypot(m, x, y), m.fn("atan2", y, x)
    coeff = m.mul(m.fn("powf", mag, c), m.fn("exp", m.neg(m.mul(d, arg))))
    q = m.add(m.mul(c, arg), m.mul(d, _log_hypot(m, x, y)))
    re, im = m.mul(coeff, m.fn("cos", q)), m.mul(coeff, m.fn("sin", q))
    zero, one, inf = m.c(0.0), m.c(1.0), m.c(float("inf"))
    real_b = m.cmp("oeq", d, 0.0)
    c_zero = m.cmp("oeq", c, 0.0)
    zero_base = m.both(m.both(m.cmp("oeq", mag, 0.0), real_b), m.cmp("oge", c, 0.0))
    re, im = m.sel(zero_base, m.sel(c_zero, one, zero), re), m.sel(zero_base, zero, im)
    unit = m.either(m.both(c_zero, real_b), m.both(m.cmp("oeq", x, 1.0), m.cmp("oeq", y, 0.0)))
    re, im = m.sel(unit, one, re), m.sel(unit, zero, im)
    inf_base = m.both(m.both(m.cmp("oeq", x, float("inf")), m.cmp("oeq", y, 0.0)), real_b)
    re = m.sel(m.both(inf_base, m.cmp("ogt", c, 0.0)), inf, re)
    re = m.sel(m.both(inf_base, m.cmp("olt", c, 0.0)), zero, re)
    return m.make(re, m.sel(m.both(inf_base, m.cmp("one", c, 0.0)), zero, im))


@complex_rule("atan2")
def _atan2(ctx: FunctionContext, instr: HloInstruction, args: list[Value]) -> Value:
    """atan2(y, x) = -i log((x + i y) / sqrt(x^2 + y^2)) in complex arithmetic (XLA and the evaluator)."""
    m = _Part(ctx, args[0].type)
    y, x = args
    i = ctx.b.constant(complex(0.0, 1.0), m.ctype)
    num = m.cop("add", x, m.cop("mul", i, y))
    root = m.make(*_sqrt_parts(m, *m.parts(m.cop("add", m.cop("mul", x, x), m.cop("mul", y, y)))))
    log = m.make(*_log_parts(m, *m.parts(m.cop("div", num, root))))
    return m.cop("mul", ctx.b.constant(complex(-0.0, -1.0), m.ctype), log)
