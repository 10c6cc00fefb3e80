"""What XLA's client-library math custom calls mean: `xla_builder.math.*` as HLO computations.

XLA's builder library (`xla/hlo/builder/lib/math.cc`) can emit a math function as a custom call
`custom_call_target="xla_builder.math.Acos"` that carries no computation; XLA's
`test-only-xla-builder` pass (`XlaBuilderTestPass`) attaches the function's decomposition, built
by the same library, as the call's called computation. This module is that library for the
targets below, so the decomposition - the one meaning of each target - is built in one place
and used by:

- hlo-opt's `test-only-xla-builder` pass (`hlo_opt/passes/xla_builder_expander.py`), which
  attaches it as XLA does;
- the reference interpreter (`interpreter/custom_call.py`), which evaluates it when a call has
  no computation of its own;
- hlo-codegen's prepare stage (`hlo_common.passes.decomposition_calls`), which turns the call
  into a `call` of it, so its instructions get kernels.

    Acos(x)      real: select(x != -1, 2 atan2(sqrt(1 - x^2), 1 + x), pi)
                 complex: -i log(x + i sqrt((1 + x)(1 - x)))
    Acosh(x)     real: x < -1: nan; x >= sqrt(max): log(x) + log(2); else log(x + sqrt((x+1)(x-1)))
                 complex: log(x + sqrt((x + 1)(x - 1)))
    Asin(x)      real: 2 atan2(x, 1 + sqrt((1 - x)(1 + x)));  complex: Hull et al.'s algorithm
                 (`_asin_complex`, overflow- and cancellation-safe, as StableHLO / XLA)
    Asinh(x)     real: sign(x) * (|x| >= sqrt(max): log|x| + log 2;  |x| <= 1: log1p(|x| + x^2 /
                 (1 + sqrt(x^2 + 1)));  else log(|x| + sqrt(x^2 + 1)));  complex: i asin(-i x), with
                 the branch cut of the imaginary axis (|Im x| > 1, Re x == 0) taken as XLA does
    Atan(x)      atan2(x, 1)
    Cosh(x)      exp(x + log 0.5) + exp(-x + log 0.5), at least 1 for real x
    NextAfter(x, y)  the next representable value after x towards y, on the bit patterns

Element types: any float or complex type (computed in that type, as XLA's builder does).
Unknown targets (`xla_builder.math.Polygamma`, ...) are not here: `decomposition` returns None.
"""

from __future__ import annotations

from typing import Callable

import ml_dtypes
import numpy as np

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.shape import Shape

PREFIX = "xla_builder.math."
_COMPONENT = {"c64": "f32", "c128": "f64"}


class MathBuilder:
    """Elementwise HLO on values of one shape (the operands'), in one computation."""

    def __init__(self, comp: HloComputation, shape: Shape):
        self.comp, self.shape = comp, shape

    def op(self, opcode: str, *operands: HloInstruction, etype: str | None = None, **attrs) -> HloInstruction:
        """An instruction of the builder's dims; its element type is `etype` or its data operand's."""
        data = operands[1] if opcode == "select" else operands[0]
        shape = self.shape.with_element_type(etype or data.shape.element_type.name)
        instr = HloInstruction.create(opcode, list(operands), shape, attrs, self.comp.unique_name(opcode))
        return self.comp.add_instruction(instr)

    def full(self, value, etype: PrimitiveType | str) -> HloInstruction:
        """`value` broadcast to the builder's shape, in `etype`."""
        t = PRIMITIVE_TYPES[etype] if isinstance(etype, str) else etype
        literal = np.asarray(value).astype(t.np_dtype)
        c = self.comp.add_instruction(HloInstruction.create(
            "constant", [], Shape.array(t, ()), None, self.comp.unique_name("constant"), literal=literal))
        return self.op("broadcast", c, etype=t.name, dimensions=()) if self.shape.rank else c

    def like(self, value, x: HloInstruction) -> HloInstruction:
        return self.full(value, x.shape.element_type)

    # shorthands
    def add(self, a, b): return self.op("add", a, b)  # noqa: E704
    def sub(self, a, b): return self.op("subtract", a, b)  # noqa: E704
    def mul(self, a, b): return self.op("multiply", a, b)  # noqa: E704
    def div(self, a, b): return self.op("divide", a, b)  # noqa: E704
    def max(self, a, b): return self.op("maximum", a, b)  # noqa: E704
    def min(self, a, b): return self.op("minimum", a, b)  # noqa: E704

    def cmp(self, a, b, direction: str) -> HloInstruction:
        return self.op("compare", a, b, etype="pred", direction=direction)

    def select(self, p, a, b) -> HloInstruction:
        return self.op("select", p, a, b)

    def land(self, a, b) -> HloInstruction:
        return self.op("and", a, b)


