"""Conversions between f32/f64 and the narrow float formats, as LLVM IR on integer bit patterns.

Where it sits: the lowering (lowering.py) represents f16, bf16, f8*, f6* and f4 values as
integers holding their bits and calls these helpers for `extf` / `truncf`. Both targets use
them (NVPTX swaps in native `cvt` for f32 <-> f16/bf16), so the host never needs compiler-rt
routines such as `__truncsfbf2`, and results match ml_dtypes (the interpreter's types) bit for
bit: round to nearest even as if the exponent were unbounded, then overflow to inf (IEEE
formats), NaN (`fn` / `fnuz` formats) or the largest finite value (formats without NaN).
"""

from __future__ import annotations

from hlo_codegen.kernel_ir.types import FLOAT_FORMATS, FloatFormat
from hlo_codegen.llvm.text import LV, LLFunction, LLModule

I64 = "i64"
_SOURCE = {"float": FLOAT_FORMATS["f32"], "double": FLOAT_FORMATS["f64"]}
_SOURCE_INT = {"float": "i32", "double": "i64"}


def _c(v: int) -> LV:
    return LV(I64, str(v))


def _fields(f: LLFunction, bits: LV, fmt: FloatFormat) -> tuple[LV, LV, LV]:
    """(sign, biased exponent, mantissa) of `bits` (i64) in format `fmt`."""
    sign = f.binop("and", f.binop("lshr", bits, _c(fmt.bits - 1)), _c(1))
    exp = f.binop("and", f.binop("lshr", bits, _c(fmt.mantissa_bits)), _c((1 << fmt.exponent_bits) - 1))
    man = f.binop("and", bits, _c((1 << fmt.mantissa_bits) - 1))
    return sign, exp, man


def _pow2_double(f: LLFunction, k: LV) -> LV:
    """2.0**k as a double for k (i64) in the normal range."""
    return f.cast("bitcast", f.binop("shl", f.binop("add", k, _c(1023)), _c(52)), "double")


def define_decode(module: LLModule, fmt: FloatFormat, dst: str) -> str:
    """`<dst> @__hlo_ext_<fmt>_<dst>(i<bits>)`: the exact value of a narrow float."""
    name = f"__hlo_ext_{fmt.name}_{dst}"
    if name in module.defined:
        return name
    f = module.function(name, dst, [(f"i{fmt.bits}", "x")], prefix="internal", suffix="alwaysinline")
    bits = f.cast("zext", f.args[0], I64)
    if fmt.nan == "fnu":
        return _decode_e8m0(f, bits, dst, name)
    sign, exp, man = _fields(f, bits, fmt)
    is_sub = f.icmp("eq", exp, _c(0))
    sig = f.select(is_sub, man, f.binop("or", man, _c(1 << fmt.mantissa_bits)))
    e = f.select(is_sub, _c(1 - fmt.bias - fmt.mantissa_bits),
                 f.binop("sub", exp, _c(fmt.bias + fmt.mantissa_bits)))
    mag = f.binop("fmul", f.cast("uitofp", sig, "double"), _pow2_double(f, e))
    val = f.select(f.icmp("ne", sign, _c(0)), f.inst("double", f"fneg double {mag.ref}"), mag)
    top = (1 << fmt.exponent_bits) - 1
    nan = f.fconst("double", float("nan"))
    if fmt.nan == "ieee":
        special = f.icmp("eq", exp, _c(top))
        inf = f.select(f.icmp("ne", sign, _c(0)), f.fconst("double", float("-inf")),
                       f.fconst("double", float("inf")))
        val = f.select(special, f.select(f.icmp("eq", man, _c(0)), inf, nan), val)
    elif fmt.nan == "fn":
        val = f.select(f.icmp("eq", f.binop("and", bits, _c((1 << (fmt.bits - 1)) - 1)),
                              _c((1 << (fmt.bits - 1)) - 1)), nan, val)
    elif fmt.nan == "fnuz":
        val = f.select(f.icmp("eq", bits, _c(1 << (fmt.bits - 1))), nan, val)
    f.ret(f.cast("fptrunc", val, dst) if dst == "float" else val)
    return name


