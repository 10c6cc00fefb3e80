"""Our own math (hlo_codegen.llvm.math) and narrow-float conversions (llvm/floats.py), JIT-compiled
on the host and measured against numpy/scipy and ml_dtypes.

`test_math_error_table` prints the measured maximum error of every function (run pytest with -s
to see it) and bounds it: f32 within 1 ulp of the correctly rounded value, f64 within a few ulp
(pow: relative 1e-13, its error grows with |y log x|).
"""

from __future__ import annotations

import ctypes
import functools
import re

import ml_dtypes
import numpy as np
import pytest
from scipy import special

from hlo_codegen.kernel_ir.types import FLOAT_FORMATS
from hlo_codegen.llvm.floats import define_decode, define_encode
from hlo_codegen.llvm.math import MATH_OPS, define_math
from hlo_codegen.llvm.text import LV, LLModule
from hlo_run.host_kernel import compile_host_module

REFERENCE = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erf": special.erf,
    "cbrt": np.cbrt, "powf": np.power, "atan2": np.arctan2, "remf": np.fmod,
}
# Sampling: (kind, low, high); "log" samples log-uniformly (magnitudes), "lin" uniformly.
DOMAIN = {
    "exp": ("lin", -740, 709), "expm1": ("lin", -60, 60), "log": ("log", 1e-300, 1e300),
    "log1p": ("lin", -0.999, 1e4), "tanh": ("lin", -30, 30), "sin": ("log", 1e-6, 1e300),
    "cos": ("log", 1e-6, 1e300), "tan": ("log", 1e-6, 1e300), "sinh": ("lin", -710, 710),
    "cosh": ("lin", -710, 710), "asin": ("lin", -1, 1), "acos": ("lin", -1, 1), "atan": ("log", 1e-8, 1e30),
    "asinh": ("log", 1e-8, 1e300), "acosh": ("log", 1, 1e300), "atanh": ("lin", -0.999999, 0.999999),
    "erf": ("lin", -7, 7), "cbrt": ("log", 1e-300, 1e300), "powf": ("log", 1e-3, 1e3),
    "atan2": ("lin", -10, 10),
    "remf": ("log", 1e-300, 1e300),
}
F64_ULP_BOUND = {"erf": 12.0}
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0]


def _loop(module: LLModule, name: str, in_ty: str, out_ty: str, arity: int, body) -> None:
    """`void name(ptr in0, ptr in1, ptr out, i64 n)` applying body(f, args) elementwise."""
    f = module.function(name, "void", [("ptr", "a"), ("ptr", "b"), ("ptr", "o"), ("i64", "n")])
    loop, done = f.new_block("loop"), f.new_block("done")
    f.br(loop)
    f.set_block(loop)
    i, phi = f.phi("i64", "i")
    phi.incoming.append(("0", "entry"))
    args = [f.load(in_ty, f.gep(in_ty, f.args[k], i)) for k in range(arity)]
    f.store(body(f, args), f.gep(out_ty, f.args[2], i))
    nxt = f.binop("add", i, LV("i64", "1"))
    phi.incoming.append((nxt.ref, f.current))
    f.cbr(f.icmp("slt", nxt, f.args[3]), loop, done)
    f.set_block(done)
    f.ret()


_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


@functools.lru_cache(maxsize=None)
def _math_module():
    m = LLModule("x86_64-unknown-linux-gnu")
    for op in REFERENCE:
        arity = 2 if op in ("powf", "atan2", "remf") else 1
        for ty in ("float", "double"):
            fn = define_math(m, op, ty)
            _loop(m, f"run_{op}_{ty}", ty, ty, arity, lambda f, a, fn=fn, ty=ty: f.call(ty, fn, a))
    return compile_host_module(m.text())


def _run(compiled, name: str, *arrays: np.ndarray) -> np.ndarray:
    arrays = [np.ascontiguousarray(a) for a in arrays]
    out = np.zeros_like(arrays[0])
    second = arrays[1] if len(arrays) > 1 else arrays[0]
    fn = _FN(compiled.engine.get_function_address(name))
    fn(arrays[0].ctypes.data, second.ctypes.data, out.ctypes.data, len(out))
    return out


def _sample(op: str, n: int, rng: np.random.Generator) -> np.ndarray:
    kind, lo, hi = DOMAIN[op]
    if kind == "log":
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), n)) * rng.choice([-1.0, 1.0], n)
        if op in ("acosh", "powf", "log", "cbrt") or lo >= 1:
            x = np.abs(x)
        return x
    return rng.uniform(lo, hi, n)