def _finfo(t: PrimitiveType):
    return ml_dtypes.finfo(t.np_dtype)


# -- the functions ------------------------------------------------------------------------------------
def _acos(b: MathBuilder, x: HloInstruction) -> HloInstruction:
    t = x.shape.element_type
    if t.is_complex:
        one = b.like(1, x)
        i = b.op("complex", b.full(0, _COMPONENT[t.name]), b.full(1, _COMPONENT[t.name]), etype=t.name)
        root = b.mul(i, b.op("sqrt", b.mul(b.add(one, x), b.sub(one, x))))
        return b.op("negate", b.mul(i, b.op("log", b.add(x, root))))
    not_minus_one = b.cmp(x, b.like(-1, x), "NE")
    angle = b.op("atan2", b.op("sqrt", b.sub(b.like(1, x), b.mul(x, x))), b.add(b.like(1, x), x))
    return b.select(not_minus_one, b.mul(b.like(2, x), angle), b.like(np.pi, x))


def _acosh(b: MathBuilder, x: HloInstruction) -> HloInstruction:
    t = x.shape.element_type
    one = b.like(1, x)
    naive = b.op("log", b.add(x, b.op("sqrt", b.mul(b.add(x, one), b.sub(x, one)))))
    if t.is_complex:
        return naive
    big = b.cmp(x, b.op("sqrt", b.like(float(_finfo(t).max), x)), "GE")
    large = b.add(b.op("log", x), b.op("log", b.like(2, x)))
    return b.select(b.cmp(x, b.like(-1, x), "LT"), b.like(np.nan, x), b.select(big, large, naive))


def _asin(b: MathBuilder, x: HloInstruction) -> HloInstruction:
    if x.shape.element_type.is_complex:
        return _asin_complex(b, x)
    one = b.like(1, x)
    root = b.op("sqrt", b.mul(b.sub(one, x), b.add(one, x)))
    return b.mul(b.like(2, x), b.op("atan2", x, b.add(one, root)))


def _asinh(b: MathBuilder, x: HloInstruction) -> HloInstruction:
    t = x.shape.element_type
    if t.is_complex:
        return _asinh_complex(b, x)
    a = b.op("abs", x)
    one = b.like(1, x)
    big = b.cmp(a, b.op("sqrt", b.like(float(_finfo(t).max), x)), "GE")
    large = b.add(b.op("log", b.op("abs", a)), b.op("log", b.like(2, x)))
    a2 = b.mul(a, a)
    small = b.op("log-plus-one", b.add(a, b.div(a2, b.add(one, b.op("sqrt", b.add(b.mul(a, a), one))))))
    middle = b.op("log", b.add(a, b.op("sqrt", b.add(b.mul(a, a), one))))
    magnitude = b.select(big, large, b.select(b.cmp(a, one, "LE"), small, middle))
    return b.mul(b.op("sign", x), magnitude)


def _atan(b: MathBuilder, x: HloInstruction) -> HloInstruction:
    return b.op("atan2", x, b.like(1, x))


def _cosh(b: MathBuilder, x: HloInstruction) -> HloInstruction:
    log_half = b.op("log", b.like(0.5, x))
    up = b.op("exponential", b.add(x, log_half))
    total = b.add(up, b.op("exponential", b.add(b.op("negate", x), log_half)))
    return total if x.shape.element_type.is_complex else b.max(total, b.like(1, x))