def define_encode(module: LLModule, src: str, fmt: FloatFormat) -> str:
    """`i<bits> @__hlo_trunc_<src>_<fmt>(<src>)`: round a float/double into format `fmt`.

    double -> bf16 goes through float, as ml_dtypes (and so the interpreter) rounds it."""
    name = f"__hlo_trunc_{src}_{fmt.name}"
    if name in module.defined:
        return name
    if src == "float" and fmt.name == "bf16":
        return _define_bf16_encode(module, name)
    if src == "double" and fmt.name == "bf16":
        inner = define_encode(module, "float", fmt)
        f = module.function(name, "i16", [(src, "x")], prefix="internal", suffix="alwaysinline")
        f.ret(f.call("i16", inner, [f.cast("fptrunc", f.args[0], "float")]))
        return name
    if fmt.nan == "fnu":
        return _define_e8m0_encode(module, name, src)
    s = _SOURCE[src]
    f = module.function(name, f"i{fmt.bits}", [(src, "x")], prefix="internal", suffix="alwaysinline")
    x = f.args[0]
    bits = f.cast("zext", f.cast("bitcast", x, _SOURCE_INT[src]), I64) if src == "float" else \
        f.cast("bitcast", x, I64)
    sign, exp, man = _fields(f, bits, s)
    is_sub = f.icmp("eq", exp, _c(0))
    m_int = f.select(is_sub, man, f.binop("or", man, _c(1 << s.mantissa_bits)))
    e0 = f.select(is_sub, _c(1 - s.bias - s.mantissa_bits), f.binop("sub", exp, _c(s.bias + s.mantissa_bits)))
    clz = f.intrinsic("llvm.ctlz.i64", I64, [m_int, LV("i1", "false")])
    length = f.binop("sub", _c(64), clz)
    e = f.binop("sub", f.binop("add", e0, length), _c(1))  # floor(log2(value))
    min_e = 1 - fmt.bias
    ulp_e = f.binop("sub", f.intrinsic("llvm.smax.i64", I64, [e, _c(min_e)]), _c(fmt.mantissa_bits))
    shift = f.binop("sub", ulp_e, e0)
    # shift <= 0: exact left shift; 0 < shift <= length: round to nearest even; beyond: zero.
    left = f.binop("shl", m_int, f.intrinsic("llvm.umin.i64", I64, [f.binop("sub", _c(0), shift), _c(63)]))
    sh = f.intrinsic("llvm.umin.i64", I64, [shift, _c(63)])
    q = f.binop("lshr", m_int, sh)
    rem = f.binop("and", m_int, f.binop("sub", f.binop("shl", _c(1), sh), _c(1)))
    half = f.binop("lshr", f.binop("shl", _c(1), sh), _c(1))
    up = f.binop("or", f.icmp("ugt", rem, half),
                 f.binop("and", f.icmp("eq", rem, half), f.icmp("ne", f.binop("and", q, _c(1)), _c(0))))
    q = f.binop("add", q, f.cast("zext", up, I64))
    q = f.select(f.icmp("sle", shift, _c(0)), left, f.select(f.icmp("sgt", shift, length), _c(0), q))
    biased = f.intrinsic("llvm.smax.i64", I64, [f.binop("add", e, _c(fmt.bias)), _c(1)])
    mag = f.binop("add", f.binop("shl", f.binop("sub", biased, _c(1)), _c(fmt.mantissa_bits)), q)
    mag = f.select(f.icmp("eq", m_int, _c(0)), _c(0), mag)
    mag = _overflow(f, fmt, mag, x)
    out = _apply_sign(f, fmt, mag, sign, x)
    f.ret(f.cast("trunc", out, f"i{fmt.bits}"))
    return name


def _decode_e8m0(f: LLFunction, bits: LV, dst: str, name: str) -> str:
    """f8E8M0FNU: the byte e is 2**(e - 127) (a normal double, exact in f32 too), 0xFF is NaN."""
    val = _pow2_double(f, f.binop("sub", bits, _c(127)))
    val = f.select(f.icmp("eq", bits, _c(0xFF)), f.fconst("double", float("nan")), val)
    f.ret(f.cast("fptrunc", val, dst) if dst == "float" else val)
    return name


