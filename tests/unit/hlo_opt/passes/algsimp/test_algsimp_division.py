"""AlgebraicSimplifier: divide, power, remainder and unary-math rewrites (XLA's HandleDivide,
HandlePower, HandleRemainder, HandleAbs, HandleExp, HandleLog, HandleRsqrt, HandleNot)."""

import numpy as np
from algsimp_cases import Case, module_text, parametrize
from pass_testlib import run_pass

from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

CASES = [
    Case("divide_by_one", """
        p = f32[4] parameter(0)
        c = f32[] constant(1)
        b = f32[4] broadcast(c), dimensions={}
        ROOT d = f32[4] divide(p, b)""",
         "CHECK: ROOT %p = f32[4]{0} parameter(0)",
         negative="""
        p = f32[4] parameter(0)
        c = f32[] constant(1)
        b = f32[4] broadcast(c), dimensions={}
        ROOT d = f32[4] divide(b, p)"""),
    Case("divide_integer_by_power_of_two", """
        p = s32[8] parameter(0)
        c = s32[] constant(4)
        b = s32[8] broadcast(c), dimensions={}
        ROOT d = s32[8] divide(p, b)""",
         """CHECK: %[[NEG:.*]] = pred[8]{0} compare(%p, %{{.*}}), direction=LT
            CHECK: %[[ABS:.*]] = s32[8]{0} select(%[[NEG]], %{{.*}}, %p)
            CHECK: %[[Q:.*]] = s32[8]{0} shift-right-logical(%[[ABS]], %{{.*}})
            CHECK: %[[NQ:.*]] = s32[8]{0} negate(%[[Q]])
            CHECK: ROOT %{{.*}} = s32[8]{0} select(%[[NEG]], %[[NQ]], %[[Q]])""",
         negative="""
        p = s32[8] parameter(0)
        c = s32[] constant(6)
        b = s32[8] broadcast(c), dimensions={}
        ROOT d = s32[8] divide(p, b)"""),
    Case("divide_by_power", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        c = f32[4] parameter(2)
        pw = f32[4] power(b, c)
        ROOT d = f32[4] divide(a, pw)""",
         """CHECK: %[[N:.*]] = f32[4]{0} negate(%c)
            CHECK: %[[P:.*]] = f32[4]{0} power(%b, %[[N]])
            CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%a, %[[P]])""",
         negative="""
        a = s32[4] parameter(0)
        b = s32[4] parameter(1)
        c = s32[4] parameter(2)
        pw = s32[4] power(b, c)
        ROOT d = s32[4] divide(a, pw)"""),
    Case("divide_by_sqrt", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        sq = f32[4] sqrt(b)
        ROOT d = f32[4] divide(a, sq)""",
         """CHECK: %[[R:.*]] = f32[4]{0} rsqrt(%b)
            CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%a, %[[R]])""",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        sq = f32[4] sqrt(b)
        d = f32[4] divide(a, sq)
        ROOT t = (f32[4], f32[4]) tuple(d, sq)"""),
    Case("divide_by_rsqrt", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        r = f32[4] rsqrt(b)
        ROOT d = f32[4] divide(a, r)""",
         """CHECK: %[[S:.*]] = f32[4]{0} sqrt(%b)
            CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%a, %[[S]])""",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        r = f32[4] rsqrt(b)
        d = f32[4] divide(a, r)
        ROOT t = (f32[4], f32[4]) tuple(d, r)"""),
    Case("divide_by_constant", """
        a = f32[3] parameter(0)
        c = f32[3] constant({2, 0.5, 3})
        ROOT d = f32[3] divide(a, c)""",
         """CHECK: %[[INV:.*]] = f32[3]{0} constant({0.5, 2, 0.333333343})
            CHECK: ROOT %{{.*}} = f32[3]{0} multiply(%a, %[[INV]])""",
         negative="""
        a = s32[3] parameter(0)
        c = s32[3] constant({2, 7, 3})
        ROOT d = s32[3] divide(a, c)"""),
    Case("divide_of_divides", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        c = f32[4] parameter(2)
        d = f32[4] parameter(3)
        ab = f32[4] divide(a, b)
        cd = f32[4] divide(c, d)
        ROOT r = f32[4] divide(ab, cd)""",
         """CHECK-DAG: %[[AD:.*]] = f32[4]{0} multiply(%a, %d)
            CHECK-DAG: %[[BC:.*]] = f32[4]{0} multiply(%b, %c)
            CHECK: ROOT %{{.*}} = f32[4]{0} divide(%[[AD]], %[[BC]])""",
         negative="""
        a = s32[4] parameter(0)
        b = s32[4] parameter(1)
        c = s32[4] parameter(2)
        d = s32[4] parameter(3)
        ab = s32[4] divide(a, b)
        cd = s32[4] divide(c, d)
        ROOT r = s32[4] divide(ab, cd)"""),
    Case("divide_of_divide", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        c = f32[4] parameter(2)
        ab = f32[4] divide(a, b)
        ROOT r = f32[4] divide(ab, c)""",
         """CHECK: %[[BC:.*]] = f32[4]{0} multiply(%b, %c)
            CHECK: ROOT %{{.*}} = f32[4]{0} divide(%a, %[[BC]])""",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        c = f32[4] parameter(2)
        ab = f32[4] multiply(a, b)
        ROOT r = f32[4] divide(ab, c)"""),
    Case("divide_by_divide", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        c = f32[4] parameter(2)
        bc = f32[4] divide(b, c)
        ROOT r = f32[4] divide(a, bc)""",
         """CHECK: %[[AC:.*]] = f32[4]{0} multiply(%a, %c)
            CHECK: ROOT %{{.*}} = f32[4]{0} divide(%[[AC]], %b)""",
         negative="""
        a = u32[4] parameter(0)
        b = u32[4] parameter(1)
        c = u32[4] parameter(2)
        bc = u32[4] divide(b, c)
        ROOT r = u32[4] divide(a, bc)"""),
    Case("divide_converted_pred_by_broadcast", """
        p = pred[4] parameter(0)
        y = f32[] parameter(1)
        x = f32[4] convert(p)
        yb = f32[4] broadcast(y), dimensions={}
        ROOT d = f32[4] divide(x, yb)""",
         """CHECK: %[[R:.*]] = f32[] divide(%{{.*}}, %y)
            CHECK: %[[RB:.*]] = f32[4]{0} broadcast(%[[R]]), dimensions={}
            CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%[[RB]], %x)""",
         negative="""
        p = s32[4] parameter(0)
        y = f32[] parameter(1)
        x = f32[4] convert(p)
        yb = f32[4] broadcast(y), dimensions={}
        ROOT d = f32[4] divide(x, yb)"""),
    Case("power_zero", """
        a = f32[4] parameter(0)
        z = f32[] constant(0)
        zb = f32[4] broadcast(z), dimensions={}
        ROOT p = f32[4] power(a, zb)""",
         """CHECK: %[[ONE:.*]] = f32[] constant(1)
            CHECK: ROOT %{{.*}} = f32[4]{0} broadcast(%[[ONE]]), dimensions={}""",
         negative="""
        a = f32[4] parameter(0)
        z = f32[] constant(0)
        zb = f32[4] broadcast(z), dimensions={}
        ROOT p = f32[4] power(zb, a)"""),
    Case("power_one", """
        a = f32[4] parameter(0)
        o = f32[] constant(1)
        ob = f32[4] broadcast(o), dimensions={}
        ROOT p = f32[4] power(a, ob)""",
         "CHECK: ROOT %a = f32[4]{0} parameter(0)",
         negative="""
        a = f32[4] parameter(0)
        o = f32[] constant(1.5)
        ob = f32[4] broadcast(o), dimensions={}
        ROOT p = f32[4] power(a, ob)"""),
    Case("power_two", """
        a = f32[4] parameter(0)
        t = f32[] constant(2)
        tb = f32[4] broadcast(t), dimensions={}
        ROOT p = f32[4] power(a, tb)""",
         "CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%a, %a)",
         negative="""
        a = f32[4] parameter(0)
        t = f32[] constant(2.5)
        tb = f32[4] broadcast(t), dimensions={}
        ROOT p = f32[4] power(a, tb)"""),
    Case("power_three", """
        a = f32[4] parameter(0)
        t = f32[] constant(3)
        tb = f32[4] broadcast(t), dimensions={}
        ROOT p = f32[4] power(a, tb)""",
         """CHECK: %[[SQ:.*]] = f32[4]{0} multiply(%a, %a)
            CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%a, %[[SQ]])""",
         negative="""
        a = f32[4] parameter(0)
        t = f32[] constant(4)
        tb = f32[4] broadcast(t), dimensions={}
        ROOT p = f32[4] power(a, tb)"""),
    Case("power_minus_one", """
        a = f32[4] parameter(0)
        t = f32[] constant(-1)
        tb = f32[4] broadcast(t), dimensions={}
        ROOT p = f32[4] power(a, tb)""",
         """CHECK: %[[ONE:.*]] = f32[4]{0} broadcast(%{{.*}}), dimensions={}
            CHECK: ROOT %{{.*}} = f32[4]{0} divide(%[[ONE]], %a)""",
         negative="""
        a = f32[4] parameter(0)
        t = f32[] constant(-2)
        tb = f32[4] broadcast(t), dimensions={}
        ROOT p = f32[4] power(a, tb)"""),
    Case("power_half", """
        a = f32[4] parameter(0)
        x = f32[4] exponential(a)
        h = f32[] constant(0.5)
        hb = f32[4] broadcast(h), dimensions={}
        ROOT p = f32[4] power(x, hb)""",
         "CHECK: ROOT %{{.*}} = f32[4]{0} sqrt(%x)",
         negative="""
        a = f32[4] parameter(0)
        h = f32[] constant(0.5)
        hb = f32[4] broadcast(h), dimensions={}
        ROOT p = f32[4] power(a, hb)"""),
    Case("remainder_of_remainder", """
        a = s32[4] parameter(0)
        b = s32[4] parameter(1)
        r1 = s32[4] remainder(a, b)
        ROOT r2 = s32[4] remainder(r1, b)""",
         "CHECK: ROOT %r1 = s32[4]{0} remainder(%a, %b)",
         negative="""
        a = s32[4] parameter(0)
        b = s32[4] parameter(1)
        r1 = s32[4] remainder(a, b)
        ROOT r2 = s32[4] remainder(r1, a)"""),
    Case("remainder_by_power_of_two", """
        a = u32[8] parameter(0)
        c = u32[] constant(8)
        b = u32[8] broadcast(c), dimensions={}
        ROOT r = u32[8] remainder(a, b)""",
         """CHECK: %[[M:.*]] = u32[] constant(7)
            CHECK: %[[MB:.*]] = u32[8]{0} broadcast(%[[M]]), dimensions={}
            CHECK: ROOT %{{.*}} = u32[8]{0} and(%a, %[[MB]])""",
         negative="""
        a = u32[8] parameter(0)
        c = u32[] constant(12)
        b = u32[8] broadcast(c), dimensions={}
        ROOT r = u32[8] remainder(a, b)"""),
    Case("remainder_of_small_iota", """
        i = s32[6] iota(), iota_dimension=0
        c = s32[] constant(6)
        b = s32[6] broadcast(c), dimensions={}
        ROOT r = s32[6] remainder(i, b)""",
         "CHECK: ROOT %i = s32[6]{0} iota(), iota_dimension=0",
         negative="""
        i = s32[6] iota(), iota_dimension=0
        c = s32[] constant(5)
        b = s32[6] broadcast(c), dimensions={}
        ROOT r = s32[6] remainder(i, b)"""),
    Case("remainder_of_iota_plus_divisor", """
        i = s32[6] iota(), iota_dimension=0
        c = s32[] constant(5)
        b = s32[6] broadcast(c), dimensions={}
        a = s32[6] add(i, b)
        ROOT r = s32[6] remainder(a, b)""",
         "CHECK: ROOT %{{.*}} = s32[6]{0} remainder(%i, %b)",
         negative="""
        i = s8[6] iota(), iota_dimension=0
        c = s8[] constant(125)
        b = s8[6] broadcast(c), dimensions={}
        a = s8[6] add(i, b)
        ROOT r = s8[6] remainder(a, b)"""),
    Case("abs_of_non_negative", """
        a = f32[4] parameter(0)
        x = f32[4] exponential(a)
        ROOT r = f32[4] abs(x)""",
         "CHECK: ROOT %x = f32[4]{0} exponential(%a)",
         negative="""
        a = f32[4] parameter(0)
        x = f32[4] negate(a)
        ROOT r = f32[4] abs(x)"""),
    Case("exp_of_zero", """
        z = f32[] constant(0)
        ROOT r = f32[] exponential(z)""",
         "CHECK: ROOT %{{.*}} = f32[] constant(1)",
         negative="""
        z = f32[] constant(-0.5)
        ROOT r = f32[] exponential(z)"""),
    Case("log_of_power", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        x = f32[4] exponential(a)
        pw = f32[4] power(x, b)
        ROOT r = f32[4] log(pw)""",
         """CHECK: %[[ABS:.*]] = f32[4]{0} abs(%x)
            CHECK: %[[LOG:.*]] = f32[4]{0} log(%[[ABS]])
            CHECK: %[[MUL:.*]] = f32[4]{0} multiply(%[[LOG]], %b)
            CHECK: %[[ZERO:.*]] = pred[4]{0} compare(%b, %{{.*}}), direction=EQ
            CHECK: ROOT %{{.*}} = f32[4]{0} select(%[[ZERO]], %{{.*}}, %[[MUL]])""",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        pw = f32[4] multiply(a, b)
        ROOT r = f32[4] log(pw)"""),
    Case("log_of_sqrt", """
        a = f32[4] parameter(0)
        x = f32[4] exponential(a)
        sq = f32[4] sqrt(x)
        ROOT r = f32[4] log(sq)""",
         """CHECK: %[[LOG:.*]] = f32[4]{0} log(%x)
            CHECK: %[[H:.*]] = f32[] constant(0.5)
            CHECK: %[[HB:.*]] = f32[4]{0} broadcast(%[[H]]), dimensions={}
            CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%[[LOG]], %[[HB]])""",
         negative="""
        a = f32[4] parameter(0)
        x = f32[4] exponential(a)
        sq = f32[4] cbrt(x)
        ROOT r = f32[4] log(sq)"""),
    Case("log_of_rsqrt", """
        a = f32[4] parameter(0)
        x = f32[4] exponential(a)
        rs = f32[4] rsqrt(x)
        ROOT r = f32[4] log(rs)""",
         """CHECK: %[[LOG:.*]] = f32[4]{0} log(%x)
            CHECK: %[[H:.*]] = f32[] constant(-0.5)
            CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%[[LOG]], %{{.*}})""",
         negative="""
        a = f32[4] parameter(0)
        x = f32[4] exponential(a)
        rs = f32[4] sqrt(x)
        ROOT r = f32[4] exponential(rs)"""),
    Case("rsqrt_of_power_minus_two", """
        a = f32[4] parameter(0)
        x = f32[4] abs(a)
        m2 = f32[] constant(-2)
        mb = f32[4] broadcast(m2), dimensions={}
        pw = f32[4] power(x, mb)
        ROOT r = f32[4] rsqrt(pw)""",
         "CHECK: ROOT %x = f32[4]{0} abs(%a)",
         negative="""
        a = f32[4] parameter(0)
        m2 = f32[] constant(-2)
        mb = f32[4] broadcast(m2), dimensions={}
        pw = f32[4] power(a, mb)
        ROOT r = f32[4] rsqrt(pw)"""),
    Case("rsqrt_of_reciprocal", """
        a = f32[4] parameter(0)
        x = f32[4] exponential(a)
        one = f32[] constant(1)
        ob = f32[4] broadcast(one), dimensions={}
        inv = f32[4] divide(ob, x)
        ROOT r = f32[4] rsqrt(inv)""",
         "CHECK: ROOT %{{.*}} = f32[4]{0} sqrt(%x)",
         negative="""
        a = f32[4] parameter(0)
        one = f32[] constant(1)
        ob = f32[4] broadcast(one), dimensions={}
        inv = f32[4] divide(ob, a)
        ROOT r = f32[4] rsqrt(inv)"""),
    Case("not_of_not", """
        p = pred[4] parameter(0)
        n = pred[4] not(p)
        ROOT r = pred[4] not(n)""",
         "CHECK: ROOT %p = pred[4]{0} parameter(0)",
         negative="""
        p = pred[4] parameter(0)
        q = pred[4] parameter(1)
        n = pred[4] and(p, q)
        ROOT r = pred[4] not(n)"""),
]


@parametrize(CASES)
def test_rewrite_applies(case: Case) -> None:
    case.check_applies()


@parametrize(CASES)
def test_rewrite_declines(case: Case) -> None:
    case.check_declines()


def test_integer_division_and_remainder_by_powers_of_two_match_numpy_on_extremes():
    """Shifts and masks round toward zero like C division, including INT_MIN and negative values."""
    text = module_text("""
        p = s8[8] parameter(0)
        c = s8[] constant(4)
        b = s8[8] broadcast(c), dimensions={}
        d = s8[8] divide(p, b)
        r = s8[8] remainder(p, b)
        ROOT t = (s8[8], s8[8]) tuple(d, r)""")
    module, changed = run_pass("algsimp", text)
    assert changed
    x = np.array([-128, -127, -5, -4, -1, 0, 3, 127], np.int8)
    quotient, remainder = evaluate(module, [x])
    expected_q = np.trunc(x.astype(np.float64) / 4).astype(np.int8)
    np.testing.assert_array_equal(quotient, expected_q)
    expected_r = x.astype(np.int32) - 4 * expected_q.astype(np.int32)
    np.testing.assert_array_equal(remainder, expected_r.astype(np.int8))
    assert "divide" not in str([i.opcode for i in module.entry.instructions])
    assert parse_module(text).entry.root.operands[0].opcode == "divide"