def _next_after(b: MathBuilder, x: HloInstruction, y: HloInstruction) -> HloInstruction:
    """On the bit patterns: equal -> y; x == ±0 -> the smallest denormal signed like y (or y when
    y is zero); otherwise one step away from zero when x is larger than y in magnitude or the
    signs differ, else one step towards it. NaN in, NaN out."""
    t = x.shape.element_type
    u = f"u{t.bits}"
    sign_bit, ones = 1 << (t.bits - 1), (1 << t.bits) - 1
    nan = b.op("or", b.cmp(x, x, "NE"), b.cmp(y, y, "NE"))
    nan_bits = b.op("bitcast-convert", b.like(np.nan, x), etype=u)
    xb, yb = b.op("bitcast-convert", x, etype=u), b.op("bitcast-convert", y, etype=u)
    x_abs, y_abs = b.op("and", xb, b.full(sign_bit - 1, u)), b.op("and", yb, b.full(sign_bit - 1, u))
    y_sign = b.op("and", yb, b.full(sign_bit, u))
    from_zero = b.select(b.cmp(y_abs, b.full(0, u), "EQ"), yb, b.op("or", y_sign, b.full(1, u)))
    away = b.op("or", b.cmp(x_abs, y_abs, "GT"), b.cmp(b.op("and", xb, b.full(sign_bit, u)), y_sign, "NE"))
    step = b.add(xb, b.select(away, b.full(ones, u), b.full(1, u)))
    if "fnuz" in t.name:  # no negative zero: from -denorm_min towards +, the next value is +0
        y_positive = b.op("not", b.op("convert", y_sign, etype="pred"))
        to_zero = b.land(b.cmp(xb, b.full(sign_bit | 1, u), "EQ"), y_positive)
        step = b.select(to_zero, b.full(0, u), step)
    result = b.select(b.cmp(x_abs, b.full(0, u), "EQ"), from_zero, step)
    result = b.select(b.cmp(xb, yb, "EQ"), yb, result)
    return b.op("bitcast-convert", b.select(nan, nan_bits, result), etype=t.name)


# -- complex asin / asinh (Hull, Fairgrieve, Tang; the form StableHLO and XLA use) -------------------
def _hypot(b: MathBuilder, x, y):
    """sqrt(x^2 + y^2) without overflow: max * sqrt(1 + (min/max)^2), with its exact edge cases."""
    one, mx, mn = b.like(1, x), b.max(b.op("abs", x), b.op("abs", y)), b.min(b.op("abs", x), b.op("abs", y))
    r = b.div(mn, mx)
    sq = b.mul(r, r)
    sqa = b.op("sqrt", b.add(one, sq))
    tiny = b.land(b.cmp(sqa, one, "EQ"), b.cmp(sq, b.like(0, x), "GT"))
    general = b.select(tiny, b.add(mx, b.div(b.mul(mx, sq), b.like(2, x))), b.mul(mx, sqa))
    return b.select(b.cmp(mx, mn, "EQ"), b.mul(b.like(np.sqrt(2), x), mx), general)


def _asin_parts(b: MathBuilder, x, y):
    """(real, imag) of asin(x + iy) on the component type."""
    t = x.shape.element_type
    fi = _finfo(t)
    one, half, zero = b.like(1, x), b.like(0.5, x), b.like(0, x)
    ax, ay = b.op("abs", x), b.op("abs", y)
    safe_max = float(np.sqrt(float(fi.max)) / 8)
    safe_min = float(np.sqrt(float(fi.smallest_normal)) * 4)
    xp1, xm1 = b.add(ax, one), b.sub(ax, one)
    r, s = _hypot(b, xp1, ay), _hypot(b, xm1, ay)
    a = b.mul(half, b.add(r, s))
    half_apx = b.mul(half, b.add(a, ax))
    yy = b.mul(ay, ay)
    rpxp1, smxm1, spxm1 = b.add(r, xp1), b.sub(s, xm1), b.add(s, xm1)
    inner = b.select(b.cmp(ax, one, "LE"), b.op("sqrt", b.mul(half_apx, b.add(b.div(yy, rpxp1), smxm1))),
                     b.mul(ay, b.op("sqrt", b.add(b.div(half_apx, rpxp1), b.div(half_apx, spxm1)))))
    big = b.cmp(b.max(ax, ay), b.like(safe_max, x), "GE")
    real = b.op("atan2", x, b.select(big, ay, inner))
    safe_max_opt = b.select(b.cmp(ax, b.like(safe_max * 1e12, x), "LT"), b.like(safe_max * 1e-6, x),
                            b.like(safe_max * 1e2, x))
    y_large = b.cmp(ay, safe_max_opt, "GE")
    mx = b.select(y_large, ay, ax)
    xoy = b.select(b.land(y_large, b.op("not", b.cmp(ay, b.like(np.inf, x), "EQ"))), b.div(ax, ay), zero)
    tiny_y = b.land(b.cmp(ay, b.like(safe_min, x), "LT"), b.cmp(ax, one, "LT"))
    ap1 = b.add(a, one)
    half_yy = b.mul(half, yy)
    d1 = b.div(half_yy, rpxp1)
    near = b.select(b.cmp(a, b.like(1.5, x), "LE"), b.add(d1, b.div(half_yy, smxm1)), b.sub(a, one))
    am1_general = b.select(b.cmp(ax, one, "GE"), b.add(d1, b.mul(half, spxm1)), near)
    am1 = b.select(tiny_y, b.op("negate", b.div(b.mul(xp1, xm1), ap1)), am1_general)
    sq = b.op("sqrt", b.mul(am1, ap1))
    huge = b.cmp(mx, b.select(y_large, safe_max_opt, b.like(safe_max, x)), "GE")
    log_large = b.add(b.add(b.like(np.log(2), x), b.op("log", mx)),
                      b.mul(half, b.op("log-plus-one", b.mul(xoy, xoy))))
    imag = b.select(huge, log_large, b.select(tiny_y, b.div(ay, sq), b.op("log-plus-one", b.add(am1, sq))))
    return real, b.select(b.cmp(y, zero, "LT"), b.op("negate", imag), imag)


