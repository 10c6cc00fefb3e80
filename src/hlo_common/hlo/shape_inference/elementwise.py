"""Shape rules of the elementwise opcodes: unary, binary (compare gives pred), ternary, converts, map.

HLO has no implicit broadcasting: operands of a binary op have identical dimensions. Element
types may differ only in floating-point precision (the result takes the higher precision), as in
XLA's ShapeInference; the verifier rejects mixed precision separately unless allowed.
"""

from __future__ import annotations

from hlo_common.hlo.opcodes import OPCODES
from hlo_common.hlo.shape_inference._base import (
    PRED, InferenceContext, computation_attr, describe, expect_array, fail, higher_precision, int_attr,
    like, make, need_declared, operand_shape, rule, same_type_ignoring_fp, word_attr,
)

# Which element kinds each unary opcode accepts ("float" also covers complex where listed).
_FLOAT = ("float",)
_FLOAT_OR_COMPLEX = ("float", "complex")
_UNARY_KINDS = {
    "floor": _FLOAT, "ceil": _FLOAT, "round-nearest-afz": _FLOAT, "round-nearest-even": _FLOAT,
    "is-finite": _FLOAT, "reduce-precision": _FLOAT,
    "count-leading-zeros": ("signed", "unsigned"), "popcnt": ("signed", "unsigned"),
    "negate": ("signed", "unsigned", "float", "complex"),
    "sign": ("signed", "float", "complex"), "abs": ("signed", "float", "complex"),
    "not": ("pred", "signed", "unsigned"),
    "real": _FLOAT_OR_COMPLEX, "imag": _FLOAT_OR_COMPLEX,
}
for _op in ("cosine", "sine", "tan", "exponential", "exponential-minus-one", "log", "log-plus-one",
            "logistic", "rsqrt", "sqrt", "cbrt", "tanh", "erf", "acos", "acosh", "asin", "asinh",
            "atanh", "cosh", "sinh"):
    _UNARY_KINDS[_op] = _FLOAT_OR_COMPLEX


def _complex_component(etype):
    from hlo_common.hlo.dtypes import PRIMITIVE_TYPES

    return PRIMITIVE_TYPES["f32" if etype.bits == 64 else "f64"]


def _check_kind(opcode: str, shape) -> None:
    kinds = _UNARY_KINDS.get(opcode)
    if kinds is not None and shape.element_type.kind not in kinds:
        fail(f"operand has element type {shape.element_type.name}, expected {' or '.join(kinds)}")


@rule(*_UNARY_KINDS)
def _unary(instr, ctx: InferenceContext):
    s = operand_shape(instr, 0, "the operand")
    _check_kind(instr.opcode, s)
    et = s.element_type
    if instr.opcode == "is-finite":
        return like(s, PRED)
    if instr.opcode in ("real", "imag", "abs") and et.is_complex:
        return like(s, _complex_component(et))
    if instr.opcode == "reduce-precision":
        if int_attr(instr, "exponent_bits") < 1:
            fail(f"exponent_bits is {instr.attrs['exponent_bits']}, expected at least 1")
        if int_attr(instr, "mantissa_bits") < 0:
            fail(f"mantissa_bits is {instr.attrs['mantissa_bits']}, expected at least 0")
    return like(s)


@rule("copy", "domain", "opt-barrier")
def _identity(instr, ctx):
    return like(operand_shape(instr, 0))


@rule("convert")
def _convert(instr, ctx):
    s = operand_shape(instr, 0, "the operand of convert")
    target = need_declared(instr, "convert takes its element type from the written shape")
    if target.is_tuple or not target.is_array:
        fail(f"convert produces {describe(target)}, expected an array")
    return like(s, target.element_type)


@rule("bitcast-convert")
def _bitcast_convert(instr, ctx):
    s = operand_shape(instr, 0, "the operand of bitcast-convert")
    target = need_declared(instr, "bitcast-convert takes its element type from the written shape")
    if not target.is_array:
        fail(f"bitcast-convert produces {describe(target)}, expected an array")
    old, new = s.element_type, target.element_type
    if old.is_complex != new.is_complex:
        fail(f"found {old.name} to {new.name}, expected both complex or both real types")
    lo, hi = sorted((old.bits, new.bits))
    if hi % lo:
        fail(f"bit widths {old.bits} and {new.bits}, expected one to divide the other")
    ratio = hi // lo
    dims = list(s.dims)
    if old.bits > new.bits:
        dims.append(ratio)
    elif old.bits < new.bits:
        if not dims or dims[-1] != ratio:
            fail(f"last dimension of the operand is {dims[-1] if dims else 'absent'}, expected {ratio} "
                 f"(the ratio of bit widths {new.bits}/{old.bits})")
        dims.pop()
    return make(new, dims)


_NO_PRED = ("subtract", "atan2", "power", "divide", "remainder", "shift-left", "shift-right-arithmetic",
            "shift-right-logical")
_INTEGRAL = ("and", "or", "xor")
COMPARE_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
COMPARE_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


def _same_shapes(instr, what: str):
    a = operand_shape(instr, 0, f"lhs of {what}")
    b = operand_shape(instr, 1, f"rhs of {what}")
    if a.dims != b.dims:
        fail(f"operands have dimensions {describe(a)} and {describe(b)}, expected identical dimensions "
             "(HLO has no implicit broadcast)")
    if not same_type_ignoring_fp(a.element_type, b.element_type):
        fail(f"operands have element types {a.element_type.name} and {b.element_type.name}, "
             "expected the same type")
    return a, b


def _binary_result(a, b):
    return like(a, higher_precision(a.element_type, b.element_type))


