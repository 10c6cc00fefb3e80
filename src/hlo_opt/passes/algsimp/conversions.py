"""AlgebraicSimplifier rewrites of element-type conversions: convert, bitcast-convert and
reduce-precision (XLA's HandleConvert, HandleBitcastConvert, HandleReducePrecision).

A pair of converts cancels only when the first one is lossless (XLA's CastPreservesValues, here
from ml_dtypes' float descriptions); a narrowing convert around an integer add/subtract/multiply
(and unsigned divide/remainder) of widened operands runs the op in the narrow type.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.hlo.ir import HloInstruction
from hlo_opt.passes.algsimp.base import Rewriter, known_constant, rewrite

_COMPONENT = {"c64": "f32", "c128": "f64"}


def _float_info(t: PrimitiveType) -> tuple[bool, int, int, int, int]:
    """(has infinity, significand width, exponent width, underflow exponent, overflow exponent)."""
    info = ml_dtypes.finfo(t.np_dtype)
    has_inf = bool(np.isinf(np.asarray(np.inf).astype(t.np_dtype)))
    return has_inf, int(info.nmant) + 1, int(info.nexp), int(info.minexp) + 1, int(info.maxexp)


def cast_preserves_values(src: PrimitiveType, dst: PrimitiveType) -> bool:
    """XLA's primitive_util::CastPreservesValues: every value of `src` survives conversion to `dst`."""
    if src is dst or src.is_pred:
        return True
    if dst.is_pred:
        return False
    if dst.is_complex:
        src_c = PRIMITIVE_TYPES[_COMPONENT[src.name]] if src.is_complex else src
        return cast_preserves_values(src_c, PRIMITIVE_TYPES[_COMPONENT[dst.name]])
    if src.is_complex:
        return False
    if src.is_float and dst.is_float:
        s, d = _float_info(src), _float_info(dst)
        return (not s[0] or d[0]) and s[1] <= d[1] and s[2] <= d[2] and s[3] - s[1] >= d[3] - d[1] \
            and s[4] <= d[4]
    if not src.is_integer:
        return False
    src_bits = src.bits - 1 if src.is_signed else src.bits
    if dst.is_float:
        d = _float_info(dst)
        return src_bits <= d[1] and src.bits - 1 < d[4]
    if src.is_signed and not dst.is_signed:
        return False
    return src_bits <= (dst.bits - 1 if dst.is_signed else dst.bits)


@rewrite("convert")
def convert_to_same_type(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConvert: a convert to the operand's own element type is removed."""
    operand = instr.operands[0]
    return operand.shape.element_type is instr.shape.element_type and rw.replace(instr, operand)


@rewrite("convert")
def convert_pair_is_noop(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConvert (IsConvertPairNoOp): convert(convert(A, T1), T0) => A when A is of type T0 and
    the first convert loses nothing (s32 -> s64 -> s32, f16 -> f32 -> f16, pred -> s32 -> pred)."""
    inner = instr.operands[0]
    if inner.opcode != "convert":
        return False
    a = inner.operands[0]
    return a.shape.element_type is instr.shape.element_type \
        and cast_preserves_values(a.shape.element_type, inner.shape.element_type) and rw.replace(instr, a)


@rewrite("convert")
def convert_of_constant(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConvert (use_convert_constant_folding): convert(constant) to a type no wider (and at
    least 8 bits) becomes a constant of that type, when the constant has no other user."""
    const = instr.operands[0]
    src, dst = const.shape.element_type, instr.shape.element_type
    if not rw.opts.use_convert_constant_folding or not known_constant(const) or len(const.users) != 1 \
            or dst.bits > src.bits or dst.bits < 8:
        return False
    from hlo_common.interpreter.conversions import convert_array

    value = convert_array(np.asarray(const.literal), src, dst)
    return rw.replace(instr, rw.add("constant", [], instr.shape, literal=value))


_NARROWABLE = {"add": False, "subtract": False, "multiply": False, "divide": True, "remainder": True}


@rewrite("convert")
def convert_narrows_integer_op(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConvert (TryRemoveUpcastAndDowncastSurroundingBinaryOp): convert(op(convert(a),
    convert(b))) back to a's type => op(a, b) for integer add, subtract, multiply (and unsigned
    divide, remainder) when the wide type holds every narrow value, signedness matches, and each
    inner op has one user."""
    op = instr.operands[0]
    if op.opcode not in _NARROWABLE or len(op.users) != 1:
        return False
    final, wide = instr.shape.element_type, op.shape.element_type
    if _NARROWABLE[op.opcode] and wide.kind != "unsigned":
        return False
    args = []
    for conv in op.operands:
        if conv.opcode != "convert" or len(conv.users) != 1 \
                or conv.operands[0].shape.element_type is not final:
            return False
        args.append(conv.operands[0])
    if not (final.is_integer and wide.is_integer) or final.bits < 8 or wide.bits < 8 \
            or final.kind != wide.kind or not cast_preserves_values(final, wide):
        return False
    return rw.replace(instr, rw.clone(op, args, op.shape.with_element_type(final)))


@rewrite("bitcast-convert")
def bitcast_convert_of_bitcast_convert(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBitcastConvert: in a chain of bitcast-converts only the last one is kept."""
    inner = instr.operands[0]
    return inner.opcode == "bitcast-convert" and \
        rw.replace_with_new(instr, "bitcast-convert", [inner.operands[0]])


@rewrite("bitcast-convert")
def bitcast_convert_of_concatenated_bitcast_converts(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBitcastConvert (TrySimplifyTautologicalBitcastConvert): bitcast-convert(concatenate(
    bitcast-convert(x_i)...)) back to the x_i's type => concatenate(x_i...)."""
    concat = instr.operands[0]
    if concat.opcode != "concatenate":
        return False
    inputs = []
    for part in concat.operands:
        if part.opcode != "bitcast-convert" \
                or part.operands[0].shape.element_type is not instr.shape.element_type:
            return False
        inputs.append(part.operands[0])
    dim = concat.attrs["dimensions"][0]
    if dim >= inputs[0].shape.rank:
        return False
    return rw.replace(instr, rw.add("concatenate", inputs, None, {"dimensions": (dim,)}))


@rewrite("bitcast-convert")
def bitcast_convert_is_noop(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBitcastConvert: a bitcast-convert to the operand's own shape is removed."""
    return rw.replace_if_compatible(instr, instr.operands[0])


@rewrite("reduce-precision")
def reduce_precision_is_noop(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReducePrecision (enable_remove_no_op_reduce_precision): a reduce-precision to the
    operand type's own exponent and mantissa widths is removed."""
    et = instr.operands[0].shape.element_type
    if not rw.opts.enable_remove_no_op_reduce_precision or not et.is_float:
        return False
    info = ml_dtypes.finfo(et.np_dtype)
    return instr.attrs.get("exponent_bits") == int(info.nexp) \
        and instr.attrs.get("mantissa_bits") == int(info.nmant) and rw.replace(instr, instr.operands[0])
