"""Element types in elemental emission: compute types, conversions, bitcast-convert, reduce-precision.

Narrow floats (bf16, f16, f8*, f6*, f4) are computed in f32 and rounded back after every op
(`up` / `down`), as XLA and the interpreter do. `convert_value` follows the interpreter's
`convert`: float -> int truncates toward zero, saturates and maps NaN to 0 (`fptosi` is
saturating); int -> narrow float goes through f32; anything -> pred is `!= 0`; complex -> real
drops the imaginary part.
"""

from __future__ import annotations

import numpy as np

from hlo_codegen.elemental.emitter import ElementalError, FunctionContext, elemental
from hlo_codegen.kernel_ir.ir import Value
from hlo_codegen.kernel_ir.types import FLOAT_FORMATS, complex_element, ir_type
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.hlo.ir import HloInstruction


def compute_type(pt: PrimitiveType) -> str:
    """IR type in which values of `pt` are computed (f32 for narrow floats)."""
    t = ir_type(pt.name)
    return "f32" if pt.is_low_precision_float else t


def up(ctx: FunctionContext, v: Value, pt: PrimitiveType) -> Value:
    return ctx.b.cast("extf", v, "f32") if pt.is_low_precision_float else v


def down(ctx: FunctionContext, v: Value, pt: PrimitiveType) -> Value:
    t = ir_type(pt.name)
    if v.type == t:
        return v
    if pt.is_float:
        return ctx.b.cast("truncf" if FLOAT_FORMATS[v.type].bits > FLOAT_FORMATS[t].bits else "extf", v, t)
    raise ElementalError(f"cannot round a {v.type} into {pt.name}")


def float_constant(ctx: FunctionContext, value: float, t: str) -> Value:
    return ctx.b.constant(float(value), t)


def int_constant(ctx: FunctionContext, value: int, t: str) -> Value:
    return ctx.b.constant(int(value), t)


def _int_to_int(ctx: FunctionContext, v: Value, src: PrimitiveType, dst: PrimitiveType) -> Value:
    t = ir_type(dst.name)
    sbits = 1 if src.is_pred else src.bits
    dbits = dst.bits
    if dbits < sbits:
        return ctx.b.cast("trunci", v, t)
    if dbits > sbits:
        return ctx.b.cast("extsi" if src.kind == "signed" else "extui", v, t)
    return v if v.type == t else ctx.b.cast("bitcast", v, t)


def convert_value(ctx: FunctionContext, v: Value, src: PrimitiveType, dst: PrimitiveType) -> Value:
    """XLA's `convert` of one element from `src` to `dst`."""
    b = ctx.b
    if src is dst:
        return v
    if dst.is_pred:
        if src.is_complex:
            zero = b.constant(complex(0, 0), v.type)
            return b.op("complex.ne", [v, zero], ["i1"]).result
        if src.is_float:
            x = up(ctx, v, src)
            return b.cmpf("une", x, float_constant(ctx, 0.0, x.type))
        return b.cmpi("ne", v, int_constant(ctx, 0, v.type))
    if src.is_complex and not dst.is_complex:
        part = complex_element(v.type)
        v = b.op("complex.re", [v], [part]).result
        src = PRIMITIVE_TYPES[part]
    if dst.is_complex:
        part = complex_element(ir_type(dst.name))
        if src.is_complex:
            re = convert_value(ctx, b.op("complex.re", [v], [complex_element(v.type)]).result,
                               PRIMITIVE_TYPES[complex_element(v.type)], PRIMITIVE_TYPES[part])
            im = convert_value(ctx, b.op("complex.im", [v], [complex_element(v.type)]).result,
                               PRIMITIVE_TYPES[complex_element(v.type)], PRIMITIVE_TYPES[part])
        else:
            re = convert_value(ctx, v, src, PRIMITIVE_TYPES[part])
            im = float_constant(ctx, 0.0, part)
        return b.op("complex.create", [re, im], [ir_type(dst.name)]).result
    if dst.is_integer:
        if src.is_integer or src.is_pred:
            return _int_to_int(ctx, v, src, dst)
        x = up(ctx, v, src)
        return b.cast("fptosi" if dst.kind == "signed" else "fptoui", x, ir_type(dst.name))
    # dst is a float
    t = ir_type(dst.name)
    if src.is_integer or src.is_pred:
        wide = "f64" if t == "f64" else "f32"
        x = b.cast("sitofp" if src.kind == "signed" else "uitofp", v, wide)
        return down(ctx, x, dst)
    x = up(ctx, v, src)
    if x.type == t:
        return x
    if t in ("f32", "f64") and FLOAT_FORMATS[t].bits > FLOAT_FORMATS[x.type].bits:
        return b.cast("extf", x, t)
    return b.cast("truncf", x, t)


