"""Lowering of the kernel IR's scalar ops (arith, math, casts, constants, vectors, complex).

Where it sits: `RegionLowering.lower_op` (lowering.py) looks ops up in `ARITH_LOWERING`, one
function per op name. Integer min/max, abs, clz, popcount, float min/max (`llvm.maximum`:
NaN-propagating, -0 < +0), rounding and saturating float-to-int conversion
(`llvm.fptosi.sat`: NaN -> 0, clamped) map onto LLVM intrinsics that both targets implement;
transcendental functions go to the target's math (`Target.math`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from hlo_codegen.kernel_ir.ir import Op
from hlo_codegen.kernel_ir.types import FLOAT_FORMATS, INT_BITS, is_complex, is_vector, vector_shape
from hlo_codegen.llvm import lanes as vec
from hlo_codegen.llvm.floats import define_decode, define_encode
from hlo_codegen.llvm.lowering import LoweringError, RegionLowering, llvm_type, type_suffix
from hlo_codegen.llvm.text import LV, LLFunction

_INT_BINARY = {"addi": "add", "subi": "sub", "muli": "mul", "divsi": "sdiv", "divui": "udiv", "remsi": "srem",
               "remui": "urem", "andi": "and", "ori": "or", "xori": "xor", "shli": "shl", "shrsi": "ashr",
               "shrui": "lshr"}
_INT_INTRINSIC = {"maxsi": "smax", "minsi": "smin", "maxui": "umax", "minui": "umin"}
_FLOAT_BINARY = {"addf": "fadd", "subf": "fsub", "mulf": "fmul", "divf": "fdiv", "remf": "frem"}
_FLOAT_INTRINSIC2 = {"maximumf": "maximum", "minimumf": "minimum", "copysign": "copysign"}
_FLOAT_INTRINSIC1 = {"absf": "fabs", "sqrt": "sqrt", "floor": "floor", "ceil": "ceil", "round": "round",
                     "roundeven": "roundeven", "trunc": "trunc"}
_MATH = ("exp expm1 log log1p tanh sin cos tan sinh cosh asin acos atan asinh acosh atanh erf cbrt powf "
         "atan2").split()
_NATIVE_HALF = {"f16": "half", "bf16": "bfloat"}


def _operands(rl: RegionLowering, op: Op) -> list[LV]:
    return [rl.v(x) for x in op.operands]


def _int_binary(rl: RegionLowering, op: Op) -> list[LV]:
    a, b = _operands(rl, op)
    return [rl.fn.binop(_INT_BINARY[op.name], a, b)]


def _int_intrinsic(rl: RegionLowering, op: Op) -> list[LV]:
    a, b = _operands(rl, op)
    return [rl.fn.intrinsic(f"llvm.{_INT_INTRINSIC[op.name]}.{type_suffix(a.ty)}", a.ty, [a, b])]


def _float_binary(rl: RegionLowering, op: Op) -> list[LV]:
    a, b = _operands(rl, op)
    if op.name == "remf" and rl.target.name == "nvptx":  # PTX has no exact frem: libdevice / own fmod
        return [rl.target.math(rl, "remf", a.ty, [a, b])]
    return [rl.fn.binop(_FLOAT_BINARY[op.name], a, b)]


def _float_intrinsic2(rl: RegionLowering, op: Op) -> list[LV]:
    a, b = _operands(rl, op)
    return [rl.fn.intrinsic(f"llvm.{_FLOAT_INTRINSIC2[op.name]}.{type_suffix(a.ty)}", a.ty, [a, b])]


def _float_intrinsic1(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    return [rl.fn.intrinsic(f"llvm.{_FLOAT_INTRINSIC1[op.name]}.{type_suffix(a.ty)}", a.ty, [a])]


def _negf(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    return [rl.fn.inst(a.ty, f"fneg {a}")]


def _rsqrt(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    f = rl.fn
    root = f.intrinsic(f"llvm.sqrt.{type_suffix(a.ty)}", a.ty, [a])
    return [f.binop("fdiv", f.fconst(a.ty, 1.0), root)]


def _math(rl: RegionLowering, op: Op) -> list[LV]:
    args = _operands(rl, op)
    if args[0].ty not in ("float", "double"):
        raise LoweringError(f"{op.name} on {op.operands[0].type}: compute narrow floats in f32")
    return [rl.target.math(rl, op.name, args[0].ty, args)]


def _int_unary(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    name = {"absi": "abs", "ctlz": "ctlz", "ctpop": "ctpop"}[op.name]
    args = [a] if name == "ctpop" else [a, LV("i1", "false")]
    return [rl.fn.intrinsic(f"llvm.{name}.{type_suffix(a.ty)}", a.ty, args)]


def _cmpi(rl: RegionLowering, op: Op) -> list[LV]:
    a, b = _operands(rl, op)
    return [rl.fn.icmp(op.attrs["predicate"], a, b)]


def _cmpf(rl: RegionLowering, op: Op) -> list[LV]:
    a, b = _operands(rl, op)
    return [rl.fn.fcmp(op.attrs["predicate"], a, b)]


def _select(rl: RegionLowering, op: Op) -> list[LV]:
    c, a, b = _operands(rl, op)
    return [rl.fn.select(c, a, b)]


# -- constants -----------------------------------------------------------------------------------
def scalar_constant(t: str, value) -> LV:
    ty = llvm_type(t)
    if t in INT_BITS:
        bits = INT_BITS[t]
        v = int(value) & ((1 << bits) - 1)
        if bits > 1 and v >= 1 << (bits - 1):
            v -= 1 << bits
        return LLFunction.iconst(ty, v)
    if t in ("f32", "f64"):
        return LLFunction.fconst(ty, float(value))
    if t in FLOAT_FORMATS:
        return LV(ty, str(narrow_float_bits(t, float(value))))
    if is_complex(t):
        e = "f32" if "f32" in t else "f64"
        c = complex(value)
        return LV(ty, f"{{ {scalar_constant(e, c.real)}, {scalar_constant(e, c.imag)} }}")
    raise LoweringError(f"no constant of type {t}")


def narrow_float_bits(t: str, value: float) -> int:
    from hlo_codegen.kernel_ir.types import _HLO_TO_IR
    from hlo_common.hlo.dtypes import PRIMITIVE_TYPES

    hlo = next(k for k, v in _HLO_TO_IR.items() if v == t)
    arr = np.array([value], np.float64).astype(np.float32).astype(PRIMITIVE_TYPES[hlo].np_dtype)
    return int(arr.view(np.uint16 if FLOAT_FORMATS[t].bits == 16 else np.uint8)[0])


def _constant(rl: RegionLowering, op: Op) -> list[LV]:
    t = op.result.type
    value = op.attrs["value"]
    if is_vector(t):
        n, e = vector_shape(t)
        lane = scalar_constant(e, value)
        if rl.target.scalarize_vectors:
            return [vec.constant_lanes(llvm_type(t), lane, n)]
        return [LV(llvm_type(t), "<" + ", ".join([str(lane)] * n) + ">")]
    return [scalar_constant(t, value)]


# -- casts ---------------------------------------------------------------------------------------
def _int_cast(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    ty = llvm_type(op.result.type)
    src_bits, dst_bits = _bits(a.ty), _bits(ty)
    if src_bits == dst_bits:
        return [a]
    if src_bits > dst_bits:
        return [rl.fn.cast("trunc", a, ty)]
    signed = op.name in ("extsi", "index_cast")
    return [rl.fn.cast("sext" if signed else "zext", a, ty)]


def _bits(llty: str) -> int:
    return {"float": 32, "double": 64}.get(llty) or int(llty[1:])


def _int_to_float(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    ty = llvm_type(op.result.type)
    if ty not in ("float", "double"):
        raise LoweringError(f"{op.name} to {op.result.type}: convert through f32")
    return [rl.fn.cast(op.name, a, ty)]


def _float_to_int(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    ty = llvm_type(op.result.type)
    kind = "fptosi" if op.name == "fptosi" else "fptoui"
    return [rl.fn.intrinsic(f"llvm.{kind}.sat.{ty}.{type_suffix(a.ty)}", ty, [a])]


def _extf(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    src, dst = op.operands[0].type, op.result.type
    f = rl.fn
    ty = llvm_type(dst)
    if src == "f32" and dst == "f64":
        return [f.cast("fpext", a, ty)]
    if src not in FLOAT_FORMATS or dst not in ("f32", "f64"):
        raise LoweringError(f"extf {src} -> {dst} is not supported")
    if src == "bf16" and dst == "f32":
        return [f.cast("bitcast", f.binop("shl", f.cast("zext", a, "i32"), LV("i32", "16")), "float")]
    if rl.target.native_half and src == "f16":
        return [f.cast("fpext", f.cast("bitcast", a, "half"), ty)]
    return [f.call(ty, define_decode(rl.module, FLOAT_FORMATS[src], ty), [a])]


# Ops whose result is one of their operands' values: of operands widened from a narrow type, the
# result is exactly representable in it (a NaN result is a quiet NaN of such an operand, or the
# default NaN, whose top bits are a quiet NaN too).
_PICKS = ("maximumf", "minimumf", "select", "negf", "absf")


def exact_narrowings(kernel) -> set[int]:
    """ids of the kernel's `truncf` f32 -> bf16 ops whose operand is an op of _PICKS on values all
    widened from bf16 (`extf`): a bf16 maximum's rounding, which then only drops the low 16 bits."""
    out = set()
    for block in [kernel.body] + [fn.body for fn in kernel.functions]:
        ops = list(block.walk())
        defs = {id(r): o for o in ops for r in o.results}
        for o in ops:
            src = defs.get(id(o.operands[0])) if o.name == "truncf" and o.results[0].type == "bf16" else None
            if src is None or src.name not in _PICKS or src.results[0].type != "f32":
                continue
            floats = [v for v in src.operands if v.type == "f32"]
            if floats and all(defs.get(id(v)) is not None and defs[id(v)].name == "extf"
                              and defs[id(v)].operands[0].type == "bf16" for v in floats):
                out.add(id(o))
    return out