def _ulps(got: np.ndarray, want: np.ndarray, dtype) -> np.ndarray:
    spacing = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def test_math_error_table() -> None:
    compiled = _math_module()
    rng = np.random.default_rng(11)
    rows = []
    for op, ref in REFERENCE.items():
        x = _sample(op, 20000, rng)
        y = rng.uniform(-30, 30, x.size) if op == "powf" else _sample(op, x.size, rng)
        row = [op]
        for ty, dt in (("float", np.float32), ("double", np.float64)):
            xs, ys = x.astype(dt), y.astype(dt)
            with np.errstate(all="ignore"):
                got = _run(compiled, f"run_{op}_{ty}", xs, ys)
                want = ref(xs.astype(np.float64), ys.astype(np.float64)) if op in ("powf", "atan2", "remf") \
                    else ref(xs.astype(np.float64))
            finite = np.isfinite(want) & (np.abs(want) < np.finfo(dt).max)
            finite &= np.abs(want) > np.finfo(dt).tiny
            assert np.array_equal(np.isnan(got), np.isnan(want)), f"{op} {ty}: NaNs differ"
            ulps = _ulps(got[finite], want[finite], dt)
            rel = np.abs(got[finite].astype(np.float64) - want[finite]) / np.abs(want[finite])
            row.append(f"{ulps.max():6.2f} ulp {rel.max():.1e}")
            if op == "remf":
                assert ulps.max() == 0, f"fmod must be exact, {ulps.max()} ulp"
            elif ty == "float":
                assert ulps.max() <= 1.0, f"{op} f32: {ulps.max()} ulp"
            elif op == "powf":
                assert rel.max() <= 1e-13, f"{op} f64: relative {rel.max()}"
            else:
                assert ulps.max() <= F64_ULP_BOUND.get(op, 5.0), f"{op} f64: {ulps.max()} ulp"
        rows.append(row)
    print("\nown math vs numpy/scipy (max over 20000 samples each):")
    print(f"{'op':8s} {'f32':>20s} {'f64':>20s}")
    for op, a, b in rows:
        print(f"{op:8s} {a:>20s} {b:>20s}")


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_math_special_values(op: str) -> None:
    compiled = _math_module()
    ref = REFERENCE[op]
    a, b = np.meshgrid(np.array(SPECIALS), np.array(SPECIALS + [2.0, 0.5, -3.0]))
    x, y = a.reshape(-1), b.reshape(-1)
    got = _run(compiled, f"run_{op}_double", x, y)
    with np.errstate(all="ignore"):
        want = ref(x, y) if op in ("powf", "atan2", "remf") else ref(x)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0, equal_nan=True)
    assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0])), f"{op}: sign of zero"


def test_every_math_op_has_a_reference() -> None:
    assert set(MATH_OPS) == set(REFERENCE)


NP_TYPES = {
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E4M3": ml_dtypes.float8_e4m3, "f8E3M4": ml_dtypes.float8_e3m4, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz, "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
    "f8E4M3B11FNUZ": ml_dtypes.float8_e4m3b11fnuz, "f6E2M3FN": ml_dtypes.float6_e2m3fn,
    "f6E3M2FN": ml_dtypes.float6_e3m2fn, "f4E2M1FN": ml_dtypes.float4_e2m1fn,
}


@functools.lru_cache(maxsize=None)
def _conversion_module():
    m = LLModule("x86_64-unknown-linux-gnu")
    for name in NP_TYPES:
        fmt = FLOAT_FORMATS[name]
        st = "i16" if fmt.bits == 16 else "i8"
        for src in ("float", "double"):
            fn = define_encode(m, src, fmt)
            _loop(m, f"enc_{src}_{name}", src, st, 1,
                  lambda f, a, fn=fn, st=st, fmt=fmt: f.cast("zext", f.call(f"i{fmt.bits}", fn, a), st))
        fn = define_decode(m, fmt, "float")
        _loop(m, f"dec_{name}", st, "float", 1,
              lambda f, a, fn=fn, fmt=fmt: f.call("float", fn, [f.cast("trunc", a[0], f"i{fmt.bits}")]))
    return compile_host_module(m.text())


def _run_typed(compiled, name: str, x: np.ndarray, out_dtype) -> np.ndarray:
    out = np.zeros(x.size, out_dtype)
    _FN(compiled.engine.get_function_address(name))(x.ctypes.data, x.ctypes.data, out.ctypes.data, x.size)
    return out


