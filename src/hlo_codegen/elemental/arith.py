"""Elemental rules for the elementwise arithmetic, bitwise and comparison opcodes.

Semantics are the interpreter's (hlo_common.interpreter.elementwise / bitwise): narrow floats
computed in f32 and rounded per op; integers wrap; x / 0 is -1 (signed) or all ones (unsigned),
x % 0 is x, INT_MIN / -1 is INT_MIN and INT_MIN % -1 is 0; shifts by at least the bit width give
0 (or the sign fill); maximum/minimum/clamp propagate NaN with -0 < +0; integer power is exact
modulo 2^bits (negative exponents: 1, +-1 for -1, else 0); TOTALORDER compares floats by their
sign-magnitude keys; popcnt of a sub-byte value counts its sign-extended byte.
"""

from __future__ import annotations

from hlo_codegen.elemental.complex_math import COMPLEX_RULES
from hlo_codegen.elemental.convert import down, float_constant, int_constant, up
from hlo_codegen.elemental.emitter import ElementalError, FunctionContext, elemental
from hlo_codegen.indexing import IndexingMap, Variable
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.kernel_ir.ir import Value
from hlo_codegen.kernel_ir.types import complex_element, ir_type
from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.hlo.ir import HloInstruction

FLOAT_UNARY = {
    "exponential": "exp", "exponential-minus-one": "expm1", "log": "log", "log-plus-one": "log1p",
    "sine": "sin", "cosine": "cos", "tan": "tan", "tanh": "tanh", "sinh": "sinh", "cosh": "cosh",
    "asin": "asin", "acos": "acos", "atanh": "atanh", "asinh": "asinh", "acosh": "acosh", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "cbrt": "cbrt", "ceil": "ceil", "floor": "floor", "round-nearest-even": "roundeven",
    "round-nearest-afz": "round", "erf": "erf",
}