def _asin_complex(b: MathBuilder, z: HloInstruction) -> HloInstruction:
    comp = _COMPONENT[z.shape.element_type.name]
    real, imag = _asin_parts(b, b.op("real", z, etype=comp), b.op("imag", z, etype=comp))
    return b.op("complex", real, imag, etype=z.shape.element_type.name)


def _asinh_complex(b: MathBuilder, z: HloInstruction) -> HloInstruction:
    """asinh(z) = i asin(-i z); on the imaginary axis beyond ±i the sign follows XLA's choice."""
    t, comp = z.shape.element_type.name, _COMPONENT[z.shape.element_type.name]
    x, y = b.op("real", z, etype=comp), b.op("imag", z, etype=comp)
    on_cut = b.land(b.cmp(x, b.full(0, comp), "EQ"), b.cmp(b.op("abs", y), b.full(1, comp), "GT"))
    w = _asin_complex(b, b.op("complex", y, b.op("negate", x), etype=t))
    w_imag = b.op("imag", w, etype=comp)
    real = b.select(on_cut, w_imag, b.op("negate", w_imag))
    return b.op("complex", real, b.op("real", w, etype=comp), etype=t)


FUNCTIONS: dict[str, tuple[int, Callable]] = {
    "Acos": (1, _acos), "Acosh": (1, _acosh), "Asin": (1, _asin), "Asinh": (1, _asinh), "Atan": (1, _atan),
    "Cosh": (1, _cosh), "NextAfter": (2, _next_after),
}
TARGETS = frozenset(PREFIX + name for name in FUNCTIONS)


def build_decomposition(target: str, operand_shapes: tuple[Shape, ...], name: str | None = None
                        ) -> HloComputation | None:
    """A new (detached) computation computing `target` on parameters of these shapes, or None when
    the target is not one of TARGETS or the operands do not fit it (count, element types)."""
    if not target.startswith(PREFIX) or target[len(PREFIX):] not in FUNCTIONS:
        return None
    arity, fn = FUNCTIONS[target[len(PREFIX):]]
    if len(operand_shapes) != arity or not all(s.is_array for s in operand_shapes):
        return None
    first = operand_shapes[0]
    if not (first.element_type.is_float or first.element_type.is_complex) or any(
            s.dims != first.dims or s.element_type is not first.element_type for s in operand_shapes):
        return None
    comp = HloComputation(name or target)
    params = []
    for i, shape in enumerate(operand_shapes):
        p = HloInstruction.create("parameter", [], shape, None, f"arg{i}", parameter_number=i)
        params.append(comp.add_instruction(p))
    comp.root = fn(MathBuilder(comp, first), *params)
    return comp


_CACHE: dict[tuple, HloComputation | None] = {}


def decomposition_for(instr: HloInstruction) -> HloComputation | None:
    """The decomposition of custom call `instr` (shared per target and operand shapes; not part of
    any module: the interpreter evaluates it as a called computation), or None when there is none
    or its result would not be the call's shape."""
    target = str(instr.attrs.get("custom_call_target", ""))
    key = (target, instr.shape.to_string(), tuple(op.shape.to_string() for op in instr.operands))
    if key not in _CACHE:
        if len(_CACHE) > 256:
            _CACHE.clear()
        comp = build_decomposition(target, tuple(op.shape for op in instr.operands))
        fits = comp is not None and comp.root.shape.to_string(False) == instr.shape.to_string(False)
        _CACHE[key] = comp if fits else None
    return _CACHE[key]