@pytest.mark.parametrize("name", sorted(NP_TYPES))
def test_narrow_float_conversions_match_ml_dtypes(name: str) -> None:
    compiled = _conversion_module()
    dt = NP_TYPES[name]
    bits = FLOAT_FORMATS[name].bits
    storage = np.uint16 if bits == 16 else np.uint8
    codes = np.arange(1 << bits, dtype=storage)
    values = codes.view(dt) if bits >= 8 else codes.view(dt)
    decoded = _run_typed(compiled, f"dec_{name}", codes, np.float32)
    want = values.astype(np.float32)
    assert np.array_equal(decoded.view(np.uint32), want.view(np.uint32)) or \
        np.array_equal(np.isnan(decoded), np.isnan(want)) and np.array_equal(decoded[~np.isnan(want)],
                                                                              want[~np.isnan(want)])
    rng = np.random.default_rng(2)
    exact = values.astype(np.float64)
    exact = exact[np.isfinite(exact)][::7 if bits == 16 else 1]  # 16-bit formats: a sample of the codes
    near = np.concatenate([exact, exact * (1 + 2.0 ** -12), exact * (1 - 2.0 ** -12),
                           (exact[:-1] + exact[1:]) / 2 if exact.size > 1 else exact])
    x = np.concatenate([near, rng.standard_normal(5000) * 10.0 ** rng.uniform(-10, 10, 5000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e300, 1e-300]])
    for src, sdt in (("float", np.float32), ("double", np.float64)):
        with np.errstate(all="ignore"):
            xs = x.astype(sdt)
            want = xs.astype(dt).view(storage) if bits >= 8 else xs.astype(dt).view(np.uint8)
        got = _run_typed(compiled, f"enc_{src}_{name}", xs, storage)
        nan = np.isnan(got.view(dt).astype(np.float32)) & np.isnan(want.view(dt).astype(np.float32))
        bad = np.nonzero((got != want) & ~nan)[0]
        assert bad.size == 0, f"{src} -> {name}: {xs[bad[:4]]} gave {got[bad[:4]]}, ml_dtypes {want[bad[:4]]}"


NARROW_EXP = """
#map0 = (th_x, bl_x) -> (bl_x * 256 + th_x), domain: th_x in [0, 255], bl_x in [0, 255]
kernel @narrow_exp grid = [256, 1, 1] block = [256, 1, 1] {
  param @arg0 : bf16[65536]
  param @arg1 : bf16[65536] written
  %th_x = thread_id {dim = x, range = [0, 255]} : index
  %bl_x = block_id {dim = x, range = [0, 255]} : index
  %0 = apply_indexing #map0 %th_x, %bl_x : index
  %1 = load @arg0 %0 : bf16
  %2 = extf %1 : f32
  %3 = exp %2 : f32
  %4 = truncf %3 : bf16
  store @arg1 %4, %0
}
"""


@pytest.mark.parametrize("narrow", ["bf16", "f16"])
def test_narrow_exp_in_f32_arithmetic_on_every_input(narrow: str) -> None:
    """The host computes an f32 exp rounded to bf16 / f16 next in f32 arithmetic (math_exp_f32.py):
    on all 65,536 inputs of the type the result is the correctly rounded exp (inf, 0, subnormals;
    NaN stays NaN) but for a few near-ties one ulp off (none in bf16, where numpy's own f32 exp
    misses one value; two in f16)."""
    from hlo_codegen.kernel_ir import parse_kernel
    from hlo_codegen.llvm import lower_to_host
    from hlo_run.host_kernel import load_host_kernel

    dtype = np.dtype(ml_dtypes.bfloat16) if narrow == "bf16" else np.dtype(np.float16)
    ir = lower_to_host(parse_kernel(NARROW_EXP.replace("bf16", narrow)))
    assert "__hlo_exp_f32" in ir
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(dtype)
    out = np.zeros(65536, dtype)
    load_host_kernel(ir, "narrow_exp")([x, out], 256)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        want = np.exp(x.astype(np.float64)).astype(dtype)  # correctly rounded
    nan = np.isnan(x.astype(np.float32))
    assert np.isnan(out[nan].astype(np.float32)).all()
    steps = np.abs(out.view(np.uint16).astype(np.int32) - want.view(np.uint16).astype(np.int32))[~nan]
    assert np.count_nonzero(steps) <= 4 and steps.max() <= 1  # bf16: none; f16: 2 near-ties, 1 ulp