@elemental("convert")
def _convert(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    src = instr.operands[0].shape.element_type
    return convert_value(ctx, ctx.operand(instr, 0, idx), src, instr.shape.element_type)


def _as_bits(ctx: FunctionContext, v: Value, pt: PrimitiveType) -> Value:
    """The bit pattern of a value as an integer of its width (pred as an i8 0/1)."""
    if pt.is_pred:
        return ctx.b.cast("extui", v, "i8")
    if pt.is_complex:
        raise ElementalError("bitcast-convert of complex values is not supported")
    t = f"i{pt.bits}" if pt.bits in (2, 4, 8, 16, 32, 64) else ir_type(pt.name)
    return v if v.type == t else ctx.b.cast("bitcast", v, t)


def _from_bits(ctx: FunctionContext, bits: Value, pt: PrimitiveType) -> Value:
    if pt.is_pred:
        return ctx.b.cmpi("ne", bits, int_constant(ctx, 0, bits.type))
    t = ir_type(pt.name)
    return bits if bits.type == t else ctx.b.cast("bitcast", bits, t)


@elemental("bitcast-convert")
def _bitcast_convert(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    src = instr.operands[0].shape.element_type
    dst = instr.shape.element_type
    b = ctx.b
    if src.bits == dst.bits:
        return _from_bits(ctx, _as_bits(ctx, ctx.operand(instr, 0, idx), src), dst)
    if src.bits > dst.bits:  # the output has an extra minor dimension selecting the piece
        word = _as_bits(ctx, ctx.operand(instr, 0, idx[:-1]), src)
        k = b.cast("index_castui", idx[-1], word.type)
        shift = b.binary("muli", k, int_constant(ctx, dst.bits, word.type))
        piece = b.cast("trunci", b.binary("shrui", word, shift), f"i{dst.bits}")
        return _from_bits(ctx, piece, dst)
    ratio = dst.bits // src.bits
    wide = f"i{dst.bits}"
    acc = int_constant(ctx, 0, wide)
    for k in range(ratio):
        piece = _as_bits(ctx, ctx.operand(instr, 0, idx + [b.index(k)]), src)
        piece = b.binary("shli", b.cast("extui", piece, wide), int_constant(ctx, k * src.bits, wide))
        acc = b.binary("ori", acc, piece)
    return _from_bits(ctx, acc, dst)


@elemental("reduce-precision")
def _reduce_precision(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    pt = instr.shape.element_type
    x = up(ctx, ctx.operand(instr, 0, idx), pt)
    return down(ctx, reduce_precision(ctx, x, int(instr.attrs["exponent_bits"]),
                                      int(instr.attrs["mantissa_bits"])), pt)


def reduce_precision(ctx: FunctionContext, x: Value, exponent_bits: int, mantissa_bits: int) -> Value:
    """XLA's reduce-precision bit recipe on an f32/f64 value (NaN stays NaN)."""
    b = ctx.b
    fmt = FLOAT_FORMATS[x.type]
    total, src_m, src_e = fmt.bits, fmt.mantissa_bits, fmt.exponent_bits
    it = f"i{total}"
    c = lambda v: int_constant(ctx, v, it)  # noqa: E731
    u = b.cast("bitcast", x, it)
    mask_all = (1 << total) - 1
    if mantissa_bits < src_m:
        drop = src_m - mantissa_bits
        last = 1 << drop
        bias = b.binary("addi", b.binary("shrui", b.binary("andi", u, c(last)), c(drop)), c((last >> 1) - 1))
        u = b.binary("andi", b.binary("addi", u, bias), c(mask_all ^ (last - 1)))
    if exponent_bits < src_e:
        exp_mask = ((1 << src_e) - 1) << src_m
        exponent_bias = (1 << (src_e - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp, min_exp = exponent_bias + reduced_bias, exponent_bias - reduced_bias
        e = b.binary("andi", u, c(exp_mask))
        signed_zero = b.binary("andi", u, c(1 << (total - 1)))
        signed_inf = b.binary("ori", signed_zero, c(exp_mask))
        u = b.select(b.cmpi("ugt", e, c(max_exp << src_m)), signed_inf, u)
        u = b.select(b.cmpi("ule", e, c(min_exp << src_m)), signed_zero, u)
    r = b.cast("bitcast", u, x.type)
    return b.select(b.cmpf("uno", x, x), x, r)


def scalar_literal(instr: HloInstruction, value) -> object:
    """A numpy scalar of `instr`'s element type as the Python value of a kernel IR constant."""
    pt = instr.shape.element_type
    v = np.asarray(value).reshape(())
    if pt.is_complex:
        return complex(v)
    if pt.is_float:
        return float(v.astype(np.float64))
    if pt.is_pred:
        return int(bool(v))
    return int(v.astype(np.int64) if pt.kind == "signed" or pt.bits < 8 else v.astype(np.uint64))