def _truncf(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    src, dst = op.operands[0].type, op.result.type
    f = rl.fn
    ty = llvm_type(dst)
    if src == "f64" and dst == "f32":
        return [f.cast("fptrunc", a, ty)]
    if dst not in FLOAT_FORMATS or src not in ("f32", "f64"):
        raise LoweringError(f"truncf {src} -> {dst} is not supported")
    native = _NATIVE_HALF.get(dst)
    if rl.target.native_half and native and (src == "f32" or dst == "f16"):
        return [f.cast("bitcast", f.cast("fptrunc", a, native), ty)]
    if rl.ml.exact_narrowings is None:
        rl.ml.exact_narrowings = exact_narrowings(rl.ml.kernel)
    if id(op) in rl.ml.exact_narrowings:  # the value is a bf16 value: its top 16 bits
        bits = f.binop("lshr", f.cast("bitcast", a, "i32"), LV("i32", "16"))
        return [f.cast("trunc", bits, ty)]
    return [f.call(ty, define_encode(rl.module, a.ty, FLOAT_FORMATS[dst]), [a])]


def _bitcast(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    ty = llvm_type(op.result.type)
    return [a if a.ty == ty else rl.fn.cast("bitcast", a, ty)]


# -- vectors and complex ---------------------------------------------------------------------------
def _vector_extract(rl: RegionLowering, op: Op) -> list[LV]:
    v, idx = rl.raw(op.operands[0]), rl.v(op.operands[1])
    if rl.target.scalarize_vectors:
        return [vec.extract(rl.fn, vec.as_lanes(rl.fn, v), idx)]
    return [rl.fn.extractelement(llvm_type(op.result.type), v, idx)]


def _vector_insert(rl: RegionLowering, op: Op) -> list[LV]:
    val, v, idx = rl.v(op.operands[0]), rl.raw(op.operands[1]), rl.v(op.operands[2])
    if rl.target.scalarize_vectors:
        return [vec.insert(rl.fn, vec.as_lanes(rl.fn, v), val, idx)]
    return [rl.fn.insertelement(v, val, idx)]


def _complex_create(rl: RegionLowering, op: Op) -> list[LV]:
    re, im = _operands(rl, op)
    f = rl.fn
    agg = f.insertvalue(LV(llvm_type(op.result.type), "undef"), re, 0)
    return [f.insertvalue(agg, im, 1)]


def _complex_part(rl: RegionLowering, op: Op) -> list[LV]:
    (a,) = _operands(rl, op)
    return [rl.fn.extractvalue(llvm_type(op.result.type), a, 0 if op.name == "complex.re" else 1)]


def _parts(rl: RegionLowering, v: LV) -> tuple[LV, LV]:
    ety = v.ty.strip("{} ").split(",")[0].strip()
    return rl.fn.extractvalue(ety, v, 0), rl.fn.extractvalue(ety, v, 1)


def _make(rl: RegionLowering, ty: str, re: LV, im: LV) -> LV:
    f = rl.fn
    return f.insertvalue(f.insertvalue(LV(ty, "undef"), re, 0), im, 1)


def _complex_arith(rl: RegionLowering, op: Op) -> list[LV]:
    f = rl.fn
    vals = _operands(rl, op)
    ty = vals[0].ty
    (ar, ai), rest = _parts(rl, vals[0]), vals[1:]
    if op.name == "complex.neg":
        return [_make(rl, ty, f.inst(ar.ty, f"fneg {ar}"), f.inst(ai.ty, f"fneg {ai}"))]
    br, bi = _parts(rl, rest[0])
    if op.name in ("complex.add", "complex.sub"):
        o = "fadd" if op.name == "complex.add" else "fsub"
        return [_make(rl, ty, f.binop(o, ar, br), f.binop(o, ai, bi))]
    if op.name == "complex.mul":
        re = f.binop("fsub", f.binop("fmul", ar, br), f.binop("fmul", ai, bi))
        im = f.binop("fadd", f.binop("fmul", ar, bi), f.binop("fmul", ai, br))
        return [_make(rl, ty, re, im)]
    # complex.div: Smith's algorithm with numpy's scaling and division-by-zero rule
    abr, abi = _fabs(rl, br), _fabs(rl, bi)
    one = f.fconst(br.ty, 1.0)
    use_r = f.fcmp("oge", abr, abi)
    rat1 = f.binop("fdiv", bi, br)
    scl1 = f.binop("fdiv", one, f.binop("fadd", br, f.binop("fmul", bi, rat1)))
    re1 = f.binop("fmul", f.binop("fadd", ar, f.binop("fmul", ai, rat1)), scl1)
    im1 = f.binop("fmul", f.binop("fsub", ai, f.binop("fmul", ar, rat1)), scl1)
    rat2 = f.binop("fdiv", br, bi)
    scl2 = f.binop("fdiv", one, f.binop("fadd", bi, f.binop("fmul", br, rat2)))
    re2 = f.binop("fmul", f.binop("fadd", f.binop("fmul", ar, rat2), ai), scl2)
    im2 = f.binop("fmul", f.binop("fsub", f.binop("fmul", ai, rat2), ar), scl2)
    zero = f.binop("and", f.fcmp("oeq", abr, f.fconst(br.ty, 0.0)), f.fcmp("oeq", abi, f.fconst(br.ty, 0.0)))
    re = f.select(zero, f.binop("fdiv", ar, abr), f.select(use_r, re1, re2))
    im = f.select(zero, f.binop("fdiv", ai, abr), f.select(use_r, im1, im2))
    return [_make(rl, ty, re, im)]


def _fabs(rl: RegionLowering, v: LV) -> LV:
    return rl.fn.intrinsic(f"llvm.fabs.{type_suffix(v.ty)}", v.ty, [v])


def _complex_abs(rl: RegionLowering, op: Op) -> list[LV]:
    f = rl.fn
    re, im = _parts(rl, _operands(rl, op)[0])
    ar, ai = _fabs(rl, re), _fabs(rl, im)
    big = f.intrinsic(f"llvm.maxnum.{type_suffix(re.ty)}", re.ty, [ar, ai])
    small = f.intrinsic(f"llvm.minnum.{type_suffix(re.ty)}", re.ty, [ar, ai])
    q = f.binop("fdiv", small, big)
    root = f.intrinsic(f"llvm.sqrt.{type_suffix(re.ty)}", re.ty, [f.binop("fadd", f.fconst(re.ty, 1.0),
                                                                         f.binop("fmul", q, q))])
    r = f.binop("fmul", big, root)
    r = f.select(f.fcmp("oeq", big, f.fconst(re.ty, 0.0)), f.fconst(re.ty, 0.0), r)
    # maxnum/minnum drop a NaN part: |z| is NaN then, unless the other part is infinite (hypot's rule)
    r = f.select(f.fcmp("uno", ar, ai), f.fconst(re.ty, float("nan")), r)
    inf = f.binop("or", f.fcmp("oeq", ar, f.fconst(re.ty, float("inf"))),
                  f.fcmp("oeq", ai, f.fconst(re.ty, float("inf"))))
    return [f.select(inf, f.fconst(re.ty, float("inf")), r)]


def _complex_cmp(rl: RegionLowering, op: Op) -> list[LV]:
    f = rl.fn
    (ar, ai), (br, bi) = (_parts(rl, v) for v in _operands(rl, op))
    if op.name == "complex.eq":
        return [f.binop("and", f.fcmp("oeq", ar, br), f.fcmp("oeq", ai, bi))]
    return [f.binop("or", f.fcmp("une", ar, br), f.fcmp("une", ai, bi))]


ARITH_LOWERING: dict[str, Callable[[RegionLowering, Op], list[LV]]] = {
    **{n: _int_binary for n in _INT_BINARY}, **{n: _int_intrinsic for n in _INT_INTRINSIC},
    **{n: _float_binary for n in _FLOAT_BINARY}, **{n: _float_intrinsic2 for n in _FLOAT_INTRINSIC2},
    **{n: _float_intrinsic1 for n in _FLOAT_INTRINSIC1}, **{n: _math for n in _MATH},
    "negf": _negf, "rsqrt": _rsqrt, "absi": _int_unary, "ctlz": _int_unary, "ctpop": _int_unary,
    "cmpi": _cmpi, "cmpf": _cmpf, "select": _select, "constant": _constant,
    "extsi": _int_cast, "extui": _int_cast, "trunci": _int_cast, "index_cast": _int_cast,
    "index_castui": _int_cast, "sitofp": _int_to_float, "uitofp": _int_to_float, "fptosi": _float_to_int,
    "fptoui": _float_to_int, "extf": _extf, "truncf": _truncf, "bitcast": _bitcast,
    "vector.extract": _vector_extract, "vector.insert": _vector_insert,
    "complex.create": _complex_create, "complex.re": _complex_part, "complex.im": _complex_part,
    "complex.add": _complex_arith, "complex.sub": _complex_arith, "complex.mul": _complex_arith,
    "complex.div": _complex_arith, "complex.neg": _complex_arith, "complex.abs": _complex_abs,
    "complex.eq": _complex_cmp, "complex.ne": _complex_cmp,
}