@pytest.mark.parametrize("narrow", ["bf16", "f16"])
def test_narrow_tanh_in_f32_arithmetic_is_correctly_rounded(narrow: str) -> None:
    """A bf16 / f16 tanh (extf, the f32 tanh in f32 arithmetic of math_tanh_f32.py, truncf: how the
    emitters write one, as in GELU) is the correctly rounded tanh on all 65,536 inputs of the type,
    signed zeros included, NaN for NaN (as the double-precision form it replaced was)."""
    from hlo_codegen.kernel_ir import parse_kernel
    from hlo_codegen.llvm import lower_to_host
    from hlo_run.host_kernel import load_host_kernel

    dtype = np.dtype(ml_dtypes.bfloat16) if narrow == "bf16" else np.dtype(np.float16)
    ir = lower_to_host(parse_kernel(NARROW_EXP.replace("= exp", "= tanh").replace("bf16", narrow)))
    body = re.search(r"define internal float @__hlo_tanh_f32\(.*?\n}", ir, re.S).group(0)
    assert "fpext" not in body and "double" not in body  # computed in f32
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(dtype)
    out = np.zeros(65536, dtype)
    load_host_kernel(ir, "narrow_exp")([x, out], 256)
    with np.errstate(invalid="ignore"):
        want = np.tanh(x.astype(np.float64)).astype(dtype)  # correctly rounded
    nan = np.isnan(x.astype(np.float32))
    assert np.isnan(out[nan].astype(np.float32)).all()
    x, out, want = x[~nan], out[~nan], want[~nan]
    bad = np.nonzero(out.view(np.uint16) != want.view(np.uint16))[0]
    assert bad.size == 0, f"{x[bad[:4]]} gave {out[bad[:4]]}, correctly rounded {want[bad[:4]]}"


NARROW_PICK = """
#map0 = (th_x, bl_x) -> (bl_x * 256 + th_x), domain: th_x in [0, 255], bl_x in [0, 4095]
kernel @narrow_pick grid = [4096, 1, 1] block = [256, 1, 1] {
  param @arg0 : bf16[1048576]
  param @arg1 : bf16[1048576]
  param @arg2 : bf16[1048576] written
  %th_x = thread_id {dim = x, range = [0, 255]} : index
  %bl_x = block_id {dim = x, range = [0, 4095]} : index
  %0 = apply_indexing #map0 %th_x, %bl_x : index
  %1 = load @arg0 %0 : bf16
  %2 = load @arg1 %0 : bf16
  %3 = extf %1 : f32
  %4 = extf %2 : f32
  %5 = OP %3, %4 : f32
  %6 = truncf %5 : bf16
  store @arg2 %6, %0
}
"""


@pytest.mark.parametrize("op", ["maximumf", "minimumf"])
def test_bf16_maximum_narrows_by_dropping_bits(op: str) -> None:
    """A bf16 maximum / minimum (extf, the f32 op, truncf: how the emitters write one) is a bf16
    value, so the host narrows it by taking its top 16 bits instead of rounding
    (arith.exact_narrowings); on a million random bit pairs (NaNs, infinities, subnormals, signed
    zeros) the bits equal ml_dtypes' rounding of the f32 result, NaN for NaN."""
    from hlo_codegen.kernel_ir import parse_kernel
    from hlo_codegen.llvm import lower_to_host
    from hlo_run.host_kernel import load_host_kernel

    bf16 = np.dtype(ml_dtypes.bfloat16)
    ir = lower_to_host(parse_kernel(NARROW_PICK.replace("OP", op)))
    assert "lshr i32" in ir and "__hlo_trunc_float_bf16" not in ir, "the narrowing still rounds"
    rng = np.random.default_rng(12)
    a, b = (rng.integers(0, 1 << 16, 1 << 20, dtype=np.uint32).astype(np.uint16).view(bf16)
            for _ in range(2))
    b[:4096] = a[:4096]  # equal pairs (and +0 / -0 among the random ones)
    out = np.zeros(1 << 20, bf16)
    load_host_kernel(ir, "narrow_pick")([a, b, out], 4096)
    fn = np.maximum if op == "maximumf" else np.minimum
    with np.errstate(invalid="ignore"):
        want = fn(a.astype(np.float32), b.astype(np.float32)).astype(bf16)
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(out.astype(np.float32)), nan)
    assert np.array_equal(out.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