def _define_e8m0_encode(module: LLModule, name: str, src: str) -> str:
    """float/double -> f8E8M0FNU as ml_dtypes rounds it: a double goes through float; from the
    float's fields (E, M): E + (M >= half) for normals (ties up), 0 or 1 (M > half) for
    subnormals; zero, negative numbers, inf, NaN and overflow become NaN (0xFF)."""
    f = module.function(name, "i8", [(src, "x")], prefix="internal", suffix="alwaysinline")
    x = f.args[0] if src == "float" else f.cast("fptrunc", f.args[0], "float")
    i32 = "i32"
    u = f.cast("bitcast", x, i32)
    exp = f.binop("lshr", u, LV(i32, "23"))  # the sign bit lands above the 8 exponent bits
    man = f.binop("and", u, LV(i32, str((1 << 23) - 1)))
    half = LV(i32, str(1 << 22))
    normal = f.binop("add", exp, f.cast("zext", f.icmp("uge", man, half), i32))
    sub = f.cast("zext", f.icmp("ugt", man, half), i32)
    code = f.select(f.icmp("eq", exp, LV(i32, "0")), sub, normal)
    bad = f.binop("or", f.icmp("uge", code, LV(i32, "255")), f.icmp("eq", u, LV(i32, "0")))
    code = f.select(bad, LV(i32, "255"), code)
    f.ret(f.cast("trunc", code, "i8"))
    return name


def _define_bf16_encode(module: LLModule, name: str) -> str:
    """float -> bf16 by the round-to-nearest-even bias trick (same bits as the generic path). The
    NaN case is chosen before the one shift to the upper half, so that a widening back to f32 that
    follows (a bf16 op's result read by the next op) folds with it into one mask of the upper 16
    bits: two vector instructions fewer per rounding in a vectorized kernel."""
    f = module.function(name, "i16", [("float", "x")], prefix="internal", suffix="alwaysinline")
    i32 = "i32"
    u = f.cast("bitcast", f.args[0], i32)
    lsb = f.binop("and", f.binop("lshr", u, LV(i32, "16")), LV(i32, "1"))
    rounded = f.binop("add", f.binop("add", u, LV(i32, "32767")), lsb)
    quiet = f.binop("or", u, LV(i32, str(64 << 16)))
    out = f.select(f.fcmp("uno", f.args[0], f.args[0]), quiet, rounded)
    f.ret(f.cast("trunc", f.binop("lshr", out, LV(i32, "16")), "i16"))
    return name


def _overflow(f: LLFunction, fmt: FloatFormat, mag: LV, x: LV) -> LV:
    """Magnitude bits after overflow, infinity and NaN handling (sign not applied yet)."""
    top = (1 << fmt.exponent_bits) - 1
    big = f.icmp("ugt", mag, _c(fmt.max_finite_bits))
    is_inf = f.fcmp("oeq", f.intrinsic(f"llvm.fabs.{'f32' if x.ty == 'float' else 'f64'}", x.ty, [x]),
                    f.fconst(x.ty, float("inf")))
    is_nan = f.fcmp("uno", x, x)
    if fmt.nan == "ieee":
        inf_bits = _c(top << fmt.mantissa_bits)
        nan_bits = _c((top << fmt.mantissa_bits) | (1 << (fmt.mantissa_bits - 1)))
        mag = f.select(f.binop("or", big, is_inf), inf_bits, mag)
    elif fmt.nan == "fn":
        nan_bits = _c((1 << (fmt.bits - 1)) - 1)
        mag = f.select(f.binop("or", big, is_inf), nan_bits, mag)
    elif fmt.nan == "fnuz":
        nan_bits = _c(1 << (fmt.bits - 1))
        mag = f.select(f.binop("or", big, is_inf), nan_bits, mag)
    else:  # no inf, no NaN: saturate (NaN is handled with the sign)
        nan_bits = _c(0)
        mag = f.select(f.binop("or", big, is_inf), _c(fmt.max_finite_bits), mag)
    return f.select(is_nan, nan_bits, mag)


def _apply_sign(f: LLFunction, fmt: FloatFormat, mag: LV, sign: LV, x: LV) -> LV:
    signed = f.binop("or", mag, f.binop("shl", sign, _c(fmt.bits - 1)))
    is_nan = f.fcmp("uno", x, x)
    if fmt.nan == "fnuz":  # no negative zero, and 0x80 is NaN: never add a sign to them
        keep = f.binop("or", f.icmp("eq", mag, _c(0)), f.icmp("eq", mag, _c(1 << (fmt.bits - 1))))
        return f.select(keep, mag, signed)
    if fmt.nan == "none":  # ml_dtypes turns NaN into a zero of the opposite sign
        flipped = f.binop("shl", f.binop("xor", sign, _c(1)), _c(fmt.bits - 1))
        return f.select(is_nan, flipped, signed)
    return signed
