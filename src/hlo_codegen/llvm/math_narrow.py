"""exp for a result rounded to bf16 or f16 next, computed in f32 arithmetic (the host's lowering).

Where it sits: the host lowering (`host.py`, `narrow_exps`) marks every f32 `exp` whose operand is
widened from bf16/f16 and whose every use rounds back to that type - how the emitters write a
bf16 exp, and what XLA:CPU computes (an f32 exp, then the rounding). Such an exp needs f32
accuracy, not the 0.5 ulp of math_f32.py's double-precision form: this one is Cody-Waite
reduction by ln 2 (two-part constant, fused multiply-adds), the Taylor polynomial to r^7 on
|r| <= ln2/2 (truncation below 2^-27) and scaling by 2^k in two halves (subnormal results round
once, as the narrow type's own subnormals need), all in 16-lane f32 vectors where the double form
takes two 8-lane halves. Results are within about 2 f32 ulp, far below a bf16 (or f16) ulp, so
the rounded value is the correctly rounded one except within that of a rounding boundary, as with
XLA's own f32 exp: tests/unit/codegen/test_lowering_math.py checks every bf16 input (all
correctly rounded) and every f16 input (two near-ties one ulp off).
"""

from __future__ import annotations

import math

from hlo_codegen.llvm.text import LV, LLModule

F = "float"
NAME = "__hlo_exp_narrow_f32"
LN2_HI = 0.693145751953125  # 16 significant bits: k * LN2_HI is exact for |k| < 2^8
LN2_LO = math.log(2.0) - LN2_HI
_TAYLOR = [1.0 / math.factorial(k) for k in range(7, -1, -1)]


def define_exp_narrow(module: LLModule) -> str:
    """Define (once) `float @__hlo_exp_narrow_f32(float)`; its name."""
    if NAME in module.defined:
        return NAME
    f = module.function(NAME, F, [(F, "x0")], prefix="internal")
    x = f.args[0]

    def c(v: float) -> LV:
        return f.fconst(F, v)

    def fma(a: LV, b: LV, d: LV) -> LV:
        return f.intrinsic("llvm.fma.f32", F, [a, b, d])

    # Below -104 the result is 0: those lanes compute exp(0) instead, so that a masked input
    # (-1e9, -inf) costs no subnormal arithmetic (a microcode assist on x86), then select 0.
    under = f.fcmp("olt", x, c(-104.0))
    xs = f.select(under, c(0.0), x)
    xc = f.intrinsic("llvm.minnum.f32", F, [f.intrinsic("llvm.maxnum.f32", F, [xs, c(-104.0)]), c(89.0)])
    k = f.intrinsic("llvm.roundeven.f32", F, [f.binop("fmul", xc, c(1.0 / math.log(2.0)))])
    nk = f.inst(F, f"fneg float {k.ref}")
    r = fma(nk, c(LN2_LO), fma(nk, c(LN2_HI), xc))
    p = c(_TAYLOR[0])
    for t in _TAYLOR[1:]:
        p = fma(p, r, c(t))
    ki = f.cast("fptosi", k, "i32")  # in [-150, 129]: two halves, each a normal power of two
    k1 = f.binop("ashr", ki, LV("i32", "1"))
    k2 = f.binop("sub", ki, k1)
    for half in (k1, k2):
        bits = f.binop("shl", f.binop("add", half, LV("i32", "127")), LV("i32", "23"))
        p = f.binop("fmul", p, f.cast("bitcast", bits, F))
    f.ret(f.select(f.fcmp("uno", x, x), x, f.select(under, c(0.0), p)))
    return NAME
