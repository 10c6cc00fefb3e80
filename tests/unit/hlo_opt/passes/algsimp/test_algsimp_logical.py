"""AlgebraicSimplifier: min/max/clamp, bitwise/logical ops, compare, select and complex rewrites
(XLA's HandleMaximum, HandleMinimum, HandleClamp, HandleAnd, HandleOr, HandleXor, HandleCompare,
HandleSelect, HandleComplex, HandleReal, HandleImag)."""

from algsimp_cases import Case, parametrize

CASES = [
    Case("minmax_of_same", """
        p = f32[4] parameter(0)
        ROOT m = f32[4] maximum(p, p)""",
         "CHECK: ROOT %p = f32[4]{0} parameter(0)",
         negative="""
        p = f32[4] parameter(0)
        q = f32[4] negate(p)
        ROOT m = f32[4] minimum(p, q)"""),
    Case("minmax_of_identity_bound", """
        p = f32[4] parameter(0)
        c = f32[] constant(-inf)
        b = f32[4] broadcast(c), dimensions={}
        ROOT m = f32[4] maximum(b, p)""",
         "CHECK: ROOT %p = f32[4]{0} parameter(0)",
         negative="""
        p = f32[4] parameter(0)
        c = f32[] constant(-inf)
        b = f32[4] broadcast(c), dimensions={}
        ROOT m = f32[4] maximum(b, p)""",
         negative_options={"minmax_propagate_nan": False}),
    Case("minmax_of_nested_same_op", """
        x = s32[4] parameter(0)
        y = s32[4] parameter(1)
        inner = s32[4] minimum(x, y)
        ROOT m = s32[4] minimum(inner, y)""",
         "CHECK: ROOT %inner = s32[4]{0} minimum(%x, %y)",
         negative="""
        x = s32[4] parameter(0)
        y = s32[4] parameter(1)
        z = s32[4] parameter(2)
        inner = s32[4] minimum(x, y)
        ROOT m = s32[4] minimum(inner, z)"""),
    Case("minmax_to_clamp", """
        x = f32[4] parameter(0)
        lo = f32[] constant(-1)
        hi = f32[] constant(1)
        lb = f32[4] broadcast(lo), dimensions={}
        hb = f32[4] broadcast(hi), dimensions={}
        mn = f32[4] minimum(x, hb)
        ROOT m = f32[4] maximum(lb, mn)""",
         "CHECK: ROOT %{{.*}} = f32[4]{0} clamp(%lb, %x, %hb)",
         negative="""
        x = f32[4] parameter(0)
        lo = f32[] constant(1)
        hi = f32[] constant(-1)
        lb = f32[4] broadcast(lo), dimensions={}
        hb = f32[4] broadcast(hi), dimensions={}
        mn = f32[4] minimum(x, hb)
        ROOT m = f32[4] maximum(lb, mn)"""),
    Case("maximum_of_clamp", """
        x = f32[4] parameter(0)
        l = f32[] constant(-1)
        h = f32[] constant(1)
        lo = f32[4] broadcast(l), dimensions={}
        hi = f32[4] broadcast(h), dimensions={}
        c = f32[4] clamp(lo, x, hi)
        ROOT m = f32[4] maximum(c, lo)""",
         "CHECK: ROOT %c = f32[4]{0} clamp(%lo, %x, %hi)",
         negative="""
        x = f32[4] parameter(0)
        lo = f32[4] parameter(1)
        hi = f32[4] parameter(2)
        c = f32[4] clamp(lo, x, hi)
        ROOT m = f32[4] maximum(c, hi)"""),
    Case("maximum_sinks_monotone_op", """
        x = f32[4] parameter(0)
        y = f32[4] parameter(1)
        tx = f32[4] tanh(x)
        ty = f32[4] tanh(y)
        ROOT m = f32[4] maximum(tx, ty)""",
         """CHECK: %[[M:.*]] = f32[4]{0} maximum(%x, %y)
            CHECK: ROOT %{{.*}} = f32[4]{0} tanh(%[[M]])""",
         negative="""
        x = f32[4] parameter(0)
        y = f32[4] parameter(1)
        tx = f32[4] exponential(x)
        ty = f32[4] exponential(y)
        ROOT m = f32[4] maximum(tx, ty)"""),
    Case("clamp_of_clamp", """
        x = f32[4] parameter(0)
        lo = f32[4] parameter(1)
        hi = f32[4] parameter(2)
        c1 = f32[4] clamp(lo, x, hi)
        ROOT c2 = f32[4] clamp(lo, c1, hi)""",
         "CHECK: ROOT %c1 = f32[4]{0} clamp(%lo, %x, %hi)",
         negative="""
        x = f32[4] parameter(0)
        lo = f32[4] parameter(1)
        hi = f32[4] parameter(2)
        c1 = f32[4] clamp(lo, x, hi)
        ROOT c2 = f32[4] clamp(hi, c1, lo)"""),
    Case("and_identities", """
        p = pred[4] parameter(0)
        t = pred[] constant(true)
        tb = pred[4] broadcast(t), dimensions={}
        ROOT a = pred[4] and(tb, p)""",
         "CHECK: ROOT %p = pred[4]{0} parameter(0)",
         negative="""
        p = s32[4] parameter(0)
        t = s32[] constant(1)
        tb = s32[4] broadcast(t), dimensions={}
        ROOT a = s32[4] and(tb, p)"""),
    Case("and_of_upper_bounds", """
        x = s32[] parameter(0)
        c1 = s32[] constant(10)
        c2 = s32[] constant(7)
        a = pred[] compare(x, c1), direction=LT
        b = pred[] compare(c2, x), direction=GT
        ROOT r = pred[] and(a, b)""",
         """CHECK: %[[B:.*]] = s32[] constant(7)
            CHECK: ROOT %{{.*}} = pred[] compare(%x, %[[B]]), direction=LT""",
         negative="""
        x = s32[] parameter(0)
        y = s32[] parameter(1)
        c1 = s32[] constant(10)
        c2 = s32[] constant(7)
        a = pred[] compare(x, c1), direction=LT
        b = pred[] compare(y, c2), direction=LT
        ROOT r = pred[] and(a, b)"""),
    Case("or_identities", """
        p = u8[4] parameter(0)
        z = u8[] constant(0)
        zb = u8[4] broadcast(z), dimensions={}
        ROOT a = u8[4] or(p, zb)""",
         "CHECK: ROOT %p = u8[4]{0} parameter(0)",
         negative="""
        p = u8[4] parameter(0)
        z = u8[] constant(1)
        zb = u8[4] broadcast(z), dimensions={}
        ROOT a = u8[4] or(p, zb)"""),
    Case("xor_identities", """
        p = s32[4] parameter(0)
        q = s32[4] parameter(1)
        c1 = pred[4] compare(p, q), direction=GT
        c2 = pred[4] compare(p, q), direction=GT
        ROOT x = pred[4] xor(c1, c2)""",
         """CHECK: %[[F:.*]] = pred[] constant(false)
            CHECK: ROOT %{{.*}} = pred[4]{0} broadcast(%[[F]]), dimensions={}""",
         negative="""
        p = s32[4] parameter(0)
        q = s32[4] parameter(1)
        c1 = pred[4] compare(p, q), direction=GT
        c2 = pred[4] compare(p, q), direction=GE
        ROOT x = pred[4] xor(c1, c2)"""),
    Case("compare_unsigned_with_zero", """
        p = u32[4] parameter(0)
        z = u32[] constant(0)
        zb = u32[4] broadcast(z), dimensions={}
        ROOT c = pred[4] compare(p, zb), direction=LT""",
         """CHECK: %[[F:.*]] = pred[] constant(false)
            CHECK: ROOT %{{.*}} = pred[4]{0} broadcast(%[[F]]), dimensions={}""",
         negative="""
        p = s32[4] parameter(0)
        z = s32[] constant(0)
        zb = s32[4] broadcast(z), dimensions={}
        ROOT c = pred[4] compare(p, zb), direction=LT"""),
    Case("compare_non_negative_with_zero", """
        p = f32[4] parameter(0)
        x = f32[4] multiply(p, p)
        z = f32[] constant(0)
        zb = f32[4] broadcast(z), dimensions={}
        ROOT c = pred[4] compare(zb, x), direction=LE""",
         """CHECK: %[[T:.*]] = pred[] constant(true)
            CHECK: ROOT %{{.*}} = pred[4]{0} broadcast(%[[T]]), dimensions={}""",
         negative="""
        p = s32[4] parameter(0)
        x = s32[4] multiply(p, p)
        z = s32[] constant(0)
        zb = s32[4] broadcast(z), dimensions={}
        ROOT c = pred[4] compare(zb, x), direction=LE"""),
    Case("compare_integer_with_itself", """
        p = s32[4] parameter(0)
        ROOT c = pred[4] compare(p, p), direction=GE""",
         """CHECK: %[[T:.*]] = pred[] constant(true)
            CHECK: ROOT %{{.*}} = pred[4]{0} broadcast(%[[T]]), dimensions={}""",
         negative="""
        p = f32[4] parameter(0)
        ROOT c = pred[4] compare(p, p), direction=GE"""),
    Case("compare_pred_with_constant", """
        p = pred[4] parameter(0)
        t = pred[] constant(true)
        tb = pred[4] broadcast(t), dimensions={}
        ROOT c = pred[4] compare(tb, p), direction=EQ""",
         "CHECK: ROOT %p = pred[4]{0} parameter(0)",
         negative="""
        p = pred[4] parameter(0)
        t = pred[] constant(true)
        tb = pred[4] broadcast(t), dimensions={}
        ROOT c = pred[4] compare(tb, p), direction=NE"""),
    Case("compare_select_of_mask", """
        a = s32[4,4] iota(), iota_dimension=0
        b = s32[4,4] iota(), iota_dimension=1
        ge = pred[4,4] compare(a, b), direction=GE
        one = f32[] constant(1)
        zero = f32[] constant(0)
        ones = f32[4,4] broadcast(one), dimensions={}
        zeros = f32[4,4] broadcast(zero), dimensions={}
        sel = f32[4,4] select(ge, ones, zeros)
        ROOT c = pred[4,4] compare(sel, zeros), direction=NE""",
         "CHECK: ROOT %ge = pred[4,4]{1,0} compare(%a, %b), direction=GE",
         negative="""
        a = s32[4,4] iota(), iota_dimension=0
        b = s32[4,4] iota(), iota_dimension=1
        ge = pred[4,4] compare(a, b), direction=GT
        one = f32[] constant(1)
        zero = f32[] constant(0)
        ones = f32[4,4] broadcast(one), dimensions={}
        zeros = f32[4,4] broadcast(zero), dimensions={}
        sel = f32[4,4] select(ge, ones, zeros)
        ROOT c = pred[4,4] compare(sel, zeros), direction=NE"""),
    Case("compare_greater_than_minmax", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        m = f32[4] maximum(a, b)
        ROOT c = pred[4] compare(m, a), direction=GT""",
         "CHECK: ROOT %c = pred[4]{0} compare(%b, %a), direction=GT",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        m = f32[4] maximum(a, b)
        ROOT c = pred[4] compare(m, a), direction=GE"""),
    Case("select_same_branches", """
        p = pred[4] parameter(0)
        x = f32[4] parameter(1)
        ROOT s = f32[4] select(p, x, x)""",
         "CHECK: ROOT %x = f32[4]{0} parameter(1)",
         negative="""
        p = pred[4] parameter(0)
        x = f32[4] parameter(1)
        y = f32[4] parameter(2)
        ROOT s = f32[4] select(p, x, y)"""),
    Case("select_constant_predicate", """
        x = f32[4] parameter(0)
        y = f32[4] parameter(1)
        f = pred[] constant(false)
        fb = pred[4] broadcast(f), dimensions={}
        ROOT s = f32[4] select(fb, x, y)""",
         "CHECK: ROOT %y = f32[4]{0} parameter(1)",
         negative="""
        x = f32[4] parameter(0)
        y = f32[4] parameter(1)
        f = pred[4] constant({false, true, false, false})
        ROOT s = f32[4] select(f, x, y)"""),
    Case("select_of_not", """
        p = pred[4] parameter(0)
        x = f32[4] parameter(1)
        y = f32[4] parameter(2)
        n = pred[4] not(p)
        ROOT s = f32[4] select(n, x, y)""",
         "CHECK: ROOT %{{.*}} = f32[4]{0} select(%p, %y, %x)",
         negative="""
        p = pred[4] parameter(0)
        x = f32[4] parameter(1)
        y = f32[4] parameter(2)
        n = pred[4] parameter(3)
        a = pred[4] and(p, n)
        ROOT s = f32[4] select(a, x, y)"""),
    Case("select_of_bool_constants", """
        p = pred[4] parameter(0)
        t = pred[] constant(true)
        f = pred[] constant(false)
        tb = pred[4] broadcast(t), dimensions={}
        fb = pred[4] broadcast(f), dimensions={}
        ROOT s = pred[4] select(p, fb, tb)""",
         "CHECK: ROOT %{{.*}} = pred[4]{0} not(%p)",
         negative="""
        p = pred[4] parameter(0)
        q = pred[4] parameter(1)
        t = pred[] constant(true)
        tb = pred[4] broadcast(t), dimensions={}
        ROOT s = pred[4] select(p, q, tb)"""),
    Case("select_of_compare_on_preds", """
        a = pred[4] parameter(0)
        b = pred[4] parameter(1)
        c = pred[4] compare(a, b), direction=GT
        ROOT s = pred[4] select(c, a, b)""",
         "CHECK: ROOT %{{.*}} = pred[4]{0} or(%a, %b)",
         negative="""
        a = pred[4] parameter(0)
        b = pred[4] parameter(1)
        c = pred[4] compare(b, a), direction=GT
        ROOT s = pred[4] select(c, a, b)"""),
    Case("select_into_dynamic_update_slice", """
        p = pred[8] parameter(0)
        xs = f32[8] parameter(1)
        x = f32[2] parameter(2)
        i = s32[] parameter(3)
        d = f32[8] dynamic-update-slice(xs, x, i)
        ROOT s = f32[8] select(p, xs, d)""",
         """CHECK: %[[P:.*]] = pred[2]{0} dynamic-slice(%p, %i), dynamic_slice_sizes={2}
            CHECK: %[[W:.*]] = f32[2]{0} dynamic-slice(%xs, %i), dynamic_slice_sizes={2}
            CHECK: %[[S:.*]] = f32[2]{0} select(%[[P]], %[[W]], %x)
            CHECK: ROOT %{{.*}} = f32[8]{0} dynamic-update-slice(%xs, %[[S]], %i)""",
         negative="""
        p = pred[8] parameter(0)
        xs = f32[8] parameter(1)
        ys = f32[8] parameter(4)
        x = f32[2] parameter(2)
        i = s32[] parameter(3)
        d = f32[8] dynamic-update-slice(ys, x, i)
        ROOT s = f32[8] select(p, xs, d)"""),
    Case("complex_of_real_imag", """
        c = c64[4] parameter(0)
        r = f32[4] real(c)
        i = f32[4] imag(c)
        ROOT z = c64[4] complex(r, i)""",
         "CHECK: ROOT %c = c64[4]{0} parameter(0)",
         negative="""
        c = c64[4] parameter(0)
        r = f32[4] real(c)
        i = f32[4] real(c)
        ROOT z = c64[4] complex(r, i)"""),
    Case("real_of_complex", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        z = c64[4] complex(a, b)
        ROOT r = f32[4] real(z)""",
         "CHECK: ROOT %a = f32[4]{0} parameter(0)",
         negative="""
        z = c64[4] parameter(0)
        ROOT r = f32[4] real(z)"""),
    Case("real_of_real_value", """
        a = f32[4] parameter(0)
        ROOT r = f32[4] real(a)""",
         "CHECK: ROOT %a = f32[4]{0} parameter(0)",
         negative="""
        z = c64[4] parameter(0)
        ROOT r = f32[4] real(z)"""),
    Case("imag_of_complex", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        z = c64[4] complex(a, b)
        ROOT r = f32[4] imag(z)""",
         "CHECK: ROOT %b = f32[4]{0} parameter(1)",
         negative="""
        z = c64[4] parameter(0)
        ROOT r = f32[4] imag(z)"""),
    Case("imag_of_real_value", """
        a = f32[4] parameter(0)
        ROOT r = f32[4] imag(a)""",
         """CHECK: %[[Z:.*]] = f32[] constant(0)
            CHECK: ROOT %{{.*}} = f32[4]{0} broadcast(%[[Z]]), dimensions={}""",
         negative="""
        z = c64[4] parameter(0)
        ROOT r = f32[4] imag(z)"""),
]


@parametrize(CASES)
def test_rewrite_applies(case: Case) -> None:
    case.check_applies()


@parametrize(CASES)
def test_rewrite_declines(case: Case) -> None:
    case.check_declines()