@rule("add", "maximum", "minimum", "multiply", *_NO_PRED, *_INTEGRAL, "mulhi")
def _binary(instr, ctx):
    a, b = _same_shapes(instr, instr.opcode)
    kind = a.element_type.kind
    if instr.opcode in _NO_PRED and kind == "pred":
        fail("operands have element type pred, expected an arithmetic type")
    if instr.opcode in _INTEGRAL and kind not in ("pred", "signed", "unsigned"):
        fail(f"operands have element type {a.element_type.name}, expected pred or an integral type")
    if instr.opcode == "mulhi" and kind not in ("signed", "unsigned"):
        fail(f"operands have element type {a.element_type.name}, expected an integral type")
    return _binary_result(a, b)


@rule("complex")
def _complex(instr, ctx):
    from hlo_common.hlo.dtypes import PRIMITIVE_TYPES

    a, b = _same_shapes(instr, "complex")
    names = (a.element_type.name, b.element_type.name)
    if names == ("f32", "f32"):
        return like(a, PRIMITIVE_TYPES["c64"])
    if names == ("f64", "f64"):
        return like(a, PRIMITIVE_TYPES["c128"])
    fail(f"operands have element types {names[0]} and {names[1]}, expected both f32 or both f64")


def default_comparison_type(etype) -> str:
    if etype.is_float or etype.is_complex:
        return "FLOAT"
    return "SIGNED" if etype.kind == "signed" else "UNSIGNED"


@rule("compare")
def _compare(instr, ctx):
    a, _b = _same_shapes(instr, "compare")
    direction = word_attr(instr, "direction")
    if direction not in COMPARE_DIRECTIONS:
        fail(f"unknown compare direction '{direction}', expected one of {', '.join(COMPARE_DIRECTIONS)}")
    ctype = word_attr(instr, "type", None)
    if ctype is not None:
        if ctype not in COMPARE_TYPES:
            fail(f"unknown comparison type '{ctype}', expected one of {', '.join(COMPARE_TYPES)}")
        expected = default_comparison_type(a.element_type)
        ok = ctype in ("FLOAT", "TOTALORDER") if expected == "FLOAT" else ctype == expected
        if not ok:
            want = "FLOAT or TOTALORDER" if expected == "FLOAT" else expected
            fail(f"comparison type {ctype} does not fit element type {a.element_type.name}, expected {want}")
    return like(a, PRED)


@rule("stochastic-convert")
def _stochastic_convert(instr, ctx):
    s = operand_shape(instr, 0, "the operand of stochastic-convert")
    r = operand_shape(instr, 1, "the random operand of stochastic-convert")
    target = need_declared(instr, "stochastic-convert takes its element type from the written shape")
    if r.element_type.kind != "unsigned":
        fail(f"random numbers have element type {r.element_type.name}, expected an unsigned integer type")
    if not s.element_type.is_float:
        fail(f"operand has element type {s.element_type.name}, expected a floating-point type")
    if s.element_type.bits != r.element_type.bits:
        fail(f"random numbers have {r.element_type.bits} bits, expected {s.element_type.bits} like the "
             "operand")
    if s.dims != r.dims:
        fail(f"random numbers have shape {describe(r)}, expected the operand's dimensions {describe(s)}")
    return like(s, target.element_type)


@rule("select")
def _select(instr, ctx):
    p = operand_shape(instr, 0, "the predicate of select")
    t = operand_shape(instr, 1, "on-true of select")
    f = operand_shape(instr, 2, "on-false of select")
    if t.dims != f.dims or not same_type_ignoring_fp(t.element_type, f.element_type):
        fail(f"on-true is {describe(t)} and on-false is {describe(f)}, expected the same shape")
    if not p.element_type.is_pred:
        fail(f"predicate has element type {p.element_type.name}, expected pred")
    if p.dims != t.dims:
        fail(f"predicate has dimensions {describe(p)}, expected those of the operands {describe(t)}")
    return like(t, higher_precision(t.element_type, f.element_type))


@rule("clamp")
def _clamp(instr, ctx):
    lo = operand_shape(instr, 0, "min of clamp")
    x = operand_shape(instr, 1, "operand of clamp")
    hi = operand_shape(instr, 2, "max of clamp")
    for what, b in (("min", lo), ("max", hi)):
        if not same_type_ignoring_fp(b.element_type, x.element_type) or (b.dims != x.dims and b.rank):
            fail(f"{what} is {describe(b)}, expected {describe(x)} or a scalar of its element type")
    return like(x)


@rule("map")
def _map(instr, ctx):
    if not instr.operands:
        fail("map has no operands, expected at least one")
    shapes = [operand_shape(instr, i, f"operand {i} of map") for i in range(len(instr.operands))]
    first = shapes[0]
    for i, s in enumerate(shapes[1:], 1):
        if s.dims != first.dims:
            fail(f"operand {i} is {describe(s)}, expected the dimensions of operand 0 {describe(first)}")
    dims = instr.attrs.get("dimensions")
    if dims is not None and tuple(dims) != tuple(range(first.rank)):
        fail(f"dimensions={{{','.join(map(str, dims))}}}, expected all dimensions in order")
    params, result = ctx.program_shape(computation_attr(instr, "to_apply"))
    if len(params) != len(shapes):
        fail(f"to_apply takes {len(params)} parameters, expected {len(shapes)} (one per operand)")
    if result.is_tuple or result.rank:
        fail(f"to_apply returns {describe(result)}, expected a scalar")
    for i, (p, s) in enumerate(zip(params, shapes)):
        if p.is_tuple or p.rank or not same_type_ignoring_fp(p.element_type, s.element_type):
            fail(f"to_apply parameter {i} is {describe(p)}, expected {s.element_type.name}[]")
    return make(result.element_type, first.dims)


ELEMENTWISE_OPCODES = tuple(op for op, info in OPCODES.items() if info.is_elementwise)