def operands(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> list[Value]:
    """Every operand at the element's index (rank-0 operands of a non-scalar op at [])."""
    out = []
    for op in instr.operands:
        out.append(ctx.value(op, [] if op.shape.rank == 0 and instr.shape.rank > 0 else idx))
    return out


def _in_type(instr: HloInstruction, i: int = 0) -> PrimitiveType:
    return instr.operands[i].shape.element_type


def _no_complex(instr: HloInstruction, pt: PrimitiveType) -> None:
    if pt.is_complex:
        raise ElementalError(f"%{instr.name}: {instr.opcode} of complex values is not supported")


@elemental(*FLOAT_UNARY)
def _float_unary(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    pt = instr.shape.element_type
    if pt.is_complex and instr.opcode in COMPLEX_RULES:
        return COMPLEX_RULES[instr.opcode](ctx, instr, operands(ctx, instr, idx))
    _no_complex(instr, pt)
    if not pt.is_float:
        raise ElementalError(f"%{instr.name}: {instr.opcode} needs a float operand")
    x = up(ctx, operands(ctx, instr, idx)[0], pt)
    return down(ctx, ctx.b.unary(FLOAT_UNARY[instr.opcode], x), pt)


@elemental("abs")
def _abs(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    (x,) = operands(ctx, instr, idx)
    src = _in_type(instr)
    if src.is_complex:
        mag = ctx.b.op("complex.abs", [x], [complex_element(x.type)]).result
        return down(ctx, mag, instr.shape.element_type)
    if src.kind == "unsigned" or src.is_pred:
        return x
    if src.is_integer:
        return ctx.b.unary("absi", x)
    return down(ctx, ctx.b.unary("absf", up(ctx, x, src)), src)


@elemental("negate")
def _negate(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    (x,) = operands(ctx, instr, idx)
    pt = instr.shape.element_type
    b = ctx.b
    if pt.is_complex:
        return b.op("complex.neg", [x], [x.type]).result
    if pt.is_float:
        return down(ctx, b.unary("negf", up(ctx, x, pt)), pt)
    return b.binary("subi", int_constant(ctx, 0, x.type), x)


@elemental("sign")
def _sign(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    (x,) = operands(ctx, instr, idx)
    pt = instr.shape.element_type
    b = ctx.b
    if pt.is_complex:
        part = complex_element(x.type)
        mag = b.op("complex.abs", [x], [part]).result
        zero = float_constant(ctx, 0.0, part)
        is_zero = b.cmpf("oeq", mag, zero)
        safe = b.select(is_zero, float_constant(ctx, 1.0, part), mag)
        re = b.binary("divf", b.op("complex.re", [x], [part]).result, safe)
        im = b.binary("divf", b.op("complex.im", [x], [part]).result, safe)
        unit = b.op("complex.create", [re, im], [x.type]).result
        return b.select(is_zero, b.constant(complex(0, 0), x.type), unit)
    if pt.is_float:
        v = up(ctx, x, pt)
        mag = b.select(b.cmpf("une", v, float_constant(ctx, 0.0, v.type)), float_constant(ctx, 1.0, v.type),
                       float_constant(ctx, 0.0, v.type))
        r = b.select(b.cmpf("uno", v, v), v, b.binary("copysign", mag, v))
        return down(ctx, r, pt)
    if pt.kind == "signed":
        one, minus = int_constant(ctx, 1, x.type), int_constant(ctx, -1, x.type)
        return b.binary("maxsi", b.binary("minsi", x, one), minus)
    return b.cast("extui", b.cmpi("ne", x, int_constant(ctx, 0, x.type)), x.type)


@elemental("is-finite")
def _is_finite(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    x = up(ctx, operands(ctx, instr, idx)[0], _in_type(instr))
    return ctx.b.cmpf("olt", ctx.b.unary("absf", x), float_constant(ctx, float("inf"), x.type))


@elemental("not")
def _not(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    (x,) = operands(ctx, instr, idx)
    pt = instr.shape.element_type
    if pt.is_float:
        raise ElementalError(f"%{instr.name}: not of a float")
    return ctx.b.binary("xori", x, int_constant(ctx, 1 if pt.is_pred else -1, x.type))


@elemental("logistic")
def _logistic(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    pt = instr.shape.element_type
    _no_complex(instr, pt)
    b = ctx.b
    x = up(ctx, operands(ctx, instr, idx)[0], pt)
    one = float_constant(ctx, 1.0, x.type)
    e = b.unary("exp", b.unary("negf", x))
    return down(ctx, b.binary("divf", one, b.binary("addf", one, e)), pt)


@elemental("real", "imag")
def _real_imag(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    (x,) = operands(ctx, instr, idx)
    if not _in_type(instr).is_complex:
        return x if instr.opcode == "real" else float_constant(ctx, 0.0, x.type)
    part = complex_element(x.type)
    return ctx.b.op(f"complex.{'re' if instr.opcode == 'real' else 'im'}", [x], [part]).result


@elemental("popcnt")
def _popcnt(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    (x,) = operands(ctx, instr, idx)
    pt = instr.shape.element_type
    b = ctx.b
    if pt.bits >= 8:
        return b.unary("ctpop", x)
    wide = b.cast("extsi" if pt.kind == "signed" else "extui", x, "i8")
    return b.cast("trunci", b.unary("ctpop", wide), x.type)


@elemental("count-leading-zeros")
def _clz(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    return ctx.b.unary("ctlz", operands(ctx, instr, idx)[0])


@elemental("copy")
def _copy(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    return ctx.operand(instr, 0, idx)


# -- binary ------------------------------------------------------------------------------------------
_BINARY_OPS = {  # opcode: (pred op, signed op, unsigned op, float op, complex op)
    "add": ("ori", "addi", "addi", "addf", "complex.add"),
    "subtract": ("xori", "subi", "subi", "subf", "complex.sub"),
    "multiply": ("andi", "muli", "muli", "mulf", "complex.mul"),
    "maximum": ("ori", "maxsi", "maxui", "maximumf", None),
    "minimum": ("andi", "minsi", "minui", "minimumf", None),
    "and": ("andi", "andi", "andi", None, None),
    "or": ("ori", "ori", "ori", None, None),
    "xor": ("xori", "xori", "xori", None, None),
    "atan2": (None, None, None, "atan2", None),
}
_KIND_COLUMN = {"pred": 0, "signed": 1, "unsigned": 2, "float": 3, "complex": 4}


@elemental(*_BINARY_OPS)
def _binary(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    a, b = operands(ctx, instr, idx)
    pt = _in_type(instr)
    name = _BINARY_OPS[instr.opcode][_KIND_COLUMN[pt.kind]]
    if name is None and pt.is_complex and instr.opcode in COMPLEX_RULES:
        return COMPLEX_RULES[instr.opcode](ctx, instr, [a, b])
    if name is None:
        raise ElementalError(f"%{instr.name}: {instr.opcode} of {pt.name} is not supported")
    if pt.is_float:
        return down(ctx, ctx.b.binary(name, up(ctx, a, pt), up(ctx, b, pt)), pt)
    return ctx.b.binary(name, a, b)


@elemental("complex")
def _complex(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    re, im = operands(ctx, instr, idx)
    return ctx.b.op("complex.create", [re, im], [ir_type(instr.shape.element_type.name)]).result


@elemental("divide", "remainder")
def _divide(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    a, d = operands(ctx, instr, idx)
    pt = _in_type(instr)
    b = ctx.b
    div = instr.opcode == "divide"
    if pt.is_complex:
        if not div:
            raise ElementalError(f"%{instr.name}: remainder of complex values")
        return b.op("complex.div", [a, d], [a.type]).result
    if pt.is_float:
        return down(ctx, b.binary("divf" if div else "remf", up(ctx, a, pt), up(ctx, d, pt)), pt)
    zero, one = int_constant(ctx, 0, a.type), int_constant(ctx, 1, a.type)
    is_zero = b.cmpi("eq", d, zero)
    if pt.kind == "signed":
        is_m1 = b.cmpi("eq", d, int_constant(ctx, -1, a.type))
        safe = b.select(b.binary("ori", is_zero, is_m1), one, d)
        if div:
            q = b.select(is_m1, b.binary("subi", zero, a), b.binary("divsi", a, safe))
            return b.select(is_zero, int_constant(ctx, -1, a.type), q)
        r = b.select(is_m1, zero, b.binary("remsi", a, safe))
        return b.select(is_zero, a, r)
    safe = b.select(is_zero, one, d)
    if div:
        return b.select(is_zero, int_constant(ctx, -1, a.type), b.binary("divui", a, safe))
    return b.select(is_zero, a, b.binary("remui", a, safe))


@elemental("shift-left", "shift-right-logical", "shift-right-arithmetic")
def _shift(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    a, s = operands(ctx, instr, idx)
    pt = instr.shape.element_type
    b = ctx.b
    # Amounts are clamped before use: NVPTX turns "amount < width ? shl : 0" into a clamping PTX
    # shift but feeds it only the amount's low 32 bits.
    if instr.opcode == "shift-right-arithmetic":
        return b.binary("shrsi", a, b.binary("minui", s, int_constant(ctx, pt.bits - 1, a.type)))
    width = int_constant(ctx, pt.bits, a.type)
    amount = b.binary("minui", s, width)
    in_bounds = b.cmpi("ult", amount, width)
    name = "shli" if instr.opcode == "shift-left" else "shrui"
    shifted = b.binary(name, a, b.select(in_bounds, amount, int_constant(ctx, 0, a.type)))
    return b.select(in_bounds, shifted, int_constant(ctx, 0, a.type))


@elemental("mulhi")
def _mulhi(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    a, c = operands(ctx, instr, idx)
    pt = instr.shape.element_type
    b = ctx.b
    wide = f"i{2 * max(pt.bits, 8)}"
    ext = "extsi" if pt.kind == "signed" else "extui"
    prod = b.binary("muli", b.cast(ext, a, wide), b.cast(ext, c, wide))
    hi = b.binary("shrsi" if pt.kind == "signed" else "shrui", prod, int_constant(ctx, pt.bits, wide))
    return b.cast("trunci", hi, a.type)


@elemental("power")
def _power(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    a, e = operands(ctx, instr, idx)
    pt = _in_type(instr)
    b = ctx.b
    if pt.is_complex:
        return COMPLEX_RULES["power"](ctx, instr, [a, e])
    _no_complex(instr, pt)
    if pt.is_pred:
        return b.binary("ori", a, b.binary("xori", e, int_constant(ctx, 1, "i1")))
    if pt.is_float:
        return down(ctx, b.binary("powf", up(ctx, a, pt), up(ctx, e, pt)), pt)
    zero, one = int_constant(ctx, 0, a.type), int_constant(ctx, 1, a.type)
    neg = b.cmpi("slt", e, zero) if pt.kind == "signed" else None
    exp = b.select(neg, zero, e) if neg is not None else e
    bits = IndexingMap((), (), (Variable(Interval(0, pt.bits - 1), "bit"),))

    def step(syms, _idx, iters):
        acc, base, rest = iters
        take = b.cmpi("ne", b.binary("andi", rest, one), zero)
        acc = b.select(take, b.binary("muli", acc, base), acc)
        return [acc, b.binary("muli", base, base), b.binary("shrui", rest, one)]

    acc = ctx.loop(bits, [], [one, a, exp], step)[0]
    if neg is None:
        return acc
    minus = int_constant(ctx, -1, a.type)
    odd = b.cmpi("ne", b.binary("andi", e, one), zero)
    special = b.select(b.cmpi("eq", a, one), one,
                       b.select(b.cmpi("eq", a, minus), b.select(odd, minus, one), zero))
    return b.select(neg, special, acc)


# -- compare, select, clamp, map ----------------------------------------------------------------------
_FLOAT_PRED = {"EQ": "oeq", "NE": "une", "LT": "olt", "LE": "ole", "GT": "ogt", "GE": "oge"}
_SIGNED_PRED = {"EQ": "eq", "NE": "ne", "LT": "slt", "LE": "sle", "GT": "sgt", "GE": "sge"}
_UNSIGNED_PRED = {"EQ": "eq", "NE": "ne", "LT": "ult", "LE": "ule", "GT": "ugt", "GE": "uge"}


def _total_order_key(ctx: FunctionContext, x: Value) -> Value:
    it = "i32" if x.type == "f32" else "i64"
    bits = ctx.b.cast("bitcast", x, it)
    flip = int_constant(ctx, (1 << (32 if it == "i32" else 64) - 1) - 1, it)
    neg = ctx.b.cmpi("slt", bits, int_constant(ctx, 0, it))
    return ctx.b.select(neg, ctx.b.binary("xori", bits, flip), bits)


@elemental("compare")
def _compare(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    a, c = operands(ctx, instr, idx)
    pt = _in_type(instr)
    direction = str(instr.attrs.get("direction", "EQ"))
    if direction not in _SIGNED_PRED:
        raise ElementalError(f"%{instr.name}: unknown comparison direction {direction}")
    b = ctx.b
    kind = str(instr.attrs.get("type", "FLOAT" if pt.is_float or pt.is_complex else
                               "SIGNED" if pt.kind == "signed" else "UNSIGNED"))
    if pt.is_complex:
        if direction not in ("EQ", "NE"):
            raise ElementalError(f"%{instr.name}: {direction} of complex values")
        return b.op("complex.eq" if direction == "EQ" else "complex.ne", [a, c], ["i1"]).result
    if pt.is_float:
        x, y = up(ctx, a, pt), up(ctx, c, pt)
        if kind == "TOTALORDER":
            return b.cmpi(_SIGNED_PRED[direction], _total_order_key(ctx, x), _total_order_key(ctx, y))
        return b.cmpf(_FLOAT_PRED[direction], x, y)
    table = _SIGNED_PRED if (kind == "SIGNED" and not pt.is_pred) else _UNSIGNED_PRED
    return b.cmpi(table[direction], a, c)


@elemental("select")
def _select(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    p, t, f = operands(ctx, instr, idx)
    return ctx.b.select(p, t, f)


@elemental("clamp")
def _clamp(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    lo, x, hi = operands(ctx, instr, idx)
    pt = instr.shape.element_type
    _no_complex(instr, pt)
    b = ctx.b
    if pt.is_float:
        lo, x, hi = (up(ctx, v, pt) for v in (lo, x, hi))
        return down(ctx, b.binary("minimumf", hi, b.binary("maximumf", x, lo)), pt)
    mx, mn = ("maxsi", "minsi") if pt.kind == "signed" else ("maxui", "minui")
    if pt.is_pred:
        mx, mn = "ori", "andi"
    return b.binary(mn, hi, b.binary(mx, x, lo))


@elemental("map")
def _map(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> list[Value]:
    fn = ctx.emitter.scalar_function(instr.attrs["to_apply"])
    return ctx.b.call(fn, operands(ctx, instr, idx))
